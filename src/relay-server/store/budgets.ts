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
  maxRelayActiveBytes,
  maxRelayActiveItems,
  maxRelayMailboxBytes,
  maxRelayMailboxItems,
  maxRelayReceiptBytes,
  maxRelayReceipts,
  maxRelaySenderActiveBytes,
  maxRelaySenderActiveItems,
  maxRelaySenderMailboxBytes,
  maxRelaySenderMailboxItems,
  maxRelaySenderReceiptBytes,
  maxRelaySenderReceipts,
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
  if (share.items + 1 > maxRelaySenderMailboxItems || share.bytes + itemBytes > maxRelaySenderMailboxBytes) {
    return { kind: "quota", quota: "mailbox-share", details: { items: share.items, bytes: share.bytes } };
  }
  if (sender.items + 1 > maxRelaySenderActiveItems || sender.bytes + itemBytes > maxRelaySenderActiveBytes) {
    return { kind: "quota", quota: "sender-active", details: { items: sender.items, bytes: sender.bytes } };
  }
  if (sender.receipts + 1 > maxRelaySenderReceipts || sender.receiptBytes + receiptBytes > maxRelaySenderReceiptBytes) {
    return { kind: "quota", quota: "sender-receipts", details: { receipts: sender.receipts, bytes: sender.receiptBytes } };
  }
  return undefined;
}

/** A mailbox's usage is never negative and stays within the mailbox bound. */
function checkMailbox(mailbox: MailboxUsage): void {
  if (mailbox.items < 0 || mailbox.bytes < 0) throw violation("mailbox usage is never negative", { ...mailbox });
  if (over(mailbox, maxRelayMailboxItems, maxRelayMailboxBytes)) throw violation("mailbox usage stays within its bound", { ...mailbox });
}

/** A sender's share of a mailbox is never negative and stays within the share bound. */
function checkShare(share: MailboxUsage): void {
  if (share.items < 0 || share.bytes < 0) throw violation("a sender's share of a mailbox is never negative", { ...share });
  if (over(share, maxRelaySenderMailboxItems, maxRelaySenderMailboxBytes))
    throw violation("a sender's share of a mailbox stays within its bound", { ...share });
}

/** A sender's relay-wide usage is never negative and stays within its shares. */
function checkSender(sender: SenderUsage): void {
  if (sender.items < 0 || sender.bytes < 0 || sender.receipts < 0 || sender.receiptBytes < 0)
    throw violation("a sender's usage is never negative", { ...sender });
  if (
    over(sender, maxRelaySenderActiveItems, maxRelaySenderActiveBytes) ||
    sender.receipts > maxRelaySenderReceipts ||
    sender.receiptBytes > maxRelaySenderReceiptBytes
  ) {
    throw violation("a sender's usage stays within its shares", { ...sender });
  }
}

/** A usage with one more item of `bytes` (the caller's mailbox and share objects are counted in place). */
function addItem(usage: MailboxUsage, bytes: number): void {
  usage.items += 1;
  usage.bytes += bytes;
}

/** A usage as it would be with one item of `bytes` fewer (nothing changed yet). */
function lessItem(usage: MailboxUsage, bytes: number): MailboxUsage {
  return { items: usage.items - 1, bytes: usage.bytes - bytes };
}

/**
 * The mailboxes' total usage, each mailbox checked and held to the sum of its senders' shares
 * (the first half of the audit).
 */
function mailboxTotal(mailboxes: Iterable<MailboxShares>): MailboxUsage {
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
  return { items, bytes };
}

/** The relay-wide counters: queued envelopes (items, bytes) and dedupe receipts (count, bytes). */
interface Totals {
  /** The relay budget one more item of `itemBytes` and one more receipt of `receiptCost` would exceed. */
  refusal(itemBytes: number, receiptCost: number): Refusal | undefined;
  add(itemBytes: number, receiptCost: number): void;
  /** Throws unless an item of `itemBytes` can be released without a counter going negative. */
  checkItemRelease(itemBytes: number): void;
  releaseItem(itemBytes: number): void;
  /** Throws unless a receipt of `receiptCost` can be released without a counter going negative. */
  checkReceiptRelease(receiptCost: number): void;
  releaseReceipt(receiptCost: number): void;
  /** Throws unless the relay-wide items are the mailboxes' total. */
  auditMailboxes(total: MailboxUsage): void;
  /** Throws unless the relay-wide usage is the senders' total, and the receipt counters are not negative. */
  auditSenders(total: SenderUsage): void;
  usage(): BudgetUsage;
}

