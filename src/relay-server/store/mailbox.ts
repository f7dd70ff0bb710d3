/**
 * Mailboxes and receipts of the memory store: per-endpoint BigInt cursors (decimal strings on the
 * wire, first "1", never renumbered, sparse after ACKs), pages bounded by items and bytes, ACK by
 * envelope id, and dedupe receipts kept 15 minutes. Envelopes are held as canonical JSON text.
 * Nothing here awaits: each call is atomic within the process.
 */
import { canonicalBytes, utf8Bytes } from "../../protocol/canonical-json.ts";
import { maxCursorDigits, receivePageMaxBytes, relayReceiptOverheadBytes, relayReceiptRetentionMs } from "../../protocol/limits.ts";
import { cursorValue } from "../../protocol/wire.ts";
import type { Budgets, MailboxUsage } from "./budgets.ts";
import { violation } from "./invariant.ts";
import type { AcknowledgeOutcome, AdmitOutcome, AdmitRequest, PageOutcome } from "./store.ts";

interface MailItem {
  readonly cursor: bigint;
  readonly envelopeId: string;
  /** Canonical JSON of the envelope, spliced into pages as is. */
  readonly text: string;
  /** Canonical bytes of the envelope (what the budgets charge). */
  readonly bytes: number;
}

interface Mailbox {
  readonly endpointId: string;
  readonly entries: MailItem[];
  readonly usage: MailboxUsage;
  highest: bigint;
}

type ReceiptState = "mailbox" | "acknowledged" | "dropped";

interface Receipt {
  readonly envelopeId: string;
  readonly digest: string;
  readonly acceptanceId: string;
  readonly targetId: string;
  readonly cursor: bigint;
  readonly acceptedAt: number;
  readonly bytes: number;
  state: ReceiptState;
}

/** What a mailbox answers a send: the (earlier, for a duplicate) acceptance or the refusal. */
export type Admission = AdmitOutcome;

/** A page of a mailbox, its items already JSON (`{"cursor":…,"envelope":…}` each). */
export type MailboxPage = PageOutcome;

export interface Mailboxes {
  /**
   * Dedupe, freshness, budgets and cursor of one send, in that order (`AdmitOutcome` steps 2–5);
   * the target's liveness was checked by the caller. Calls `onAdmit(target)` once admitted.
   */
  admit(request: AdmitRequest): Admission;
  page(endpointId: string, after: string, limit: number): MailboxPage;
  acknowledge(endpointId: string, envelopeId: string): AcknowledgeOutcome;
  /** Highest cursor ever assigned in a mailbox (0 when none). */
  highestCursor(endpointId: string): bigint;
  /** True when an unacknowledged item with a cursor above `after` exists. */
  hasPendingAfter(endpointId: string, after: bigint): boolean;
  /** Drops a retired endpoint's mailbox and reclaims its budget. */
  drop(endpointId: string): number;
  pinsMail(endpointId: string): boolean;
  expireReceipts(now: number): number;
  /** Every mailbox's usage (for the budget audit). */
  usages(): IterableIterator<MailboxUsage>;
  counts(): { expiryEntries: number; mailboxes: number };
}

/** The value of a cursor handed to the store (the engine checked its grammar already). */
export function storedCursor(cursor: string): bigint {
  const value = cursorValue(cursor);
  if (value === undefined) throw violation("cursors reach the store well formed", { cursor });
  return value;
}

/** Bytes of a page item `{"cursor":"…","envelope":}` besides the cursor digits and the envelope. */
const pageItemOverheadBytes = utf8Bytes('{"cursor":"","envelope":}');

function firstAfter(items: readonly MailItem[], cursor: bigint): number {
  let low = 0;
  let high = items.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (items[middle]!.cursor <= cursor) low = middle + 1;
    else high = middle;
  }
  return low;
}

