/**
 * The presentation host: how the core puts task events in front of a model. The Pi extension
 * implements it with custom messages; tests implement it in memory. The core never imports Pi.
 */
import type { CancelOutcome, TaskEvent } from "../protocol/schemas.ts";
import type { TaskRole, TaskSnapshot } from "../store/task-store.ts";
import type { Signer } from "./trust.ts";

export interface PresentationItem {
  /** `relay`: a delivery from the relay; `local`: the origin's own view of an event it created. */
  readonly kind: "relay" | "local";
  readonly order: number;
  readonly taskId: string;
  readonly eventId: string;
  readonly event: TaskEvent;
  readonly role: TaskRole;
  /** Model-visible (insert + wake) rather than archive-only. */
  readonly visible: boolean;
  /** The task as this endpoint knows it now (for rendering). */
  readonly task: TaskSnapshot;
  /** The relay envelope, for relay items. */
  readonly envelopeId?: string;
  /** The task's other party as the trust gate knows it (unknown when no key is bound yet). */
  readonly peer?: Signer;
}

/** A delivery intake rejected (the trust gate or validation): never presented, ACKed, recorded. */
export interface RejectionRecord {
  readonly envelopeId: string;
  readonly code: string;
  readonly message: string;
  readonly details: Readonly<Record<string, unknown>>;
}

export interface PresentationHost {
  /** True while the model may be given new input now (idle, nothing queued). */
  canPresent(): boolean;
  /** Inserts a model-visible event without starting a turn; true when the insertion is observed. */
  insert(item: PresentationItem): boolean | Promise<boolean>;
  /** Emits one wake for inserted events; true when the wake is observed. */
  wake(items: readonly PresentationItem[]): boolean | Promise<boolean>;
  /** Archives a non-visible event without waking the model (before its relay ACK). */
  archive(item: PresentationItem): void | Promise<void>;
  /** Records (an archive entry; never the model) that a delivery was rejected. Optional. */
  recordRejection?(record: RejectionRecord): void | Promise<void>;
  /**
   * Puts a cancel in front of a busy model now — a steer after its current tool batch, and an
   * abort of the running turn where the host does that — instead of waiting until it is idle.
   * True when the cancel was handed over; `report` is called once with what the run did within
   * the grace period. Optional: without it a cancel waits like any event.
   */
  interrupt?(item: PresentationItem, report: (outcome: CancelOutcome) => void): boolean | Promise<boolean>;
  /**
   * Puts the origin's steer in front of a busy model now: read after its current tool batch, inside
   * the running turn (Pi's steering queue), never waiting for the run to end. True when handed over.
   * Optional: without it a steer waits like any event.
   */
  steer?(item: PresentationItem): boolean | Promise<boolean>;
}

/** A host that presents nothing: visible items stay held (useful before Pi is ready). */
export const absentHost: PresentationHost = {
  canPresent: () => false,
  insert: () => false,
  wake: () => false,
  archive: () => undefined,
};
