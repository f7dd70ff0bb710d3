/**
 * The relay session's plain types that its helpers share (src/relay-client/session.ts re-exports
 * them): the session's status, its binding, one send's acceptance and one batch item's outcome.
 * They live apart from the session so binding-state.ts and send-coalescer.ts can name them without
 * importing the session that builds on them.
 */
import type { TaskError } from "../protocol/errors.ts";
import type { TaskEndpoint } from "../protocol/schemas.ts";

export type SessionStatus = "unbound" | "ready" | "reset" | "closed";

export interface Binding {
  readonly epoch: string;
  readonly endpoint: TaskEndpoint;
  readonly generation: string;
  readonly callerSession: string;
  readonly url: string;
  /** Local lease deadline: request start + requested lease, on the local clock. */
  readonly leaseDeadline: number;
}

export interface SendAcceptance {
  readonly envelopeId: string;
  readonly acceptanceId: string;
  readonly duplicate: boolean;
  readonly forwarding: "local" | "forwarded";
}

/** One envelope's outcome in a batch (`send-batch-v1`, `ack-carry-v1`): accepted, refused (the error a single send would throw), or skipped (not tried). */
export type SentOutcome =
  | { readonly envelopeId: string; readonly outcome: "accepted"; readonly acceptance: SendAcceptance }
  | { readonly envelopeId: string; readonly outcome: "refused"; readonly error: TaskError }
  | { readonly envelopeId: string; readonly outcome: "skipped" };
