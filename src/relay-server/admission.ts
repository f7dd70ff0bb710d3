/**
 * Relay admission: store budgets reserved atomically and never by eviction, and the bound on
 * requests worked on at once (relay-volatile-v1.md §3.6, Part B §4).
 */
import { TaskError } from "../protocol/errors.ts";
import {
  relayMaxActiveBytes,
  relayMaxActiveItems,
  relayMaxConcurrentRequests,
  relayMaxMailboxBytes,
  relayMaxMailboxItems,
  relayMaxReceiptBytes,
  relayMaxReceipts,
  relayOverloadRetryAfterMs,
} from "../protocol/limits.ts";

export interface MailboxUsage {
  items: number;
  bytes: number;
}

export interface BudgetUsage {
  readonly activeItems: number;
  readonly activeBytes: number;
  readonly receipts: number;
  readonly receiptBytes: number;
}

export interface Budgets {
  /** Reserves one item for a mailbox and one receipt, or throws `RELAY_CAPACITY`; all or nothing. */
  reserve(mailbox: MailboxUsage, itemBytes: number, receiptBytes: number): void;
  releaseItem(mailbox: MailboxUsage, itemBytes: number): void;
  releaseReceipt(receiptBytes: number): void;
  usage(): BudgetUsage;
}

function full(budget: string, details: Record<string, number>): TaskError {
  // Store budgets carry no retryAfterMs (the caller's backoff policy applies).
  return new TaskError("RELAY_CAPACITY", { details: { budget, ...details } });
}

export function createBudgets(): Budgets {
  let activeItems = 0;
  let activeBytes = 0;
  let receipts = 0;
  let receiptBytes = 0;
  return {
    reserve(mailbox, itemBytes, receiptCost) {
      if (mailbox.items + 1 > relayMaxMailboxItems || mailbox.bytes + itemBytes > relayMaxMailboxBytes) {
        throw full("mailbox", { items: mailbox.items, bytes: mailbox.bytes });
      }
      if (activeItems + 1 > relayMaxActiveItems || activeBytes + itemBytes > relayMaxActiveBytes) {
        throw full("active", { items: activeItems, bytes: activeBytes });
      }
      if (receipts + 1 > relayMaxReceipts || receiptBytes + receiptCost > relayMaxReceiptBytes) {
        throw full("receipts", { receipts, bytes: receiptBytes });
      }
      mailbox.items += 1;
      mailbox.bytes += itemBytes;
      activeItems += 1;
      activeBytes += itemBytes;
      receipts += 1;
      receiptBytes += receiptCost;
    },
    releaseItem(mailbox, itemBytes) {
      mailbox.items -= 1;
      mailbox.bytes -= itemBytes;
      activeItems -= 1;
      activeBytes -= itemBytes;
    },
    releaseReceipt(receiptCost) {
      receipts -= 1;
      receiptBytes -= receiptCost;
    },
    usage: () => ({ activeItems, activeBytes, receipts, receiptBytes }),
  };
}

export interface RequestSlots {
  /** Takes a slot, or throws `RELAY_CAPACITY` with `retryAfterMs` when all are busy. */
  enter(): () => void;
  inFlight(): number;
}

export function createRequestSlots(limit = relayMaxConcurrentRequests): RequestSlots {
  let busy = 0;
  return {
    enter() {
      if (busy >= limit) {
        throw new TaskError("RELAY_CAPACITY", { details: { budget: "requests", retryAfterMs: relayOverloadRetryAfterMs } });
      }
      busy += 1;
      let released = false;
      return () => {
        if (released) return;
        released = true;
        busy -= 1;
      };
    },
    inFlight: () => busy,
  };
}
