/**
 * What every `agent_task_*` tool shares: its definition shape, what it may use of the lifecycle,
 * and how results and errors are written. Errors come back as `isError: true` results carrying
 * `code`, `retryable` and `details`, never as throws into Pi.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { TSchema } from "@sinclair/typebox";
import type { TaskCore } from "../../../src/core/task-core.ts";
import type { TaskView } from "../../../src/core/views.ts";
import { TaskError, toTaskError } from "../../../src/protocol/errors.ts";
import { sendProofPollMs, sendProofWaitMs } from "../../../src/protocol/limits.ts";
import type { TaskEndpoint, ToolName } from "../../../src/protocol/schemas.ts";
import type { SessionInfo } from "../lifecycle.ts";
import { renderError } from "../render.ts";

export interface ToolResult {
  content: { type: "text"; text: string }[];
  details: Record<string, unknown>;
  isError?: boolean;
  terminate?: boolean;
}

/** What a tool may know of the Pi session calling it. */
export interface ToolContext {
  readonly cwd?: string;
  readonly model?: { readonly provider: string; readonly id: string };
}

export interface ToolDeps {
  /** Runs an operation on the current lifetime once start-up finished (relay loss schedules recovery). */
  run<T>(operation: (core: TaskCore) => Promise<T>): Promise<T>;
  /** The current lifetime, or a typed error explaining why there is none. */
  current(): TaskCore;
  /** Resolves when start-up finished. */
  ready(): Promise<void>;
  /** Asks the background scheduler for an immediate (coalesced) refresh. */
  requestRefresh(): void;
  /** This session's name and relay, once started. */
  info(): SessionInfo | undefined;
  /** Remembers a peer's session name for the board. */
  rememberPeer(session: string, endpoint: TaskEndpoint): void;
}

export interface TaskToolDefinition {
  readonly name: ToolName;
  readonly label: string;
  readonly description: string;
  readonly promptSnippet: string;
  readonly promptGuidelines: string[];
  readonly parameters: TSchema;
  execute(toolCallId: string, params: unknown, signal: AbortSignal | undefined, context?: ToolContext): Promise<ToolResult>;
}

export const RELAY_ACCEPTANCE_ONLY = "delivery: relay acceptance only — not execution.";

export function ok(text: string, details: Record<string, unknown>, extra: Partial<ToolResult> = {}): ToolResult {
  return { content: [{ type: "text", text }], details, ...extra };
}

export function errorResult(error: unknown): ToolResult {
  const shape = toTaskError(error).toJSON();
  return { content: [{ type: "text", text: renderError(shape) }], details: { error: shape }, isError: true };
}

export function lines(...items: (string | undefined)[]): string {
  return items.filter((item) => item !== undefined).join("\n");
}

/** Runs a tool body; any failure becomes an error result. */
export async function guarded(work: () => Promise<ToolResult>): Promise<ToolResult> {
  try {
    return await work();
  } catch (error) {
    return errorResult(error);
  }
}

/**
 * After a send (or a reassignment) whose content waits for the worker to prove its key: passes run
 * until the assignment left (`accepted`), the task ended without it leaving (its view: the worker's
 * key is not one this identity trusts), or `sendProofWaitMs` passed (`pending`: it leaves by itself
 * once the worker answers).
 */
export async function awaitProof(
  deps: ToolDeps,
  taskId: string,
  signal: AbortSignal | undefined,
): Promise<"accepted" | "pending" | TaskView> {
  const deadline = Date.now() + sendProofWaitMs;
  for (;;) {
    const view = await deps.run(async (core) => {
      await core.refresh();
      return core.getTask(taskId);
    });
    if (view.status !== "active") return view;
    if (view.deliveryEvidence.relayAcceptance === "accepted") return "accepted";
    if (Date.now() + sendProofPollMs > deadline) return "pending";
    await sleep(sendProofPollMs, undefined, signal === undefined ? {} : { signal });
  }
}

export const PROOF_PENDING =
  "delivery: pending — nothing of the task has left yet: the worker at this endpoint was asked to prove its key, and the task is sent as soon as it does.";

/**
 * The error result of a send or reassignment whose task ended before its content left (an untrusted
 * worker key). The model reads the failure here, so the same failure waiting to be shown to it
 * (a local item) is marked shown: it is not woken a second time for what it just read.
 */
export async function reportedNotSent(deps: ToolDeps, view: TaskView): Promise<ToolResult> {
  const last = view.events.at(-1);
  if (last !== undefined) await deps.run(async (core) => core.completeLocalPresentation(last.eventId));
  return errorResult(notSent(view));
}

/** The error a send or reassignment reports when its task ended before its content left (an untrusted worker key). */
function notSent(view: TaskView): TaskError {
  const last = view.events.at(-1);
  const error = (last?.payload as { error?: { code?: string; message?: string } } | undefined)?.error;
  return new TaskError(error?.code ?? "TASK_ERROR", {
    ...(error?.message === undefined ? {} : { message: error.message }),
    details: { taskId: view.taskId, status: view.status, noEffect: true },
  });
}
