/**
 * What every `agent_task_*` tool shares: its definition type (Pi's `ToolDefinition` over the tool's
 * TypeBox parameter schema), what it may use of the lifecycle, and how results and errors are
 * written. A tool body throws on failure; the one error boundary (`withErrorResult`, applied by
 * tools/index.ts) turns that into an `isError: true` result carrying `code`, `retryable` and
 * `details`, so nothing throws into Pi. Before a tool runs, the task ids it names are resolved once
 * (`withTaskIds`): the short ids the board shows work wherever a full id does.
 *
 * Pi's packages and `typebox` (the TypeBox that Pi's `ToolDefinition` is declared with) are imported
 * as types only: an installed package has no copy of them, so nothing here may load them at run
 * time. The schema objects come from src/protocol/schemas.ts, through the `@sinclair/typebox` name
 * that Pi serves to extensions.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { TextContent } from "@earendil-works/pi-ai";
import type { AgentToolResult, AgentToolUpdateCallback, ExtensionToolContext, ToolDefinition } from "@earendil-works/pi-coding-agent";
import type { Static, TSchema } from "typebox";
import type { BudgetSpent } from "../../../src/core/results.ts";
import type { TaskCore } from "../../../src/core/task-core.ts";
import type { TaskView } from "../../../src/core/views.ts";
import { TaskError, toTaskError } from "../../../src/protocol/errors.ts";
import { sendProofPollMs, sendProofWaitMs } from "../../../src/protocol/limits.ts";
import type { TaskEndpoint, ToolName } from "../../../src/protocol/schemas.ts";
import type { SessionInfo } from "../lifecycle.ts";
import { renderError } from "../render.ts";
import { isWorkflowId, resolveTaskId } from "../short-ids.ts";

/** What a tool result carries for code (the board, tests); the model reads only `content`. */
export type ToolDetails = Record<string, unknown>;

/** Pi's tool result, with the text-only content these tools write. */
export interface ToolResult extends AgentToolResult<ToolDetails> {
  content: TextContent[];
}

export interface ToolDeps {
  /** Runs an operation on the current Pi run once start-up finished (relay loss schedules recovery). */
  run<T>(operation: (core: TaskCore) => Promise<T>): Promise<T>;
  /** The current Pi run's core, or a typed error explaining why there is none. */
  current(): TaskCore;
  /** Resolves when start-up finished. */
  ready(): Promise<void>;
  /** Asks the background scheduler for an immediate (coalesced) refresh. */
  requestRefresh(): void;
  /** This session's name and relay, once started. */
  info(): SessionInfo | undefined;
  /** Remembers a peer's session name for the board. */
  rememberPeer(session: string, endpoint: TaskEndpoint): void;
  /** What this session's model spent on a granted task it works on (a sub-task gets what is left). */
  spentOn(taskId: string): BudgetSpent | undefined;
  /** Shows the model a message of pi-tasks' own (`customType`) and starts a turn for it (a workflow's end). */
  wakeModel(customType: string, content: string): void;
}

/**
 * A Pi tool definition as every `agent_task_*` tool fills it in: one of the protocol's tool names,
 * a prompt snippet and guidelines always present, and an `execute` whose trailing arguments are
 * optional (the tools read only the signal and, for spawn, the caller's directory and model).
 */
export interface TaskToolDefinition<TParams extends TSchema = TSchema> extends ToolDefinition<TParams, ToolDetails> {
  readonly name: ToolName;
  readonly promptSnippet: string;
  readonly promptGuidelines: string[];
  execute(
    toolCallId: string,
    params: Static<TParams>,
    signal?: AbortSignal,
    onUpdate?: AgentToolUpdateCallback<ToolDetails>,
    ctx?: ExtensionToolContext,
  ): Promise<ToolResult>;
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

/**
 * The single error boundary of tool execution: whatever a tool's `execute` throws becomes its error
 * result (what the model reads), never a throw into Pi.
 */
export function withErrorResult<TParams extends TSchema>(tool: TaskToolDefinition<TParams>): TaskToolDefinition<TParams> {
  return {
    ...tool,
    async execute(toolCallId, params, signal, onUpdate, ctx) {
      try {
        return await tool.execute(toolCallId, params, signal, onUpdate, ctx);
      } catch (error) {
        return errorResult(error);
      }
    },
  };
}

/** Tool input with its `taskId` (and `taskIds`) as the model wrote them. */
interface TaskIdInput {
  readonly taskId?: unknown;
  readonly taskIds?: unknown;
}

/**
 * The tool's input with the task ids it names resolved once, before the tool runs: a short id (a
 * unique prefix, as the board shows it) becomes the full id of the task this lifetime knows, so the
 * tool acts on — and its result names — the full id (short-ids.ts). Input without ids is unchanged.
 */
async function resolvedIds<T>(deps: ToolDeps, params: T): Promise<T> {
  if (typeof params !== "object" || params === null) return params;
  const { taskId, taskIds } = params as TaskIdInput;
  const many = Array.isArray(taskIds) && taskIds.some((id) => typeof id === "string");
  if (typeof taskId !== "string" && !many) return params;
  await deps.ready();
  const known = deps
    .current()
    .listTasks()
    .map((task) => task.taskId);
  // A workflow's id is the workflow runner's to find (agent_task_cancel cancels a workflow as a whole).
  const resolve = (id: unknown) => (typeof id === "string" && !isWorkflowId(id) ? resolveTaskId(known, id) : id);
  return {
    ...params,
    ...(typeof taskId === "string" ? { taskId: resolve(taskId) } : {}),
    ...(many ? { taskIds: (taskIds as unknown[]).map(resolve) } : {}),
  };
}

/** A tool whose task ids are resolved before it runs (see `resolvedIds`). */
export function withTaskIds<TParams extends TSchema>(tool: TaskToolDefinition<TParams>, deps: ToolDeps): TaskToolDefinition<TParams> {
  return {
    ...tool,
    async execute(toolCallId, params, signal, onUpdate, ctx) {
      return tool.execute(toolCallId, await resolvedIds(deps, params), signal, onUpdate, ctx);
    },
  };
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
    // Left first: a quick worker may have finished the task within this wait (it is not "ended unsent").
    if (view.deliveryEvidence.relayAcceptance === "accepted") return "accepted";
    if (view.status !== "active") return view;
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
