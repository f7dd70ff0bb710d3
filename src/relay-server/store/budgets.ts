/**
 * Admission budgets of the relay: per mailbox, relay-wide active envelopes, and dedupe receipts,
 * reserved all together or not at all and never by eviction — and, inside them, each sender's
 * fair share (`quotas-v1`, limits.ts "Fair shares"): its share of a mailbox, of the relay-wide
 * envelope budget and of the receipt budget, so that no one registration spends what every other
 * sender needs. Every change is checked: no counter goes negative, no mailbox or share exceeds its
 * bound, and `audit` checks that the relay-wide usage is the sum of the mailboxes' usage and of the
 * senders' usage, and each mailbox's usage the sum of its senders' shares.
 */
import {
  relayMaxActiveBytes,
  relayMaxActiveItems,
  relayMaxMailboxBytes,
  relayMaxMailboxItems,
  relayMaxReceiptBytes,
  relayMaxReceipts,
  relaySenderMaxActiveBytes,
  relaySenderMaxActiveItems,
  relaySenderMaxMailboxBytes,
  relaySenderMaxMailboxItems,
  relaySenderMaxReceiptBytes,
  relaySenderMaxReceipts,
} from "../../protocol/limits.ts";
import { violation } from "./invariant.ts";
import type { CapacityBudget, SenderQuota } from "./store.ts";

export interface MailboxUsage {
  items: number;
  bytes: number;
}

/** One sender's relay-wide usage: its queued envelopes and the receipts of its sends. */
export interface SenderUsage {
  items: number;
  bytes: number;
  receipts: number;
  receiptBytes: number;
}

export interface BudgetUsage {
  readonly activeItems: number;
  readonly activeBytes: number;
  readonly receipts: number;
  readonly receiptBytes: number;
}

/** Why an admission does not fit: a sender's share (answered with `retryAfterMs`) or a relay budget. */
export type Refusal =
  | { readonly kind: "quota"; readonly quota: SenderQuota; readonly details: Readonly<Record<string, number>> }
  | { readonly kind: "full"; readonly budget: CapacityBudget; readonly details: Readonly<Record<string, number>> };

/** What one admission takes: an item in a mailbox (and the sender's share of it) and a receipt. */
export interface Reservation {
  readonly mailbox: MailboxUsage;
  /** The sender's usage of this mailbox (the caller keeps it with the mailbox). */
  readonly share: MailboxUsage;
  readonly senderId: string;
  readonly itemBytes: number;
  readonly receiptBytes: number;
}

/** A mailbox's usage with its senders' shares, for the audit. */
export interface MailboxShares {
  readonly usage: MailboxUsage;
  readonly shares: Iterable<MailboxUsage>;
}

export interface Budgets {
  /** Reserves one item and one receipt; or names the share or budget it would exceed and reserves nothing. */
  reserve(reservation: Reservation): Refusal | undefined;
  releaseItem(mailbox: MailboxUsage, share: MailboxUsage, senderId: string, itemBytes: number): void;
  releaseReceipt(senderId: string, receiptBytes: number): void;
  /** Throws `INVARIANT_VIOLATED` unless the relay-wide usage is the sum of these mailboxes' usage and of the senders' usage. */
  audit(mailboxes: Iterable<MailboxShares>): void;
  usage(): BudgetUsage;
  /** Senders holding anything (queued envelopes or receipts). */
  senders(): number;
}

const over = (usage: MailboxUsage, items: number, bytes: number) => usage.items > items || usage.bytes > bytes;

