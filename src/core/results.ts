/** What the TaskCore's operations answer (relay acceptance of their own envelope, never execution). */
import type { TaskEndpoint, TerminalDelivery } from "../protocol/schemas.ts";
import type { EnvelopeDelivery } from "./ship.ts";

export interface OperationOptions {
  readonly signal?: AbortSignal;
}

export interface CreateResult {
  readonly taskId: string;
  readonly envelopeId: string;
  readonly target: TaskEndpoint;
}

export interface MessageResult {
  readonly taskId: string;
  readonly eventId?: string;
  readonly intentId?: string;
  readonly envelopeId: string;
  readonly authority: "origin" | "receiver";
}

export interface DoneResult {
  readonly taskId: string;
  readonly requestedStatus: string;
  readonly observedCanonicalStatus: string;
  readonly terminalDelivery: TerminalDelivery;
  readonly authority: "origin" | "receiver";
  readonly canonicalEvent?: { readonly type: string; readonly eventId: string };
}

export interface CancelResult {
  readonly taskId: string;
  readonly status: "cancelled";
  readonly eventId: string;
  readonly delivery: EnvelopeDelivery;
  readonly warnings: readonly { code: string; message: string; retryable: false; delivery: "blocked"; target: TaskEndpoint }[];
}

export interface AckResult {
  readonly taskId: string;
  readonly eventId: string;
  readonly delivery: EnvelopeDelivery;
}

export interface ReassignResult {
  readonly taskId: string;
  readonly previousTarget: TaskEndpoint;
  readonly target: TaskEndpoint;
  readonly eventId: string;
  readonly envelopeId: string;
  readonly historyTruncated: boolean;
}
