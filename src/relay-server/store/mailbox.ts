/**
 * Mailboxes and receipts of the memory store: per-endpoint cursors (decimal strings on the wire,
 * first "1", never renumbered, sparse after ACKs), pages bounded by items and bytes, ACK by
 * envelope id, and dedupe receipts kept 15 minutes. Each envelope is held once, as the canonical
 * JSON text it is sent as, in one object that is both its mailbox item and its receipt. Each
 * mailbox keeps its senders' shares (`quotas-v1`); queued mail expires `relayMailLifetimeMs` after
 * its acceptance (`mail-expiry-v1`), and its receipt then answers a resend `expired` for another
 * receipt retention. Nothing here awaits: each call is atomic within the process.
 */
import { canonicalBytes, sha256Hex, utf8Bytes } from "../../protocol/canonical-json.ts";
import { createHmac } from "node:crypto";
import {
  ACCEPTANCE_KEY_BYTES,
  UUID_BYTES,
  RELAY_ID,
  maxCursorDigits,
  receivePageMaxBytes,
  relayMailLifetimeMs,
  relayReceiptOverheadBytes,
  relayReceiptRetentionMs,
} from "../../protocol/limits.ts";
import { cursorValue } from "../../protocol/wire.ts";
import type { Budgets, MailboxShares, MailboxUsage } from "./budgets.ts";
import { violation } from "./invariant.ts";
import type { AcknowledgeOutcome, AdmitOutcome, AdmitRequest, PageOutcome } from "./store.ts";

/** Where an accepted envelope is: queued, acknowledged, dropped with its mailbox (a new generation), or expired unacknowledged. */
type ReceiptState = "mailbox" | "acknowledged" | "dropped" | "expired";

/**
 * Expired mail is found among the receipts past their retention (the receipts queued mail pins),
 * so mail must not expire before its receipt would.
 */
if (relayMailLifetimeMs < relayReceiptRetentionMs) throw new Error("relayMailLifetimeMs must be at least relayReceiptRetentionMs");

/**
 * One accepted envelope: its mailbox item while it is queued and its dedupe receipt for 15
 * minutes, in one object (the relay stores each envelope once, as the text it is sent as). The
 * acceptance id is derived from the envelope id (`acceptanceIdOf`), not stored.
 */
interface Accepted {
  /** The mailbox cursor (a number: exact below 2^53, which `admit` keeps it under). */
  readonly cursor: number;
  readonly envelopeId: string;
  /** Canonical JSON of the envelope, spliced into pages as is; dropped once it leaves the mailbox. */
  text: string | undefined;
  /**
   * SHA-256 of the text, kept only once the text is dropped (while queued a resend is compared
   * with the text itself).
   */
  digest: string | undefined;
  /** The target mailbox's endpoint id (the mailbox's own string, shared). */
  readonly targetId: string;
  /** The sender's endpoint id: whose shares the item and the receipt count against. */
  readonly sourceId: string;
  readonly acceptedAt: number;
  state: ReceiptState;
  /** When it expired unacknowledged (state `expired`): its receipt is kept a retention from then. */
  expiredAt?: number;
}

interface Mailbox {
  readonly endpointId: string;
  readonly entries: Accepted[];
  readonly usage: MailboxUsage;
  /** Each sender's usage of this mailbox (`quotas-v1`); a sender holding nothing here has no entry. */
  readonly shares: Map<string, MailboxUsage>;
  highest: bigint;
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
  /**
   * Drops an endpoint's mailbox and frees its budgets: `dropped` for a retired endpoint (a resend
   * is a conflict), `expired` for a reaped or reclaimed one (a resend is answered `expired`).
   * Returns how many items it held.
   */
  drop(endpointId: string, as: "dropped" | "expired", now: number): number;
  pinsMail(endpointId: string): boolean;
  /** Expires queued mail past its lifetime and receipts past their retention. */
  expire(now: number): { expiredMail: number; expiredReceipts: number };
  /** Every mailbox's usage with its senders' shares (for the budget audit). */
  usages(): IterableIterator<MailboxShares>;
  counts(): { expiryEntries: number; mailboxes: number };
}

/** The value of a cursor handed to the store (the engine checked its grammar already). */
export function storedCursor(cursor: string): bigint {
  const value = cursorValue(cursor);
  if (value === undefined) throw violation("cursors reach the store well formed", { cursor });
  return value;
}

/** Cursors stay numbers the store compares exactly; past this the mailbox's cursor space is spent. */
const MAX_EXACT_CURSOR = BigInt(Number.MAX_SAFE_INTEGER);