export function createMailboxes(budgets: Budgets, onAdmit: (endpointId: string) => void): Mailboxes {
  const mailboxes = new Map<string, Mailbox>();
  const receipts = new Map<string, Receipt>();
  /** Receipt ids in acceptance order, for expiry. */
  const expiryQueue: string[] = [];
  let expiryHead = 0;
  /** Expired receipts still pinned by a mailbox item; re-checked each maintenance run. */
  const pinned = new Set<string>();

  function mailbox(endpointId: string): Mailbox {
    let found = mailboxes.get(endpointId);
    if (found === undefined) {
      found = { endpointId, entries: [], usage: { items: 0, bytes: 0 }, highest: 0n };
      mailboxes.set(endpointId, found);
    }
    return found;
  }

  function deleteReceipt(receipt: Receipt): void {
    receipts.delete(receipt.envelopeId);
    pinned.delete(receipt.envelopeId);
    budgets.releaseReceipt(receipt.bytes);
  }

  return {
    admit({ envelopeId, digest, text, source, target, fresh, now }) {
      const earlier = receipts.get(envelopeId);
      if (earlier !== undefined) {
        if (earlier.digest !== digest || earlier.state === "dropped") return { kind: "conflict" };
        return { kind: "accepted", acceptanceId: earlier.acceptanceId, duplicate: true };
      }
      if (!fresh) return { kind: "stale" };
      const box = mailbox(target.id);
      const cursor = box.highest + 1n;
      if (cursor.toString().length > maxCursorDigits) return { kind: "full", budget: "cursor", details: { items: box.usage.items } };
      const bytes = utf8Bytes(text);
      const receiptBytes = canonicalBytes({ id: envelopeId, source, target }) + relayReceiptOverheadBytes;
      const full = budgets.reserve(box.usage, bytes, receiptBytes);
      if (full !== undefined) return { kind: "full", ...full };
      box.highest = cursor;
      box.entries.push({ cursor, envelopeId, text, bytes });
      const acceptanceId = crypto.randomUUID();
      receipts.set(envelopeId, { envelopeId, digest, acceptanceId, targetId: target.id, cursor, acceptedAt: now, bytes: receiptBytes, state: "mailbox" });
      expiryQueue.push(envelopeId);
      onAdmit(target.id);
      return { kind: "accepted", acceptanceId, duplicate: false };
    },

    page(endpointId, after, limit) {
      const box = mailboxes.get(endpointId);
      const highest = box?.highest ?? 0n;
      const from = storedCursor(after);
      if (from > highest) return { kind: "cursor-ahead", highestCursor: highest.toString() };
      const items = box?.entries ?? [];
      const parts: string[] = [];
      let bytes = 0;
      let index = firstAfter(items, from);
      let last = after;
      while (index < items.length && parts.length < limit) {
        const item = items[index]!;
        const cursorText = item.cursor.toString();
        const pageBytes = pageItemOverheadBytes + cursorText.length + item.bytes;
        if (bytes + pageBytes > receivePageMaxBytes) break;
        bytes += pageBytes;
        parts.push(`{"cursor":"${cursorText}","envelope":${item.text}}`);
        last = cursorText;
        index += 1;
      }
      return { kind: "page", itemsJson: `[${parts.join(",")}]`, nextCursor: last, hasMore: index < items.length };
    },

    acknowledge(endpointId, envelopeId) {
      const receipt = receipts.get(envelopeId);
      if (receipt === undefined || receipt.targetId !== endpointId || receipt.state === "dropped") return { kind: "unknown" };
      if (receipt.state === "acknowledged") return { kind: "acknowledged", duplicate: true };
      const box = mailboxes.get(endpointId);
      const items = box?.entries ?? [];
      const index = firstAfter(items, receipt.cursor - 1n);
      const item = items[index];
      if (box === undefined || item === undefined || item.cursor !== receipt.cursor) return { kind: "gone" };
      items.splice(index, 1);
      budgets.releaseItem(box.usage, item.bytes);
      receipt.state = "acknowledged";
      return { kind: "acknowledged", duplicate: false };
    },

    highestCursor: (endpointId) => mailboxes.get(endpointId)?.highest ?? 0n,

    hasPendingAfter(endpointId, after) {
      const box = mailboxes.get(endpointId);
      if (box === undefined) return false;
      return firstAfter(box.entries, after) < box.entries.length;
    },

    drop(endpointId) {
      const box = mailboxes.get(endpointId);
      if (box === undefined) return 0;
      for (const item of box.entries) {
        budgets.releaseItem(box.usage, item.bytes);
        const receipt = receipts.get(item.envelopeId);
        if (receipt !== undefined) receipt.state = "dropped";
      }
      const dropped = box.entries.length;
      mailboxes.delete(endpointId);
      return dropped;
    },

    pinsMail: (endpointId) => (mailboxes.get(endpointId)?.entries.length ?? 0) > 0,

    expireReceipts(now) {
      let expired = 0;
      for (const envelopeId of [...pinned]) {
        const receipt = receipts.get(envelopeId);
        if (receipt === undefined) pinned.delete(envelopeId);
        else if (receipt.state !== "mailbox") {
          deleteReceipt(receipt);
          expired += 1;
        }
      }
      while (expiryHead < expiryQueue.length) {
        const envelopeId = expiryQueue[expiryHead]!;
        const receipt = receipts.get(envelopeId);
        if (receipt !== undefined && now - receipt.acceptedAt < relayReceiptRetentionMs) break;
        expiryHead += 1;
        if (receipt === undefined) continue;
        if (receipt.state === "mailbox") pinned.add(envelopeId);
        else {
          deleteReceipt(receipt);
          expired += 1;
        }
      }
      if (expiryHead > 0 && expiryHead * 2 >= expiryQueue.length) {
        expiryQueue.splice(0, expiryHead);
        expiryHead = 0;
      }
      return expired;
    },

    *usages() {
      for (const box of mailboxes.values()) yield box.usage;
    },

    counts: () => ({ expiryEntries: expiryQueue.length - expiryHead + pinned.size, mailboxes: mailboxes.size }),
  };
}
