/**
 * Mailboxes and receipts of the relay: per-endpoint BigInt cursors (decimal strings, first "1",
 * never renumbered, sparse after ACKs), pages bounded by items and bytes, ACK by envelope id,
 * and dedupe receipts kept 15 minutes. Envelopes are held as canonical JSON text.
 */
import { canonicalBytes, utf8Bytes } from "../protocol/canonical-json.ts";
import { TaskError } from "../protocol/errors.ts";
import { maxCursorDigits, receivePageMaxBytes, relayReceiptOverheadBytes, relayReceiptRetentionMs } from "../protocol/limits.ts";
import type { TaskEndpoint } from "../protocol/schemas.ts";
import type { Budgets, MailboxUsage } from "./admission.ts";

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

export interface Acceptance {
  readonly envelopeId: string;
  readonly acceptanceId: string;
  readonly duplicate: boolean;
}

export interface Page {
  /** Page items as JSON text, `{"cursor":…,"envelope":…}` each. */
  readonly itemsJson: string;
  readonly count: number;
  readonly nextCursor: string;
  readonly hasMore: boolean;
}

export interface Mailboxes {
  /** Looks up a dedupe receipt: same digest → the earlier acceptance; different → `ENVELOPE_CONFLICT`. */
  dedupe(envelopeId: string, digest: string): Acceptance | undefined;
  /** Admits a fresh envelope into a target mailbox (budgets reserved atomically, never evicting). */
  admit(input: { target: TaskEndpoint; source: TaskEndpoint; envelopeId: string; digest: string; text: string; now: number }): Acceptance;
  page(endpointId: string, after: string, limit: number): Page;
  acknowledge(endpointId: string, envelopeId: string): { duplicate: boolean };
  /** Highest cursor ever assigned in a mailbox ("0" when none). */
  highestCursor(endpointId: string): string;
  /** True when an unacknowledged item with a cursor above `after` exists. */
  hasPendingAfter(endpointId: string, after: string): boolean;
  /** Drops a retired endpoint's mailbox and reclaims its budget. */
  drop(endpointId: string): number;
  pinsMail(endpointId: string): boolean;
  expireReceipts(now: number): number;
  counts(): { expiryEntries: number; mailboxes: number };
}

/** Bytes of a page item `{"cursor":"…","envelope":…}` besides the cursor digits and the envelope. */
const pageItemOverheadBytes = utf8Bytes('{"cursor":"","envelope":}');

const cursorPattern = new RegExp(`^(0|[1-9][0-9]{0,${maxCursorDigits - 1}})$`);

/** The value of a request cursor; anything but a cursor string (any type, any format) is `INVALID_CURSOR`. */
export function cursorValue(cursor: unknown): bigint {
  if (typeof cursor !== "string" || !cursorPattern.test(cursor)) throw new TaskError("INVALID_CURSOR", { details: { cursor: String(cursor) } });
  return BigInt(cursor);
}

/** Parses a request cursor; a malformed one or one past the highest ever assigned is `INVALID_CURSOR`. */
export function parseCursor(cursor: unknown, highest: bigint): bigint {
  const value = cursorValue(cursor);
  if (value > highest) throw new TaskError("INVALID_CURSOR", { details: { cursor: String(cursor), highestCursor: highest.toString() } });
  return value;
}

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
    dedupe(envelopeId, digest) {
      const receipt = receipts.get(envelopeId);
      if (receipt === undefined) return undefined;
      if (receipt.digest !== digest || receipt.state === "dropped") {
        throw new TaskError("ENVELOPE_CONFLICT", { details: { envelopeId } });
      }
      return { envelopeId, acceptanceId: receipt.acceptanceId, duplicate: true };
    },

    admit({ target, source, envelopeId, digest, text, now }) {
      const box = mailbox(target.id);
      const bytes = utf8Bytes(text);
      const receiptBytes = canonicalBytes({ id: envelopeId, source, target }) + relayReceiptOverheadBytes;
      budgets.reserve(box.usage, bytes, receiptBytes);
      const cursor = box.highest + 1n;
      const cursorText = cursor.toString();
      if (cursorText.length > maxCursorDigits) {
        budgets.releaseItem(box.usage, bytes);
        budgets.releaseReceipt(receiptBytes);
        throw new TaskError("RELAY_CAPACITY", { details: { budget: "cursor" } });
      }
      box.highest = cursor;
      box.entries.push({ cursor, envelopeId, text, bytes });
      const acceptanceId = crypto.randomUUID();
      receipts.set(envelopeId, { envelopeId, digest, acceptanceId, targetId: target.id, cursor, acceptedAt: now, bytes: receiptBytes, state: "mailbox" });
      expiryQueue.push(envelopeId);
      onAdmit(target.id);
      return { envelopeId, acceptanceId, duplicate: false };
    },

    page(endpointId, after, limit) {
      const box = mailboxes.get(endpointId);
      const highest = box?.highest ?? 0n;
      const from = parseCursor(after, highest);
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
      return { itemsJson: `[${parts.join(",")}]`, count: parts.length, nextCursor: last, hasMore: index < items.length };
    },

    acknowledge(endpointId, envelopeId) {
      const receipt = receipts.get(envelopeId);
      if (receipt === undefined || receipt.targetId !== endpointId || receipt.state === "dropped") {
        throw new TaskError("INVALID_REQUEST", { message: "unknown envelope for this endpoint", details: { envelopeId } });
      }
      if (receipt.state === "acknowledged") return { duplicate: true };
      const box = mailboxes.get(endpointId);
      const items = box?.entries ?? [];
      const index = firstAfter(items, receipt.cursor - 1n);
      const item = items[index];
      if (box === undefined || item === undefined || item.cursor !== receipt.cursor) {
        throw new TaskError("INVALID_REQUEST", { message: "envelope is no longer in the mailbox", details: { envelopeId } });
      }
      items.splice(index, 1);
      budgets.releaseItem(box.usage, item.bytes);
      receipt.state = "acknowledged";
      return { duplicate: false };
    },

    highestCursor: (endpointId) => (mailboxes.get(endpointId)?.highest ?? 0n).toString(),

    hasPendingAfter(endpointId, after) {
      const box = mailboxes.get(endpointId);
      if (box === undefined) return false;
      return firstAfter(box.entries, BigInt(after)) < box.entries.length;
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

    counts: () => ({ expiryEntries: expiryQueue.length - expiryHead + pinned.size, mailboxes: mailboxes.size }),
  };
}
