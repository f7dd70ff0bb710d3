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

/** Acceptance ids are a keyed hash of the envelope id: the same id always gets the same one. */
function createAcceptanceIds(): (envelopeId: string) => string {
  const acceptanceKey = crypto.getRandomValues(new Uint8Array(ACCEPTANCE_KEY_BYTES));
  return (envelopeId) => uuidFromDigest(createHmac("sha256", acceptanceKey).update(envelopeId).digest());
}

/**
 * Frees a queued item's budgets and its sender's share of `box`; the receipt keeps only the digest
 * of its text. The item is the mailboxes' record: they alone change its state.
 */
function release(budgets: Budgets, box: Mailbox, item: Accepted, state: ReceiptState, now?: number): void {
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

/** A page of `box` after cursor `after` (not past its highest), bounded by `limit` items and the page byte budget. */
function pageOf(box: Mailbox | undefined, after: string, from: bigint, limit: number): MailboxPage {
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
}

/** The mailboxes by endpoint id, with their queued items. */
interface Boxes {
  get(endpointId: string): Mailbox | undefined;
  /** The endpoint's mailbox, made empty when it has none. */
  open(endpointId: string): Mailbox;
  /** Queues an accepted item in its mailbox at the next cursor, reserved already (`admit`). */
  push(box: Mailbox, share: MailboxUsage, accepted: Accepted): void;
  /** Removes a queued item from its mailbox (acknowledged or expired); false when it is no longer there. */
  take(item: Accepted, state: ReceiptState, now?: number): boolean;
  /** Releases every item of a mailbox as `state` (`onReleased` told of each) and forgets the mailbox; returns how many it held. */
  drop(endpointId: string, state: ReceiptState, now: number, onReleased: (item: Accepted) => void): number;
  values(): IterableIterator<Mailbox>;
  size(): number;
}

function createBoxes(budgets: Budgets): Boxes {
  const mailboxes = new Map<string, Mailbox>();
  return {
    get: (endpointId) => mailboxes.get(endpointId),
    open(endpointId) {
      let found = mailboxes.get(endpointId);
      if (found === undefined) {
        found = { endpointId, entries: [], usage: { items: 0, bytes: 0 }, shares: new Map(), highest: 0n };
        mailboxes.set(endpointId, found);
      }
      return found;
    },
    push(box, share, accepted) {
      box.shares.set(accepted.sourceId, share);
      box.highest = BigInt(accepted.cursor);
      box.entries.push(accepted);
    },
    take(item, state, now) {
      const box = mailboxes.get(item.targetId);
      const items = box?.entries ?? [];
      const index = firstAfter(items, BigInt(item.cursor - 1));
      if (box === undefined || items[index] !== item) return false;
      items.splice(index, 1);
      release(budgets, box, item, state, now);
      return true;
    },
    drop(endpointId, state, now, onReleased) {
      const box = mailboxes.get(endpointId);
      if (box === undefined) return 0;
      for (const item of box.entries) {
        release(budgets, box, item, state, now);
        onReleased(item);
      }
      mailboxes.delete(endpointId);
      return box.entries.length;
    },
    values: () => mailboxes.values(),
    size: () => mailboxes.size,
  };
}

/** Receipt ids in acceptance order, for expiry; spent ids are compacted away once they are half the queue. */
interface ExpiryQueue {
  push(envelopeId: string): void;
  /** Hands each id from the front to `take` while `due` says it is due, stopping at the first that is not. */
  drain(due: (envelopeId: string) => boolean, take: (envelopeId: string) => void): void;
  size(): number;
}

function createExpiryQueue(): ExpiryQueue {
  const ids: string[] = [];
  let head = 0;
  return {
    push: (envelopeId) => void ids.push(envelopeId),
    drain(due, take) {
      while (head < ids.length && due(ids[head]!)) {
        head += 1;
        take(ids[head - 1]!);
      }
      if (head > 0 && head * 2 >= ids.length) {
        ids.splice(0, head);
        head = 0;
      }
    },
    size: () => ids.length - head,
  };
}

/**
 * The dedupe receipts by envelope id, with their expiry: each goes once past its retention when
 * it may (`releasable`), else it is pinned — still queued (its mail expires later) or expired less
 * than a retention ago — and re-checked each maintenance run.
 */
interface Receipts {
  get(envelopeId: string): Accepted | undefined;
  add(accepted: Accepted): void;
  pin(envelopeId: string): void;
  /** Expires queued mail past its lifetime (`expireMail` takes it from its mailbox) and receipts past their retention. */
  expire(now: number, expireMail: (receipt: Accepted) => boolean): { expiredMail: number; expiredReceipts: number };
  /** Receipts awaiting expiry: queued and pinned. */
  entries(): number;
}

function createReceipts(budgets: Budgets): Receipts {
  const receipts = new Map<string, Accepted>();
  const queue = createExpiryQueue();
  const pinned = new Set<string>();

  function remove(receipt: Accepted): void {
    receipts.delete(receipt.envelopeId);
    pinned.delete(receipt.envelopeId);
    budgets.releaseReceipt(receipt.sourceId, receiptBytesOf(receipt.envelopeId, receipt.targetId));
  }

  /** Receipts past their retention in acceptance order: gone when they may, else pinned; returns how many went. */
  function drainQueue(now: number): number {
    let expiredReceipts = 0;
    queue.drain(
      (envelopeId) => {
        const receipt = receipts.get(envelopeId);
        return receipt === undefined || now - receipt.acceptedAt >= relayReceiptRetentionMs;
      },
      (envelopeId) => {
        const receipt = receipts.get(envelopeId);
        if (receipt === undefined) return;
        if (releasable(receipt, now)) {
          remove(receipt);
          expiredReceipts += 1;
        } else pinned.add(envelopeId);
      },
    );
    return expiredReceipts;
  }

  /** Expires pinned mail past its lifetime and removes the receipts that may go; returns both counts. */
  function sweepPinned(now: number, expireMail: (receipt: Accepted) => boolean): { expiredMail: number; expiredReceipts: number } {
    let expiredMail = 0;
    let expiredReceipts = 0;
    for (const envelopeId of [...pinned]) {
      const receipt = receipts.get(envelopeId);
      if (receipt === undefined) {
        pinned.delete(envelopeId);
        continue;
      }
      if (receipt.state === "mailbox" && now - receipt.acceptedAt >= relayMailLifetimeMs && expireMail(receipt)) expiredMail += 1;
      if (releasable(receipt, now)) {
        remove(receipt);
        expiredReceipts += 1;
      }
    }
    return { expiredMail, expiredReceipts };
  }

  return {
    get: (envelopeId) => receipts.get(envelopeId),
    add(accepted) {
      receipts.set(accepted.envelopeId, accepted);
      queue.push(accepted.envelopeId);
    },
    pin: (envelopeId) => void pinned.add(envelopeId),
    expire(now, expireMail) {
      const drained = drainQueue(now);
      const swept = sweepPinned(now, expireMail);
      return { expiredMail: swept.expiredMail, expiredReceipts: drained + swept.expiredReceipts };
    },
    entries: () => queue.size() + pinned.size,
  };
}

/** What the mailbox operations below work on. */
interface Parts {
  readonly budgets: Budgets;
  readonly boxes: Boxes;
  readonly receipts: Receipts;
  readonly acceptanceIdOf: (envelopeId: string) => string;
}

/** An envelope id seen before: its earlier acceptance, or why the send is refused. */
function readmit(parts: Parts, earlier: Accepted, digest: string): Admission {
  if (earlier.state === "dropped" || digestOf(earlier) !== digest) return { kind: "conflict" };
  if (earlier.state === "expired") return { kind: "expired" };
  return { kind: "accepted", acceptanceId: parts.acceptanceIdOf(earlier.envelopeId), duplicate: true, acceptedAt: earlier.acceptedAt };
}

function admit(parts: Parts, request: AdmitRequest, onAdmit: (endpointId: string) => void): Admission {
  const { envelopeId, digest, text, source, target, fresh, now } = request;
  const earlier = parts.receipts.get(envelopeId);
  if (earlier !== undefined) return readmit(parts, earlier, digest);
  if (!fresh) return { kind: "stale" };
  const box = parts.boxes.open(target.id);
  const cursor = box.highest + 1n;
  if (cursor.toString().length > maxCursorDigits || cursor > MAX_EXACT_CURSOR)
    return { kind: "full", budget: "cursor", details: { items: box.usage.items } };
  const share = box.shares.get(source.id) ?? { items: 0, bytes: 0 };
  const receiptBytes = receiptBytesOf(envelopeId, box.endpointId);
  const refusal = parts.budgets.reserve({ mailbox: box.usage, share, senderId: source.id, itemBytes: utf8Bytes(text), receiptBytes });
  if (refusal !== undefined) return refusal;
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
  parts.boxes.push(box, share, accepted);
  parts.receipts.add(accepted);
  onAdmit(target.id);
  return { kind: "accepted", acceptanceId: parts.acceptanceIdOf(envelopeId), duplicate: false, acceptedAt: now };
}

function acknowledge({ boxes, receipts }: Parts, endpointId: string, envelopeId: string): AcknowledgeOutcome {
  const receipt = receipts.get(envelopeId);
  if (receipt === undefined || receipt.targetId !== endpointId || receipt.state === "dropped") return { kind: "unknown" };
  if (receipt.state === "acknowledged") return { kind: "acknowledged", duplicate: true };
  if (receipt.state === "expired" || !boxes.take(receipt, "acknowledged")) return { kind: "gone" };
  return { kind: "acknowledged", duplicate: false };
}

export function createMailboxes(budgets: Budgets, onAdmit: (endpointId: string) => void): Mailboxes {
  const boxes = createBoxes(budgets);
  const receipts = createReceipts(budgets);
  const parts: Parts = { budgets, boxes, receipts, acceptanceIdOf: createAcceptanceIds() };

  return {
    admit: (request) => admit(parts, request, onAdmit),

    page(endpointId, after, limit) {
      const box = boxes.get(endpointId);
      const highest = box?.highest ?? 0n;
      const from = storedCursor(after);
      if (from > highest) return { kind: "cursor-ahead", highestCursor: highest.toString() };
      return pageOf(box, after, from, limit);
    },

    acknowledge: (endpointId, envelopeId) => acknowledge(parts, endpointId, envelopeId),

    highestCursor: (endpointId) => boxes.get(endpointId)?.highest ?? 0n,

    hasPendingAfter(endpointId, after) {
      const box = boxes.get(endpointId);
      if (box === undefined) return false;
      return firstAfter(box.entries, after) < box.entries.length;
    },

    drop: (endpointId, as, now) =>
      boxes.drop(endpointId, as, now, (item) => {
        // An expired receipt is kept a retention from now: one already past its acceptance's
        // retention waits among the pinned ones (a younger one is pinned when the queue reaches it).
        if (as === "expired" && now - item.acceptedAt >= relayReceiptRetentionMs) receipts.pin(item.envelopeId);
      }),

    pinsMail: (endpointId) => (boxes.get(endpointId)?.entries.length ?? 0) > 0,

    expire: (now) => receipts.expire(now, (receipt) => boxes.take(receipt, "expired", now)),

    *usages() {
      for (const box of boxes.values()) yield { usage: box.usage, shares: box.shares.values() };
    },

    counts: () => ({ expiryEntries: receipts.entries(), mailboxes: boxes.size() }),
  };
}