function createTotals(): Totals {
  let activeItems = 0;
  let activeBytes = 0;
  let receipts = 0;
  let receiptBytes = 0;

  function checkItemRelease(itemBytes: number): void {
    if (activeItems - 1 < 0 || activeBytes - itemBytes < 0)
      throw violation("relay-wide usage is never negative", { activeItems, activeBytes });
  }

  function checkReceiptRelease(receiptCost: number): void {
    if (receipts - 1 < 0 || receiptBytes - receiptCost < 0) throw violation("receipt usage is never negative", { receipts, receiptBytes });
  }

  return {
    refusal(itemBytes, receiptCost): Refusal | undefined {
      if (activeItems + 1 > maxRelayActiveItems || activeBytes + itemBytes > maxRelayActiveBytes) {
        return { kind: "full", budget: "active", details: { items: activeItems, bytes: activeBytes } };
      }
      if (receipts + 1 > maxRelayReceipts || receiptBytes + receiptCost > maxRelayReceiptBytes) {
        return { kind: "full", budget: "receipts", details: { receipts, bytes: receiptBytes } };
      }
      return undefined;
    },
    add(itemBytes, receiptCost) {
      activeItems += 1;
      activeBytes += itemBytes;
      receipts += 1;
      receiptBytes += receiptCost;
    },
    checkItemRelease,
    releaseItem(itemBytes) {
      checkItemRelease(itemBytes);
      activeItems -= 1;
      activeBytes -= itemBytes;
    },
    checkReceiptRelease,
    releaseReceipt(receiptCost) {
      checkReceiptRelease(receiptCost);
      receipts -= 1;
      receiptBytes -= receiptCost;
    },
    auditMailboxes({ items, bytes }) {
      if (items !== activeItems || bytes !== activeBytes) {
        throw violation("relay-wide usage is the sum of the mailboxes' usage", {
          activeItems,
          activeBytes,
          mailboxItems: items,
          mailboxBytes: bytes,
        });
      }
    },
    auditSenders(sum) {
      if (sum.items !== activeItems || sum.bytes !== activeBytes || sum.receipts !== receipts || sum.receiptBytes !== receiptBytes) {
        throw violation("relay-wide usage is the sum of the senders' usage", {
          activeItems,
          activeBytes,
          receipts,
          receiptBytes,
          ...prefixed(sum),
        });
      }
      if (receipts < 0 || receiptBytes < 0) throw violation("receipt usage is never negative", { receipts, receiptBytes });
    },
    usage: () => ({ activeItems, activeBytes, receipts, receiptBytes }),
  };
}

/** Each sender's relay-wide usage; a sender is forgotten once it holds nothing (the map stays bounded). */
interface Senders {
  /** The first share (`SenderQuota` order) the reservation would exceed. */
  quota(reservation: Reservation): Refusal | undefined;
  /** Counts one item and one receipt against the sender; returns its usage now (checked by the caller). */
  add(senderId: string, itemBytes: number, receiptCost: number): SenderUsage;
  /** Checks, then releases one item of the sender's (a violation changes nothing). */
  releaseItem(senderId: string, itemBytes: number): void;
  /** Checks, then releases one receipt of the sender's (a violation changes nothing). */
  releaseReceipt(senderId: string, receiptCost: number): void;
  /** Every sender checked, their usage summed (for the audit). */
  total(): SenderUsage;
  size(): number;
}

const noUsage = (): SenderUsage => ({ items: 0, bytes: 0, receipts: 0, receiptBytes: 0 });

