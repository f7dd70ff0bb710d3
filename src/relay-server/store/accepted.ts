/**
 * The accepted envelopes of the memory store, packed: each is a slot number into a few columns
 * (typed arrays, and arrays of strings the relay holds anyway) rather than an object of its own;
 * the dedupe index maps an envelope id to its slot (the id string is the one the column holds). An
 * envelope then costs the relay its text and a few dozen bytes (docs/performance.md, relay memory
 * per queued envelope). Nothing here knows mailboxes or budgets: mailbox.ts gives the slots meaning.
 */
import { violation } from "./invariant.ts";

/** Where an accepted envelope is: queued, acknowledged, dropped with its mailbox (a new generation), or expired unacknowledged. */
export type ReceiptState = "mailbox" | "acknowledged" | "dropped" | "expired";

const STATES: readonly ReceiptState[] = ["mailbox", "acknowledged", "dropped", "expired"];
const STATE_MASK = 3;
/** Waiting in the expiry queue: a removed slot is reused only once the queue has passed it. */
const QUEUED = 4;
/** Removed (no longer found; its slot free, or free once the queue passes it). */
const REMOVED = 8;

const FIRST_CAPACITY = 64;

/** What an admission records. */
export interface NewAccepted {
  readonly envelopeId: string;
  readonly cursor: number;
  readonly text: string;
  /** The target mailbox's endpoint id (the mailbox's own string, shared). */
  readonly targetId: string;
  /** The sender's endpoint id (its share's string, shared). */
  readonly sourceId: string;
  readonly acceptedAt: number;
}

export interface AcceptedTable {
  /** The slot of an accepted envelope id, or -1. */
  find(envelopeId: string): number;
  /** Records an admission (queued, in the expiry queue) and indexes its id; returns its slot. */
  add(accepted: NewAccepted): number;
  envelopeId(slot: number): string;
  /** The mailbox cursor (while queued: it means nothing once the item left its mailbox). */
  cursor(slot: number): number;
  /** The canonical text while queued; once it left the mailbox, the digest of the text (none when dropped). */
  content(slot: number): string | undefined;
  targetId(slot: number): string;
  sourceId(slot: number): string;
  acceptedAt(slot: number): number;
  /** When it expired unacknowledged (state `expired` only). */
  expiredAt(slot: number): number;
  state(slot: number): ReceiptState;
  /** Sets where it is now and what it keeps (`content`); `expiredAt` for `expired`. */
  settle(slot: number, state: ReceiptState, content: string | undefined, expiredAt?: number): void;
  /** Unindexes a slot; it is reused once the expiry queue passed it (`dequeue`). */
  remove(slot: number): void;
  /** Whether the slot was removed (it waits in the expiry queue, holding nothing). */
  removed(slot: number): boolean;
  /** The expiry queue passed the slot; returns false when it had been removed (nothing is there). */
  dequeue(slot: number): boolean;
}

/** A table of `capacity` slots' columns. */
interface Columns {
  readonly ids: (string | undefined)[];
  /** The cursor while queued; once expired unacknowledged, when it expired (its cursor is spent then). */
  readonly cursors: Float64Array;
  readonly acceptedAts: Float64Array;
  readonly flags: Uint8Array;
  readonly contents: (string | undefined)[];
  readonly targets: (string | undefined)[];
  readonly sources: (string | undefined)[];
}

function columns(capacity: number, from?: Columns): Columns {
  const grown: Columns = {
    ids: new Array<string | undefined>(capacity).fill(undefined),
    cursors: new Float64Array(capacity),
    acceptedAts: new Float64Array(capacity),
    flags: new Uint8Array(capacity),
    contents: new Array<string | undefined>(capacity).fill(undefined),
    targets: new Array<string | undefined>(capacity).fill(undefined),
    sources: new Array<string | undefined>(capacity).fill(undefined),
  };
  if (from !== undefined) {
    grown.cursors.set(from.cursors);
    grown.acceptedAts.set(from.acceptedAts);
    grown.flags.set(from.flags);
    for (let slot = 0; slot < from.flags.length; slot += 1) {
      grown.ids[slot] = from.ids[slot];
      grown.contents[slot] = from.contents[slot];
      grown.targets[slot] = from.targets[slot];
      grown.sources[slot] = from.sources[slot];
    }
  }
  return grown;
}

/** Marks a slot removed (`flags`) and lets go of its strings. */
function clear(cols: Columns, slot: number, flags: number): void {
  cols.flags[slot] = flags;
  cols.ids[slot] = undefined;
  cols.contents[slot] = undefined;
  cols.targets[slot] = undefined;
  cols.sources[slot] = undefined;
}

export function createAcceptedTable(): AcceptedTable {
  let cols = columns(FIRST_CAPACITY);
  let used = 0;
  const free: number[] = [];
  /** The slot of each accepted envelope id still found. */
  const index = new Map<string, number>();

  function allocate(): number {
    const reused = free.pop();
    if (reused !== undefined) return reused;
    if (used === cols.flags.length) cols = columns(2 * used, cols);
    used += 1;
    return used - 1;
  }

  /** Clears a slot and puts it back for reuse. */
  function release(slot: number): void {
    clear(cols, slot, REMOVED);
    free.push(slot);
  }

  function live(slot: number): number {
    const flags = cols.flags[slot]!;
    if ((flags & REMOVED) !== 0) throw violation("a removed receipt is never read", { slot });
    return flags;
  }

  return {
    find: (envelopeId) => index.get(envelopeId) ?? -1,
    add(accepted) {
      const slot = allocate();
      cols.ids[slot] = accepted.envelopeId;
      cols.cursors[slot] = accepted.cursor;
      cols.acceptedAts[slot] = accepted.acceptedAt;
      cols.contents[slot] = accepted.text;
      cols.targets[slot] = accepted.targetId;
      cols.sources[slot] = accepted.sourceId;
      cols.flags[slot] = QUEUED;
      index.set(accepted.envelopeId, slot);
      return slot;
    },
    envelopeId(slot) {
      live(slot);
      return cols.ids[slot]!;
    },
    cursor: (slot) => cols.cursors[slot]!,
    content: (slot) => cols.contents[slot],
    targetId: (slot) => cols.targets[slot]!,
    sourceId: (slot) => cols.sources[slot]!,
    acceptedAt: (slot) => cols.acceptedAts[slot]!,
    expiredAt(slot) {
      if ((live(slot) & STATE_MASK) !== STATES.indexOf("expired")) throw violation("only an expired receipt has an expiry", { slot });
      return cols.cursors[slot]!;
    },
    state: (slot) => STATES[live(slot) & STATE_MASK]!,
    settle(slot, state, content, expiredAt) {
      const flags = live(slot);
      cols.flags[slot] = (flags & ~STATE_MASK) | STATES.indexOf(state);
      cols.contents[slot] = content;
      if (expiredAt !== undefined) cols.cursors[slot] = expiredAt;
    },
    remove(slot) {
      const flags = live(slot);
      index.delete(cols.ids[slot]!);
      if ((flags & QUEUED) === 0) release(slot);
      else clear(cols, slot, QUEUED | REMOVED);
    },
    removed: (slot) => (cols.flags[slot]! & REMOVED) !== 0,
    dequeue(slot) {
      const flags = cols.flags[slot]!;
      if ((flags & REMOVED) !== 0) {
        release(slot);
        return false;
      }
      cols.flags[slot] = flags & ~QUEUED;
      return true;
    },
  };
}
