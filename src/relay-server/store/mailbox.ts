/**
 * Mailboxes and receipts of the memory store: per-endpoint cursors (decimal strings on the wire,
 * first "1", never renumbered, sparse after ACKs), pages bounded by items and bytes, ACK by
 * envelope id, and dedupe receipts kept 15 minutes. Each envelope is held once, as the canonical
 * JSON text it is sent as, in one slot of the accepted table (accepted.ts) that is both its mailbox
 * item and its receipt; mailboxes and the expiry queue hold slot numbers. Each
 * mailbox keeps its senders' shares (`quotas-v1`); queued mail expires `relayMailLifetimeMs` after
 * its acceptance (`mail-expiry-v1`), and its receipt then answers a resend `expired` for another
 * receipt retention. Nothing here awaits: each call is atomic within the process.
 */
import { canonicalBytes, sha256Hex, utf8Bytes } from "../../protocol/canonical-json.ts";
import {
  maxCursorDigits,
  maxReceivePageBytes,
  relayMailLifetimeMs,
  relayReceiptOverheadBytes,
  relayReceiptRetentionMs,
} from "../../protocol/limits.ts";
import { RELAY_ID } from "../../protocol/names.ts";
import { cursorValue } from "../../protocol/wire.ts";
import { acceptanceIdOf, mintAcceptanceKey } from "./acceptance.ts";
import { type AcceptedTable, createAcceptedTable, type NewAccepted, type ReceiptState } from "./accepted.ts";
import type { Budgets, MailboxShares, MailboxUsage } from "./budgets.ts";
import { violation } from "./invariant.ts";
import type { AcknowledgeOutcome, AdmitOutcome, AdmitRequest, PageOutcome } from "./store.ts";

/**
 * Expired mail is found among the receipts past their retention (the receipts queued mail pins),
 * so mail must not expire before its receipt would.
 */
if (relayMailLifetimeMs < relayReceiptRetentionMs) throw new Error("relayMailLifetimeMs must be at least relayReceiptRetentionMs");

/**
 * One accepted envelope is a slot of the accepted table: its mailbox item while it is queued and
 * its dedupe receipt for 15 minutes (the relay stores each envelope once, as the text it is sent
 * as). Its cursor is a number (exact below 2^53, which `admit` keeps it under); the acceptance id
 * is derived from the envelope id (`acceptanceIdOf`), not stored.
 */
type Slot = number;

/** A sender's usage of a mailbox, with the sender's id: the one string its items there share. */
interface Share extends MailboxUsage {
  readonly senderId: string;
}

