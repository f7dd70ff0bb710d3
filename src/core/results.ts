/** What the TaskCore's operations answer (relay acceptance of their own envelope, never execution). */
import type { DeferralCause } from "../protocol/errors.ts";
import type { Grant, TaskEndpoint, TerminalDelivery } from "../protocol/schemas.ts";
import type { EnvelopeDelivery } from "./ship.ts";

export interface OperationOptions {
  readonly signal?: AbortSignal;
}

/**
 * A library caller's choice of where a new task sits (never the model's: `agent_task_send` takes
 * exactly `{to, task, timeoutMs?}`). Default: delegated from the one task this session works on,
 * a root task when it works on none.
 */
export type LineageChoice = "root" | { readonly parentTaskId: string };

export interface CreateOptions extends OperationOptions {
  readonly lineage?: LineageChoice;
  /**
   * What the worker may do (src/protocol/grant.ts). A task delegated from another is narrowed to
   * its parent's grant whatever is asked here; absent: the parent's, or none.
   */
  readonly grant?: Grant;
  /**
   * What this session's model has used so far on a task, as the extension counts it (turns, cost):
   * a sub-task gets only what is left of its parent's `maxTurns` and `maxCostUsd`.
   */
  readonly spentOn?: (taskId: string) => BudgetSpent | undefined;
  /**
   * A step of a workflow the extension runs: its outcome is shown to the model without waking it
   * (the workflow wakes it once, with every step's outcome). Questions still wake.
   */
  readonly quietResult?: boolean;
}

/** Turns and cost a worker's model spent on a task (extensions/pi-tasks/grant-budgets.ts). */
export interface BudgetSpent {
  readonly turns: number;
  readonly costUsd: number;
}

export interface CreateResult {
  readonly taskId: string;
  readonly envelopeId: string;
  readonly target: TaskEndpoint;
  /**
   * `accepted`: the relay accepted the assignment. `pending`: the task exists and its content waits
   * for the worker to prove who it is (asked now; sent once it answered — proofs.ts).
   */
  readonly delivery: "accepted" | "pending";
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
  /** Canonical at the origin at once, whatever became of its delivery. */
  readonly status: "cancelled";
  readonly eventId: string;
  /** How the cancel's envelope to the worker fared at the relay (best effort). */
  readonly delivery: EnvelopeDelivery;
  /** The worker was known lost (orphaned, or its endpoint is not registered): no delivery is required. */
  readonly workerLost: boolean;
  /** Why a `pending` delivery waits (it stays queued; a later pass sends it). */
  readonly pending?: { readonly code: string; readonly reason: string; readonly cause?: DeferralCause };
  /** A refusal of the cancel's envelope, unless the worker was known lost before (then none is news). */
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
  /** As for `createTask`: `pending` while the new target has yet to prove the key the task expects. */
  readonly delivery: "accepted" | "pending";
}
