/**
 * Admission budgets of the relay: per mailbox, relay-wide active envelopes, and dedupe receipts,
 * reserved all together or not at all and never by eviction. Every change is checked: no counter
 * goes negative, no mailbox exceeds its bound, and `audit` checks that the relay-wide usage is
 * the sum of the mailboxes' usage.
 */
import {
  relayMaxActiveBytes,
  relayMaxActiveItems,
  relayMaxMailboxBytes,
  relayMaxMailboxItems,
  relayMaxReceiptBytes,
  relayMaxReceipts,
} from "../../protocol/limits.ts";
import { violation } from "./invariant.ts";
import type { CapacityBudget } from "./store.ts";

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

export interface FullBudget {
  readonly budget: CapacityBudget;
  readonly details: Readonly<Record<string, number>>;
}

export interface Budgets {
  /** Reserves one item of `itemBytes` in a mailbox and one receipt of `receiptBytes`; or names the full budget and reserves nothing. */
  reserve(mailbox: MailboxUsage, itemBytes: number, receiptBytes: number): FullBudget | undefined;
  releaseItem(mailbox: MailboxUsage, itemBytes: number): void;
  releaseReceipt(receiptBytes: number): void;
  /** Throws `INVARIANT_VIOLATED` unless the relay-wide usage is the sum of these mailboxes' usage. */
  audit(mailboxes: Iterable<MailboxUsage>): void;
  usage(): BudgetUsage;
}

export function createBudgets(): Budgets {
  let activeItems = 0;
  let activeBytes = 0;
  let receipts = 0;
  let receiptBytes = 0;

  function checkMailbox(mailbox: MailboxUsage): void {
    if (mailbox.items < 0 || mailbox.bytes < 0) throw violation("mailbox usage is never negative", { ...mailbox });
    if (mailbox.items > relayMaxMailboxItems || mailbox.bytes > relayMaxMailboxBytes) {
      throw violation("mailbox usage stays within its bound", { ...mailbox });
    }
  }

  function checkActive(): void {
    if (activeItems < 0 || activeBytes < 0) throw violation("relay-wide usage is never negative", { activeItems, activeBytes });
  }

  function checkReceipts(): void {
    if (receipts < 0 || receiptBytes < 0) throw violation("receipt usage is never negative", { receipts, receiptBytes });
  }

  return {
    reserve(mailbox, itemBytes, receiptCost): FullBudget | undefined {
      if (mailbox.items + 1 > relayMaxMailboxItems || mailbox.bytes + itemBytes > relayMaxMailboxBytes) {
        return { budget: "mailbox", details: { items: mailbox.items, bytes: mailbox.bytes } };
      }
      if (activeItems + 1 > relayMaxActiveItems || activeBytes + itemBytes > relayMaxActiveBytes) {
        return { budget: "active", details: { items: activeItems, bytes: activeBytes } };
      }
      if (receipts + 1 > relayMaxReceipts || receiptBytes + receiptCost > relayMaxReceiptBytes) {
        return { budget: "receipts", details: { receipts, bytes: receiptBytes } };
      }
      mailbox.items += 1;
      mailbox.bytes += itemBytes;
      activeItems += 1;
      activeBytes += itemBytes;
      receipts += 1;
      receiptBytes += receiptCost;
      checkMailbox(mailbox);
      return undefined;
    },
    releaseItem(mailbox, itemBytes) {
      mailbox.items -= 1;
      mailbox.bytes -= itemBytes;
      activeItems -= 1;
      activeBytes -= itemBytes;
      checkMailbox(mailbox);
      checkActive();
    },
    releaseReceipt(receiptCost) {
      receipts -= 1;
      receiptBytes -= receiptCost;
      checkReceipts();
    },
    audit(mailboxes) {
      let items = 0;
      let bytes = 0;
      for (const mailbox of mailboxes) {
        checkMailbox(mailbox);
        items += mailbox.items;
        bytes += mailbox.bytes;
      }
      if (items !== activeItems || bytes !== activeBytes) {
        throw violation("relay-wide usage is the sum of the mailboxes' usage", { activeItems, activeBytes, mailboxItems: items, mailboxBytes: bytes });
      }
      checkReceipts();
    },
    usage: () => ({ activeItems, activeBytes, receipts, receiptBytes }),
  };
}