function createSenders(): Senders {
  const senders = new Map<string, SenderUsage>();

  /** The sender's usage (a sender holding nothing has none: releasing for it drives the counters negative, which the checks catch). */
  const usageOf = (senderId: string): SenderUsage => senders.get(senderId) ?? noUsage();

  /** Replaces the sender's usage with `left` once checked, forgetting a sender left with nothing. */
  function settle(senderId: string, sender: SenderUsage, left: SenderUsage): void {
    checkSender(left);
    Object.assign(sender, left);
    if (sender.items === 0 && sender.bytes === 0 && sender.receipts === 0 && sender.receiptBytes === 0) senders.delete(senderId);
  }

  return {
    quota: (reservation) => quotaOf(reservation, usageOf(reservation.senderId)),
    add(senderId, itemBytes, receiptCost) {
      const sender = usageOf(senderId);
      addItem(sender, itemBytes);
      sender.receipts += 1;
      sender.receiptBytes += receiptCost;
      senders.set(senderId, sender);
      return sender;
    },
    releaseItem(senderId, itemBytes) {
      const sender = usageOf(senderId);
      settle(senderId, sender, { ...sender, ...lessItem(sender, itemBytes) });
    },
    releaseReceipt(senderId, receiptCost) {
      const sender = usageOf(senderId);
      settle(senderId, sender, { ...sender, receipts: sender.receipts - 1, receiptBytes: sender.receiptBytes - receiptCost });
    },
    total() {
      const sum = noUsage();
      for (const sender of senders.values()) {
        checkSender(sender);
        sum.items += sender.items;
        sum.bytes += sender.bytes;
        sum.receipts += sender.receipts;
        sum.receiptBytes += sender.receiptBytes;
      }
      return sum;
    },
    size: () => senders.size,
  };
}

/**
 * The budgets: the relay-wide totals and the senders' usage, each its own part; the mailbox and
 * share a reservation names are the caller's, counted in place.
 */
export function createBudgets(): Budgets {
  const totals = createTotals();
  const senders = createSenders();

  return {
    reserve(reservation): Refusal | undefined {
      const { mailbox, share, senderId, itemBytes, receiptBytes: receiptCost } = reservation;
      const quota = senders.quota(reservation);
      if (quota !== undefined) return quota;
      if (mailbox.items + 1 > maxRelayMailboxItems || mailbox.bytes + itemBytes > maxRelayMailboxBytes) {
        return { kind: "full", budget: "mailbox", details: { items: mailbox.items, bytes: mailbox.bytes } };
      }
      const full = totals.refusal(itemBytes, receiptCost);
      if (full !== undefined) return full;
      addItem(mailbox, itemBytes);
      addItem(share, itemBytes);
      const sender = senders.add(senderId, itemBytes, receiptCost);
      totals.add(itemBytes, receiptCost);
      checkMailbox(mailbox);
      checkShare(share);
      checkSender(sender);
      return undefined;
    },
    // Releases check the counters they would leave before changing any: a violation changes nothing.
    releaseItem(mailbox, share, senderId, itemBytes) {
      const left = lessItem(mailbox, itemBytes);
      const shareLeft = lessItem(share, itemBytes);
      checkMailbox(left);
      totals.checkItemRelease(itemBytes);
      checkShare(shareLeft);
      senders.releaseItem(senderId, itemBytes);
      Object.assign(mailbox, left);
      Object.assign(share, shareLeft);
      totals.releaseItem(itemBytes);
    },
    releaseReceipt(senderId, receiptCost) {
      totals.checkReceiptRelease(receiptCost);
      senders.releaseReceipt(senderId, receiptCost);
      totals.releaseReceipt(receiptCost);
    },
    audit(mailboxes) {
      totals.auditMailboxes(mailboxTotal(mailboxes));
      totals.auditSenders(senders.total());
    },
    usage: () => totals.usage(),
    senders: () => senders.size(),
  };
}

function prefixed(sum: SenderUsage): Record<string, number> {
  return { senderItems: sum.items, senderBytes: sum.bytes, senderReceipts: sum.receipts, senderReceiptBytes: sum.receiptBytes };
}
