/**
 * Resume, opt-in (`PI_TASKS_RESUME=1`, off by default): a Pi restarted on the same session
 * (`pi --continue`, `--resume`, a reload) reads from its session branch only which tasks it had
 * delegated — each `agent_task_send` result's record — and to whom, with the events the session
 * showed or archived for them and the worker key they were shown with. The core then asks each
 * worker, signed, whether it still holds its tasks (src/core/resume.ts): a confirmed task continues,
 * nothing shown before is shown again; any other is orphaned (reassignable). The history authorizes
 * nothing: a worker's gate opens only on fresh signed mail, and a worker never reads its history.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { ConfiguredTaskCore } from "../../src/core/configured.ts";
import type { TaskCore } from "../../src/core/task-core.ts";
import { resumePollMs, resumeWaitMs } from "../../src/protocol/limits.ts";
import { toTaskError } from "../../src/protocol/errors.ts";
import { EVENT_MESSAGE, EVENT_RECORD } from "../../src/protocol/session-entries.ts";
import { isRecord } from "../../src/protocol/validate.ts";
import type { Env } from "../../src/relay-client/config.ts";

/** `PI_TASKS_RESUME=1`: take back this session's delegated tasks after a restart. */
export const RESUME_VARIABLE = "PI_TASKS_RESUME";

export function resumeWanted(env: Env): boolean {
  return env[RESUME_VARIABLE] === "1";
}

/** A delegated task as the branch knows it (the core checks every field). */
interface Delegated {
  readonly record: Record<string, unknown>;
  readonly events: Record<string, unknown>[];
  workerKey?: string;
}

/** The details of a successful `toolName` result in the branch, else undefined. */
function toolDetails(entry: unknown, toolName: string): Record<string, unknown> | undefined {
  if (!isRecord(entry) || entry.type !== "message" || !isRecord(entry.message)) return undefined;
  const message = entry.message;
  if (message.role !== "toolResult" || message.toolName !== toolName || message.isError === true) return undefined;
  return isRecord(message.details) ? message.details : undefined;
}

/** The record an `agent_task_send` result carries (a successful call), else undefined. */
function sentRecord(entry: unknown): Record<string, unknown> | undefined {
  const record = toolDetails(entry, "agent_task_send")?.record;
  return isRecord(record) && typeof record.taskId === "string" ? record : undefined;
}

/** The tools by which this session closed a task it delegated: it acknowledged or cancelled it. */
const CLOSING_TOOLS = ["agent_task_ack", "agent_task_cancel"] as const;

/** The task a successful closing call (acknowledge, cancel) closed, else undefined. */
function closedTask(entry: unknown): string | undefined {
  for (const tool of CLOSING_TOOLS) {
    const taskId = toolDetails(entry, tool)?.taskId;
    if (typeof taskId === "string") return taskId;
  }
  return undefined;
}

/** An event this session showed (`pi-tasks-event`) or archived (`pi-tasks-event-record`) as the task's origin. */
function originEvent(entry: unknown): { taskId: string; event: Record<string, unknown>; peerKey?: string } | undefined {
  if (!isRecord(entry)) return undefined;
  const shown = entry.type === "custom_message" && entry.customType === EVENT_MESSAGE;
  const archived = entry.type === "custom" && entry.customType === EVENT_RECORD;
  const body = shown ? entry.details : archived ? entry.data : undefined;
  if (!isRecord(body) || body.role !== "origin" || typeof body.taskId !== "string" || !isRecord(body.event)) return undefined;
  return { taskId: body.taskId, event: body.event, ...(typeof body.peerKey === "string" ? { peerKey: body.peerKey } : {}) };
}

/** What the branch showed of one task: its events by id, and the worker key they came with. */
interface Shown {
  readonly events: Map<string, Record<string, unknown>>;
  workerKey?: string;
}

const sequenceOf = (event: Record<string, unknown>) => BigInt(typeof event.sequence === "string" ? event.sequence : "0");

/**
 * The tasks this session delegated and had not closed when it ended (closed: acknowledged or
 * cancelled by it — those stay closed), as its branch knows them, each with its events in sequence order.
 */
export function delegatedTasks(branch: readonly unknown[]): Delegated[] {
  const records = new Map<string, Record<string, unknown>>();
  const shown = new Map<string, Shown>();
  const closed = new Set<string>();
  for (const entry of branch) {
    const record = sentRecord(entry);
    if (record !== undefined) records.set(String(record.taskId), record);
    const ended = closedTask(entry);
    if (ended !== undefined) closed.add(ended);
    const event = originEvent(entry);
    if (event === undefined) continue;
    const task: Shown = shown.get(event.taskId) ?? { events: new Map() };
    task.events.set(String(event.event.eventId), event.event);
    if (event.peerKey !== undefined) task.workerKey = event.peerKey;
    shown.set(event.taskId, task);
  }
  return [...records]
    .filter(([taskId]) => !closed.has(taskId))
    .map(([taskId, record]) => {
      const task = shown.get(taskId);
      const events = [...(task?.events.values() ?? [])].sort((a, b) => (sequenceOf(a) < sequenceOf(b) ? -1 : 1));
      return { record, events, ...(task?.workerKey === undefined ? {} : { workerKey: task.workerKey }) };
    });
}

/** Waits (at most `resumeWaitMs`) until every restored task was confirmed or lost. */
async function answered(configured: ConfiguredTaskCore, taskIds: readonly string[]): Promise<void> {
  const deadline = Date.now() + resumeWaitMs;
  const waiting = (core: TaskCore) => taskIds.some((taskId) => core.findTask(taskId)?.resuming === true);
  while (Date.now() < deadline) {
    // A failed pass ends the wait early: the tasks keep waiting for their workers in the background.
    const still = await configured
      .run(async (core) => {
        await core.refresh();
        return waiting(core);
      })
      .catch(() => false);
    if (!still) return;
    await sleep(resumePollMs);
  }
}

/**
 * Takes back the branch's delegated tasks and waits a moment for their workers' word (start-up
 * finishes after it: the model's first tool call sees each task confirmed or lost). Says what
 * happened on Pi's notification line; never throws.
 */
export async function resumeDelegated(
  configured: ConfiguredTaskCore,
  branch: readonly unknown[],
  notify: (message: string, level: "info" | "warning") => void,
): Promise<void> {
  const tasks = delegatedTasks(branch);
  if (tasks.length === 0) return;
  try {
    const restored = await configured.run((core) => core.resume(tasks));
    if (restored.length === 0) return;
    notify(`pi-tasks: resuming ${restored.length} delegated task(s); asking their workers whether they still hold them`, "info");
    await answered(configured, restored);
  } catch (error) {
    const failure = toTaskError(error);
    notify(`pi-tasks: the delegated tasks were not resumed (${failure.code}: ${failure.message})`, "warning");
  }
}