/** A UUID (version 8, RFC 9562 variant) from the first 16 bytes of a digest. */
function uuidFromDigest(digest: Uint8Array): string {
  const bytes = digest.subarray(0, UUID_BYTES);
  bytes[6] = (bytes[6]! & 0x0f) | 0x80;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = Buffer.from(bytes).toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The SHA-256 (hex) of an accepted envelope's canonical text: kept once the text is dropped, else computed (resends only). */
function digestOf(accepted: Accepted): string {
  return accepted.digest ?? sha256Hex(accepted.text!);
}

/**
 * What a receipt costs the receipt budget: its id and both endpoints, canonical, plus the fixed
 * overhead. Both endpoints are this relay's, with UUID ids of the same length as the target's.
 */
function receiptBytesOf(envelopeId: string, targetId: string): number {
  const endpoint = { relay: RELAY_ID, id: targetId };
  return canonicalBytes({ id: envelopeId, source: endpoint, target: endpoint }) + relayReceiptOverheadBytes;
}

/** Bytes of a page item `{"cursor":"…","envelope":}` besides the cursor digits and the envelope. */
const pageItemOverheadBytes = utf8Bytes('{"cursor":"","envelope":}');

/** Whether a receipt may go once past its retention: acknowledged or dropped, or expired a retention ago. */
function releasable(receipt: Accepted, now: number): boolean {
  if (receipt.state === "mailbox") return false;
  if (receipt.state === "expired") return now - (receipt.expiredAt ?? receipt.acceptedAt) >= relayReceiptRetentionMs;
  return true;
}

function firstAfter(items: readonly Accepted[], after: bigint): number {
  const cursor = Number(after);
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
  const receipts = new Map<string, Accepted>();
  /** Acceptance ids are a keyed hash of the envelope id: the same id always gets the same one. */
  const acceptanceKey = crypto.getRandomValues(new Uint8Array(ACCEPTANCE_KEY_BYTES));
  const acceptanceIdOf = (envelopeId: string) => uuidFromDigest(createHmac("sha256", acceptanceKey).update(envelopeId).digest());
  /** Receipt ids in acceptance order, for expiry. */
  const expiryQueue: string[] = [];
  let expiryHead = 0;
  /**
   * Receipts past their retention that cannot go yet — still queued (their mail expires later) or
   * expired less than a retention ago; re-checked each maintenance run.
   */
  const pinned = new Set<string>();

  function mailbox(endpointId: string): Mailbox {
    let found = mailboxes.get(endpointId);
    if (found === undefined) {
      found = { endpointId, entries: [], usage: { items: 0, bytes: 0 }, shares: new Map(), highest: 0n };
      mailboxes.set(endpointId, found);
    }
    return found;
  }

  function deleteReceipt(receipt: Accepted): void {
    receipts.delete(receipt.envelopeId);
    pinned.delete(receipt.envelopeId);
    budgets.releaseReceipt(receipt.sourceId, receiptBytesOf(receipt.envelopeId, receipt.targetId));
  }

  /** Frees an item's budgets and its sender's share; the receipt keeps only the digest of its text. */
  function release(box: Mailbox, item: Accepted, state: ReceiptState, now?: number): void {
    const share = box.shares.get(item.sourceId);
    if (share === undefined) throw violation("a queued item's sender has a share of its mailbox", { envelopeId: item.envelopeId });
    budgets.releaseItem(box.usage, share, item.sourceId, utf8Bytes(item.text!));
    if (share.items === 0) box.shares.delete(item.sourceId);
    // A dropped envelope's resend is a conflict whatever its digest: only the others keep theirs.
    if (state !== "dropped") item.digest = digestOf(item);
    item.text = undefined;
    item.state = state;
    if (state === "expired") item.expiredAt = now ?? item.acceptedAt;
  }

  /** Removes a queued item from its mailbox (acknowledged or expired); false when it is no longer there. */
  function take(item: Accepted, state: ReceiptState, now?: number): boolean {
    const box = mailboxes.get(item.targetId);
    const items = box?.entries ?? [];
    const index = firstAfter(items, BigInt(item.cursor - 1));
    if (box === undefined || items[index] !== item) return false;
    items.splice(index, 1);
    release(box, item, state, now);
    return true;
  }

  /** Expires pinned mail past its lifetime and removes the receipts that may go; returns both counts. */
  function sweepPinned(now: number): { expiredMail: number; expiredReceipts: number } {
    let expiredMail = 0;
    let expiredReceipts = 0;
    for (const envelopeId of [...pinned]) {
      const receipt = receipts.get(envelopeId);
      if (receipt === undefined) {
        pinned.delete(envelopeId);
        continue;
      }
      if (receipt.state === "mailbox" && now - receipt.acceptedAt >= relayMailLifetimeMs && take(receipt, "expired", now)) expiredMail += 1;
      if (releasable(receipt, now)) {
        deleteReceipt(receipt);
        expiredReceipts += 1;
      }
    }
    return { expiredMail, expiredReceipts };
  }

  return {
    admit({ envelopeId, digest, text, source, target, fresh, now }) {
      const earlier = receipts.get(envelopeId);
      if (earlier !== undefined) {
        if (earlier.state === "dropped" || digestOf(earlier) !== digest) return { kind: "conflict" };
        if (earlier.state === "expired") return { kind: "expired" };
        return { kind: "accepted", acceptanceId: acceptanceIdOf(envelopeId), duplicate: true, acceptedAt: earlier.acceptedAt };
      }
      if (!fresh) return { kind: "stale" };
      const box = mailbox(target.id);
      const cursor = box.highest + 1n;
      if (cursor.toString().length > maxCursorDigits || cursor > MAX_EXACT_CURSOR)
        return { kind: "full", budget: "cursor", details: { items: box.usage.items } };
      const share = box.shares.get(source.id) ?? { items: 0, bytes: 0 };
      const receiptBytes = receiptBytesOf(envelopeId, box.endpointId);
      const refusal = budgets.reserve({ mailbox: box.usage, share, senderId: source.id, itemBytes: utf8Bytes(text), receiptBytes });
      if (refusal !== undefined) return refusal;
      box.shares.set(source.id, share);
      box.highest = cursor;
      const accepted: Accepted = {
        cursor: Number(cursor),
        envelopeId,
        text,
        digest: undefined,
        targetId: box.endpointId,
        sourceId: source.id,
        acceptedAt: now,
        state: "mailbox",
      };
      box.entries.push(accepted);
      receipts.set(envelopeId, accepted);
      expiryQueue.push(envelopeId);
      onAdmit(target.id);
      return { kind: "accepted", acceptanceId: acceptanceIdOf(envelopeId), duplicate: false, acceptedAt: now };
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
        const pageBytes = pageItemOverheadBytes + cursorText.length + utf8Bytes(item.text!);
        if (bytes + pageBytes > receivePageMaxBytes) break;
        bytes += pageBytes;
        parts.push(`{"cursor":"${cursorText}","envelope":${item.text!}}`);
        last = cursorText;
        index += 1;
      }
      return { kind: "page", itemsJson: `[${parts.join(",")}]`, nextCursor: last, hasMore: index < items.length };
    },

    acknowledge(endpointId, envelopeId) {
      const receipt = receipts.get(envelopeId);
      if (receipt === undefined || receipt.targetId !== endpointId || receipt.state === "dropped") return { kind: "unknown" };
      if (receipt.state === "acknowledged") return { kind: "acknowledged", duplicate: true };
      if (receipt.state === "expired" || !take(receipt, "acknowledged")) return { kind: "gone" };
      return { kind: "acknowledged", duplicate: false };
    },

    highestCursor: (endpointId) => mailboxes.get(endpointId)?.highest ?? 0n,

    hasPendingAfter(endpointId, after) {
      const box = mailboxes.get(endpointId);
      if (box === undefined) return false;
      return firstAfter(box.entries, after) < box.entries.length;
    },

    drop(endpointId, as, now) {
      const box = mailboxes.get(endpointId);
      if (box === undefined) return 0;
      for (const item of box.entries) {
        release(box, item, as, now);
        // An expired receipt is kept a retention from now: one already past its acceptance's
        // retention waits among the pinned ones (a younger one is pinned when the queue reaches it).
        if (as === "expired" && now - item.acceptedAt >= relayReceiptRetentionMs) pinned.add(item.envelopeId);
      }
      const dropped = box.entries.length;
      mailboxes.delete(endpointId);
      return dropped;
    },

    pinsMail: (endpointId) => (mailboxes.get(endpointId)?.entries.length ?? 0) > 0,

    expire(now) {
      let expiredReceipts = 0;
      // Receipts past their retention in acceptance order: gone when they may, else pinned.
      while (expiryHead < expiryQueue.length) {
        const envelopeId = expiryQueue[expiryHead]!;
        const receipt = receipts.get(envelopeId);
        if (receipt !== undefined && now - receipt.acceptedAt < relayReceiptRetentionMs) break;
        expiryHead += 1;
        if (receipt === undefined) continue;
        if (releasable(receipt, now)) {
          deleteReceipt(receipt);
          expiredReceipts += 1;
        } else pinned.add(envelopeId);
      }
      if (expiryHead > 0 && expiryHead * 2 >= expiryQueue.length) {
        expiryQueue.splice(0, expiryHead);
        expiryHead = 0;
      }
      const swept = sweepPinned(now);
      return { expiredMail: swept.expiredMail, expiredReceipts: expiredReceipts + swept.expiredReceipts };
    },

    *usages() {
      for (const box of mailboxes.values()) yield { usage: box.usage, shares: box.shares.values() };
    },

    counts: () => ({ expiryEntries: expiryQueue.length - expiryHead + pinned.size, mailboxes: mailboxes.size }),
  };
}