interface Mailbox {
  readonly endpointId: string;
  /** Its queued items' slots, by cursor. */
  readonly entries: Slot[];
  readonly usage: MailboxUsage;
  /** Each sender's usage of this mailbox (`quotas-v1`); a sender holding nothing here has no entry. */
  readonly shares: Map<string, Share>;
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

/** The SHA-256 (hex) of an accepted envelope's canonical text: kept once the text is dropped, else computed (resends only). */
function digestOf(table: AcceptedTable, slot: Slot): string {
  const content = table.content(slot)!;
  return table.state(slot) === "mailbox" ? sha256Hex(content) : content;
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
function releasable(table: AcceptedTable, slot: Slot, now: number): boolean {
  const state = table.state(slot);
  if (state === "mailbox") return false;
  if (state === "expired") return now - table.expiredAt(slot) >= relayReceiptRetentionMs;
  return true;
}

function firstAfter(table: AcceptedTable, items: readonly Slot[], after: bigint): number {
  const cursor = Number(after);
  let low = 0;
  let high = items.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (table.cursor(items[middle]!) <= cursor) low = middle + 1;
    else high = middle;
  }
  return low;
}

/** Acceptance ids are a keyed hash of the envelope id (acceptance.ts): the same id always gets the same one. */
function createAcceptanceIds(): (envelopeId: string) => string {
  const acceptanceKey = mintAcceptanceKey();
  return (envelopeId) => acceptanceIdOf(acceptanceKey, envelopeId);
}

/**
 * Frees a queued item's budgets and its sender's share of `box`; the receipt keeps only the digest
 * of its text. The item is the mailboxes' record: they alone change its state.
 */
function release(budgets: Budgets, table: AcceptedTable, box: Mailbox, slot: Slot, state: ReceiptState, now?: number): void {
  const sourceId = table.sourceId(slot);
  const share = box.shares.get(sourceId);
  if (share === undefined) throw violation("a queued item's sender has a share of its mailbox", { envelopeId: table.envelopeId(slot) });
  budgets.releaseItem(box.usage, share, sourceId, utf8Bytes(table.content(slot)!));
  if (share.items === 0) box.shares.delete(sourceId);
  // A dropped envelope's resend is a conflict whatever its digest: only the others keep theirs.
  const digest = state === "dropped" ? undefined : digestOf(table, slot);
  table.settle(slot, state, digest, state === "expired" ? (now ?? table.acceptedAt(slot)) : undefined);
}

/** A page of `box` after cursor `after` (not past its highest), bounded by `limit` items and the page byte budget. */
function pageOf(table: AcceptedTable, box: Mailbox | undefined, after: string, from: bigint, limit: number): MailboxPage {
  const items = box?.entries ?? [];
  const parts: string[] = [];
  let bytes = 0;
  let index = firstAfter(table, items, from);
  let last = after;
  while (index < items.length && parts.length < limit) {
    const slot = items[index]!;
    const text = table.content(slot)!;
    const cursorText = table.cursor(slot).toString();
    const pageBytes = pageItemOverheadBytes + cursorText.length + utf8Bytes(text);
    if (bytes + pageBytes > maxReceivePageBytes) break;
    bytes += pageBytes;
    parts.push(`{"cursor":"${cursorText}","envelope":${text}}`);
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
  push(box: Mailbox, share: Share, slot: Slot): void;
  /** Removes a queued item from its mailbox (acknowledged or expired); false when it is no longer there. */
  take(slot: Slot, state: ReceiptState, now?: number): boolean;
  /** Releases every item of a mailbox as `state` (`onReleased` told of each) and forgets the mailbox; returns how many it held. */
  drop(endpointId: string, state: ReceiptState, now: number, onReleased: (slot: Slot) => void): number;
  values(): IterableIterator<Mailbox>;
  size(): number;
}

function createBoxes(budgets: Budgets, table: AcceptedTable): Boxes {
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
    push(box, share, slot) {
      box.shares.set(share.senderId, share);
      box.highest = BigInt(table.cursor(slot));
      box.entries.push(slot);
    },
    take(slot, state, now) {
      const box = mailboxes.get(table.targetId(slot));
      const items = box?.entries ?? [];
      const index = firstAfter(table, items, BigInt(table.cursor(slot) - 1));
      if (box === undefined || items[index] !== slot) return false;
      items.splice(index, 1);
      release(budgets, table, box, slot, state, now);
      return true;
    },
    drop(endpointId, state, now, onReleased) {
      const box = mailboxes.get(endpointId);
      if (box === undefined) return 0;
      for (const slot of box.entries) {
        release(budgets, table, box, slot, state, now);
        onReleased(slot);
      }
      mailboxes.delete(endpointId);
      return box.entries.length;
    },
    values: () => mailboxes.values(),
    size: () => mailboxes.size,
  };
}

/** Receipts' slots in acceptance order, for expiry; spent ones are compacted away once they are half the queue. */
interface ExpiryQueue {
  push(slot: Slot): void;
  /** Hands each slot from the front to `take` while `due` says it is due, stopping at the first that is not. */
  drain(due: (slot: Slot) => boolean, take: (slot: Slot) => void): void;
  size(): number;
}

function createExpiryQueue(): ExpiryQueue {
  let slots = new Int32Array(64);
  let head = 0;
  let tail = 0;
  return {
    push(slot) {
      if (tail === slots.length) {
        const grown = new Int32Array(2 * slots.length);
        grown.set(slots);
        slots = grown;
      }
      slots[tail] = slot;
      tail += 1;
    },
    drain(due, take) {
      while (head < tail && due(slots[head]!)) {
        head += 1;
        take(slots[head - 1]!);
      }
      if (head > 0 && head * 2 >= tail) {
        slots.copyWithin(0, head, tail);
        tail -= head;
        head = 0;
      }
    },
    size: () => tail - head,
  };
}

/**
 * The dedupe receipts by envelope id, with their expiry: each goes once past its retention when
 * it may (`releasable`), else it is pinned — still queued (its mail expires later) or expired less
 * than a retention ago — and re-checked each maintenance run. A removed receipt's slot is reused
 * once the queue passed it (accepted.ts `dequeue`).
 */
interface Receipts {
  /** The receipt's slot, or undefined. */
  get(envelopeId: string): Slot | undefined;
  /** Records an accepted envelope: its slot, in the expiry queue. */
  add(accepted: NewAccepted): Slot;
  pin(slot: Slot): void;
  /** Expires queued mail past its lifetime (`expireMail` takes it from its mailbox) and receipts past their retention. */
  expire(now: number, expireMail: (slot: Slot) => boolean): { expiredMail: number; expiredReceipts: number };
  /** Receipts awaiting expiry: queued and pinned. */
  entries(): number;
}

function createReceipts(budgets: Budgets, table: AcceptedTable): Receipts {
  const queue = createExpiryQueue();
  const pinned = new Set<Slot>();

  function remove(slot: Slot): void {
    pinned.delete(slot);
    budgets.releaseReceipt(table.sourceId(slot), receiptBytesOf(table.envelopeId(slot), table.targetId(slot)));
    table.remove(slot);
  }

  /** Receipts past their retention in acceptance order: gone when they may, else pinned; returns how many went. */
  function drainQueue(now: number): number {
    let expiredReceipts = 0;
    queue.drain(
      (slot) => table.removed(slot) || now - table.acceptedAt(slot) >= relayReceiptRetentionMs,
      (slot) => {
        if (!table.dequeue(slot)) return;
        if (releasable(table, slot, now)) {
          remove(slot);
          expiredReceipts += 1;
        } else pinned.add(slot);
      },
    );
    return expiredReceipts;
  }

  /** Expires pinned mail past its lifetime and removes the receipts that may go; returns both counts. */
  function sweepPinned(now: number, expireMail: (slot: Slot) => boolean): { expiredMail: number; expiredReceipts: number } {
    let expiredMail = 0;
    let expiredReceipts = 0;
    for (const slot of [...pinned]) {
      if (table.state(slot) === "mailbox" && now - table.acceptedAt(slot) >= relayMailLifetimeMs && expireMail(slot)) expiredMail += 1;
      if (releasable(table, slot, now)) {
        remove(slot);
        expiredReceipts += 1;
      }
    }
    return { expiredMail, expiredReceipts };
  }

  return {
    get(envelopeId) {
      const slot = table.find(envelopeId);
      return slot < 0 ? undefined : slot;
    },
    add(accepted) {
      const slot = table.add(accepted);
      queue.push(slot);
      return slot;
    },
    pin: (slot) => void pinned.add(slot),
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
  readonly table: AcceptedTable;
  readonly boxes: Boxes;
  readonly receipts: Receipts;
  readonly acceptanceIdOf: (envelopeId: string) => string;
}

/** An envelope id seen before: its earlier acceptance, or why the send is refused. */
function readmit(parts: Parts, envelopeId: string, earlier: Slot, digest: string): Admission {
  const { table } = parts;
  if (table.state(earlier) === "dropped" || digestOf(table, earlier) !== digest) return { kind: "conflict" };
  if (table.state(earlier) === "expired") return { kind: "expired" };
  return { kind: "accepted", acceptanceId: parts.acceptanceIdOf(envelopeId), duplicate: true, acceptedAt: table.acceptedAt(earlier) };
}

function admit(parts: Parts, request: AdmitRequest, onAdmit: (endpointId: string) => void): Admission {
  const { envelopeId, digest, text, source, target, fresh, now } = request;
  const earlier = parts.receipts.get(envelopeId);
  if (earlier !== undefined) return readmit(parts, envelopeId, earlier, digest);
  if (!fresh) return { kind: "stale" };
  const box = parts.boxes.open(target.id);
  const cursor = box.highest + 1n;
  if (cursor.toString().length > maxCursorDigits || cursor > MAX_EXACT_CURSOR)
    return { kind: "full", budget: "cursor", details: { items: box.usage.items } };
  const share = box.shares.get(source.id) ?? { items: 0, bytes: 0, senderId: source.id };
  const receiptBytes = receiptBytesOf(envelopeId, box.endpointId);
  const refusal = parts.budgets.reserve({ mailbox: box.usage, share, senderId: source.id, itemBytes: utf8Bytes(text), receiptBytes });
  if (refusal !== undefined) return refusal;
  // The mailbox's and the share's strings, not the request's: the items hold one of each.
  const slot = parts.receipts.add({
    envelopeId,
    cursor: Number(cursor),
    text,
    targetId: box.endpointId,
    sourceId: share.senderId,
    acceptedAt: now,
  });
  parts.boxes.push(box, share, slot);
  onAdmit(target.id);
  return { kind: "accepted", acceptanceId: parts.acceptanceIdOf(envelopeId), duplicate: false, acceptedAt: now };
}

function acknowledge({ table, boxes, receipts }: Parts, endpointId: string, envelopeId: string): AcknowledgeOutcome {
  const receipt = receipts.get(envelopeId);
  if (receipt === undefined || table.targetId(receipt) !== endpointId || table.state(receipt) === "dropped") return { kind: "unknown" };
  if (table.state(receipt) === "acknowledged") return { kind: "acknowledged", duplicate: true };
  if (table.state(receipt) === "expired" || !boxes.take(receipt, "acknowledged")) return { kind: "gone" };
  return { kind: "acknowledged", duplicate: false };
}

export function createMailboxes(budgets: Budgets, onAdmit: (endpointId: string) => void): Mailboxes {
  const table = createAcceptedTable();
  const boxes = createBoxes(budgets, table);
  const receipts = createReceipts(budgets, table);
  const parts: Parts = { budgets, table, boxes, receipts, acceptanceIdOf: createAcceptanceIds() };

  return {
    admit: (request) => admit(parts, request, onAdmit),

    page(endpointId, after, limit) {
      const box = boxes.get(endpointId);
      const highest = box?.highest ?? 0n;
      const from = storedCursor(after);
      if (from > highest) return { kind: "cursor-ahead", highestCursor: highest.toString() };
      return pageOf(table, box, after, from, limit);
    },

    acknowledge: (endpointId, envelopeId) => acknowledge(parts, endpointId, envelopeId),

    highestCursor: (endpointId) => boxes.get(endpointId)?.highest ?? 0n,

    hasPendingAfter(endpointId, after) {
      const box = boxes.get(endpointId);
      if (box === undefined) return false;
      return firstAfter(table, box.entries, after) < box.entries.length;
    },

    drop: (endpointId, as, now) =>
      boxes.drop(endpointId, as, now, (slot) => {
        // An expired receipt is kept a retention from now: one already past its acceptance's
        // retention waits among the pinned ones (a younger one is pinned when the queue reaches it).
        if (as === "expired" && now - table.acceptedAt(slot) >= relayReceiptRetentionMs) receipts.pin(slot);
      }),

    pinsMail: (endpointId) => (boxes.get(endpointId)?.entries.length ?? 0) > 0,

    expire: (now) => receipts.expire(now, (slot) => boxes.take(slot, "expired", now)),

    *usages() {
      for (const box of boxes.values()) yield { usage: box.usage, shares: box.shares.values() };
    },

    counts: () => ({ expiryEntries: receipts.entries(), mailboxes: boxes.size() }),
  };
}