/** The first share of the sender (`SenderQuota` order) that one more item of `itemBytes` and one more receipt would exceed. */
function quotaOf(reservation: Reservation, sender: SenderUsage): Refusal | undefined {
  const { share, itemBytes, receiptBytes } = reservation;
  if (share.items + 1 > relaySenderMaxMailboxItems || share.bytes + itemBytes > relaySenderMaxMailboxBytes) {
    return { kind: "quota", quota: "mailbox-share", details: { items: share.items, bytes: share.bytes } };
  }
  if (sender.items + 1 > relaySenderMaxActiveItems || sender.bytes + itemBytes > relaySenderMaxActiveBytes) {
    return { kind: "quota", quota: "sender-active", details: { items: sender.items, bytes: sender.bytes } };
  }
  if (sender.receipts + 1 > relaySenderMaxReceipts || sender.receiptBytes + receiptBytes > relaySenderMaxReceiptBytes) {
    return { kind: "quota", quota: "sender-receipts", details: { receipts: sender.receipts, bytes: sender.receiptBytes } };
  }
  return undefined;
}

export function createBudgets(): Budgets {
  let activeItems = 0;
  let activeBytes = 0;
  let receipts = 0;
  let receiptBytes = 0;
  /** Senders holding anything; a sender is forgotten once it holds nothing (the map stays bounded). */
  const senders = new Map<string, SenderUsage>();

  function checkMailbox(mailbox: MailboxUsage): void {
    if (mailbox.items < 0 || mailbox.bytes < 0) throw violation("mailbox usage is never negative", { ...mailbox });
    if (over(mailbox, relayMaxMailboxItems, relayMaxMailboxBytes)) throw violation("mailbox usage stays within its bound", { ...mailbox });
  }

  function checkShare(share: MailboxUsage): void {
    if (share.items < 0 || share.bytes < 0) throw violation("a sender's share of a mailbox is never negative", { ...share });
    if (over(share, relaySenderMaxMailboxItems, relaySenderMaxMailboxBytes))
      throw violation("a sender's share of a mailbox stays within its bound", { ...share });
  }

  function checkSender(sender: SenderUsage): void {
    if (sender.items < 0 || sender.bytes < 0 || sender.receipts < 0 || sender.receiptBytes < 0)
      throw violation("a sender's usage is never negative", { ...sender });
    if (
      over(sender, relaySenderMaxActiveItems, relaySenderMaxActiveBytes) ||
      sender.receipts > relaySenderMaxReceipts ||
      sender.receiptBytes > relaySenderMaxReceiptBytes
    ) {
      throw violation("a sender's usage stays within its shares", { ...sender });
    }
  }

  function checkReceipts(): void {
    if (receipts < 0 || receiptBytes < 0) throw violation("receipt usage is never negative", { receipts, receiptBytes });
  }

  /** The sender's usage (a sender holding nothing has none: releasing for it drives the counters negative, which the checks catch). */
  const usageOf = (senderId: string): SenderUsage => senders.get(senderId) ?? { items: 0, bytes: 0, receipts: 0, receiptBytes: 0 };

  function forgetIfIdle(senderId: string, sender: SenderUsage): void {
    if (sender.items === 0 && sender.bytes === 0 && sender.receipts === 0 && sender.receiptBytes === 0) senders.delete(senderId);
  }

  return {
    reserve(reservation): Refusal | undefined {
      const { mailbox, share, senderId, itemBytes, receiptBytes: receiptCost } = reservation;
      const sender = senders.get(senderId) ?? { items: 0, bytes: 0, receipts: 0, receiptBytes: 0 };
      const quota = quotaOf(reservation, sender);
      if (quota !== undefined) return quota;
      if (mailbox.items + 1 > relayMaxMailboxItems || mailbox.bytes + itemBytes > relayMaxMailboxBytes) {
        return { kind: "full", budget: "mailbox", details: { items: mailbox.items, bytes: mailbox.bytes } };
      }
      if (activeItems + 1 > relayMaxActiveItems || activeBytes + itemBytes > relayMaxActiveBytes) {
        return { kind: "full", budget: "active", details: { items: activeItems, bytes: activeBytes } };
      }
      if (receipts + 1 > relayMaxReceipts || receiptBytes + receiptCost > relayMaxReceiptBytes) {
        return { kind: "full", budget: "receipts", details: { receipts, bytes: receiptBytes } };
      }
      mailbox.items += 1;
      mailbox.bytes += itemBytes;
      share.items += 1;
      share.bytes += itemBytes;
      sender.items += 1;
      sender.bytes += itemBytes;
      sender.receipts += 1;
      sender.receiptBytes += receiptCost;
      senders.set(senderId, sender);
      activeItems += 1;
      activeBytes += itemBytes;
      receipts += 1;
      receiptBytes += receiptCost;
      checkMailbox(mailbox);
      checkShare(share);
      checkSender(sender);
      return undefined;
    },
    // Releases check the counters they would leave before changing any: a violation changes nothing.
    releaseItem(mailbox, share, senderId, itemBytes) {
      const sender = usageOf(senderId);
      const left = { items: mailbox.items - 1, bytes: mailbox.bytes - itemBytes };
      const shareLeft = { items: share.items - 1, bytes: share.bytes - itemBytes };
      const senderLeft = { ...sender, items: sender.items - 1, bytes: sender.bytes - itemBytes };
      checkMailbox(left);
      if (activeItems - 1 < 0 || activeBytes - itemBytes < 0)
        throw violation("relay-wide usage is never negative", { activeItems, activeBytes });
      checkShare(shareLeft);
      checkSender(senderLeft);
      Object.assign(mailbox, left);
      Object.assign(share, shareLeft);
      Object.assign(sender, senderLeft);
      activeItems -= 1;
      activeBytes -= itemBytes;
      forgetIfIdle(senderId, sender);
    },
    releaseReceipt(senderId, receiptCost) {
      const sender = usageOf(senderId);
      if (receipts - 1 < 0 || receiptBytes - receiptCost < 0)
        throw violation("receipt usage is never negative", { receipts, receiptBytes });
      const senderLeft = { ...sender, receipts: sender.receipts - 1, receiptBytes: sender.receiptBytes - receiptCost };
      checkSender(senderLeft);
      Object.assign(sender, senderLeft);
      receipts -= 1;
      receiptBytes -= receiptCost;
      forgetIfIdle(senderId, sender);
    },
    audit(mailboxes) {
      let items = 0;
      let bytes = 0;
      for (const { usage, shares } of mailboxes) {
        checkMailbox(usage);
        let shareItems = 0;
        let shareBytes = 0;
        for (const share of shares) {
          checkShare(share);
          shareItems += share.items;
          shareBytes += share.bytes;
        }
        if (shareItems !== usage.items || shareBytes !== usage.bytes) {
          throw violation("a mailbox's usage is the sum of its senders' shares", { ...usage, shareItems, shareBytes });
        }
        items += usage.items;
        bytes += usage.bytes;
      }
      if (items !== activeItems || bytes !== activeBytes) {
        throw violation("relay-wide usage is the sum of the mailboxes' usage", {
          activeItems,
          activeBytes,
          mailboxItems: items,
          mailboxBytes: bytes,
        });
      }
      const sum = { items: 0, bytes: 0, receipts: 0, receiptBytes: 0 };
      for (const sender of senders.values()) {
        checkSender(sender);
        sum.items += sender.items;
        sum.bytes += sender.bytes;
        sum.receipts += sender.receipts;
        sum.receiptBytes += sender.receiptBytes;
      }
      if (sum.items !== activeItems || sum.bytes !== activeBytes || sum.receipts !== receipts || sum.receiptBytes !== receiptBytes) {
        throw violation("relay-wide usage is the sum of the senders' usage", {
          activeItems,
          activeBytes,
          receipts,
          receiptBytes,
          ...prefixed(sum),
        });
      }
      checkReceipts();
    },
    usage: () => ({ activeItems, activeBytes, receipts, receiptBytes }),
    senders: () => senders.size,
  };
}

function prefixed(sum: SenderUsage): Record<string, number> {
  return { senderItems: sum.items, senderBytes: sum.bytes, senderReceipts: sum.receipts, senderReceiptBytes: sum.receiptBytes };
}
