/**
 * The worker tool gate (`PI_TASK_WORKER` exactly `1`), fail-closed in Pi's `tool_call` hook.
 *
 * - inbox, status and wait are always allowed; the coordination tools (send, workflow, cancel, revise, apply,
 *   ack, reassign, spawn, workers, stop) are forbidden to workers: workers are leaves;
 * - every other tool needs an eligible assignment: a task addressed to this endpoint, active in
 *   this lifetime's RAM, whose `task.created`/`task.reassigned` event Pi recorded in the session,
 *   with no terminal intent submitted and not closing;
 * - `agent_task_message` and `agent_task_request_grant` must name an eligible assignment (by its full id or a short id, resolved
 *   as the tool resolves it: short-ids.ts);
 * - preflighting `agent_task_done` marks its task closing before sibling calls are preflighted; a
 *   done retry for the same assigned task stays allowed; a done call that ends in an error (refused:
 *   an invalid result path, no relay…) submitted nothing, so its mark goes and the worker can fix
 *   its result or ask (`ended`);
 * - any exception blocks.
 * Old session history never authorises work: the RAM of a new lifetime is empty, and the closing
 * marks belong to the lifetime (core) they were made in.
 */
import type { TaskCore } from "../../src/core/task-core.ts";
import { ERROR_REGISTRY } from "../../src/protocol/errors.ts";
import { latestAssignment } from "../../src/protocol/events.ts";
import { matchId } from "./short-ids.ts";

export const WORKER_ENV = "PI_TASK_WORKER";
export const READ_ONLY_TOOLS: ReadonlySet<string> = new Set(["agent_task_inbox", "agent_task_status", "agent_task_wait"]);
export const COORDINATION_TOOLS: ReadonlySet<string> = new Set([
  "agent_task_send",
  "agent_task_workflow",
  "agent_task_cancel",
  "agent_task_revise",
  "agent_task_apply",
  "agent_task_ack",
  "agent_task_reassign",
  "agent_task_spawn",
  "agent_task_workers",
  "agent_task_stop",
]);

export interface GateDeps {
  /** The current Pi run's core, if started. */
  core(): TaskCore | undefined;
  /** Whether Pi recorded this event's `pi-tasks-event` message in the session. */
  inSession(eventId: string): boolean;
}

export interface WorkerGate {
  readonly enabled: boolean;
  /** Returns a block reason, or undefined to allow. `toolCallId` names the call (to release a failed done's mark). */
  check(toolName: string, input: unknown, toolCallId?: string): { readonly code: string; readonly reason: string } | undefined;
  /** A tool call ended (Pi's `tool_execution_end`): a done that failed releases its task's closing mark. */
  ended(toolCallId: string, isError: boolean): void;
  /** Whether a worker waits for an assignment (drives the 1 s cadence). */
  waiting(): boolean;
  /** Forgets closing marks (start, shutdown and relay loss). */
  reset(): void;
}

export function isWorker(env: Record<string, string | undefined>): boolean {
  return env[WORKER_ENV] === "1";
}

function blocked(code: "PI_TASK_WORKER_ASSIGNMENT_REQUIRED" | "PI_TASK_WORKER_COORDINATION_FORBIDDEN", detail: string) {
  return { code, reason: `${code}: ${ERROR_REGISTRY[code].message} ${detail}`.trim() };
}

/** The task the call names, its short id resolved as the tool will resolve it (short-ids.ts); an ambiguous one names none. */
function taskIdOf(core: TaskCore, input: unknown): string | undefined {
  if (typeof input !== "object" || input === null) return undefined;
  const taskId = (input as { taskId?: unknown }).taskId;
  if (typeof taskId !== "string") return undefined;
  const match = matchId(core.listTasks(), (task) => task.taskId, taskId);
  return match.kind === "one" ? match.item.taskId : taskId;
}

/** Which of a core's tasks this worker may work on now, and the closing marks that decide it. */
interface Eligibility {
  /** The task's assignment is incorporated: in this lifetime's RAM and recorded in the session. */
  incorporated(core: TaskCore, taskId: string): boolean;
  /** Marks the task's current round closing, by the done call `toolCallId`. */
  markClosing(core: TaskCore, taskId: string, toolCallId: string | undefined): void;
  eligible(core: TaskCore, taskId: string): boolean;
  anyEligible(core: TaskCore): boolean;
  /** A done call that ended in an error submitted nothing: its closing mark goes. */
  release(core: TaskCore, toolCallId: string): void;
  /** Forgets every closing mark. */
  reset(): void;
}

function createEligibility(deps: GateDeps): Eligibility {
  /** Tasks (rounds) whose `agent_task_done` was preflighted, with the call, per lifetime: a new lifetime starts with none. */
  let closing = new WeakMap<TaskCore, Map<string, string | undefined>>();

  function closingOf(core: TaskCore): Map<string, string | undefined> {
    let marks = closing.get(core);
    if (marks === undefined) closing.set(core, (marks = new Map()));
    return marks;
  }

  function incorporated(core: TaskCore, taskId: string): boolean {
    const task = core.findTask(taskId);
    if (task === undefined || task.role !== "worker") return false;
    const assignment = latestAssignment(task.events);
    return assignment !== undefined && core.insertionRecorded(assignment.eventId) && deps.inSession(assignment.eventId);
  }

  /** A task's closing mark is for its current round: a revision opens the task again. */
  function roundOf(core: TaskCore, taskId: string): string {
    return `${taskId}#${core.findTask(taskId)?.revision ?? 0}`;
  }

  function eligible(core: TaskCore, taskId: string): boolean {
    if (closingOf(core).has(roundOf(core, taskId)) || !incorporated(core, taskId)) return false;
    const task = core.findTask(taskId)!;
    return task.status === "active" && task.terminalDelivery.state === "not_submitted";
  }

  return {
    incorporated,
    markClosing(core, taskId, toolCallId) {
      closingOf(core).set(roundOf(core, taskId), toolCallId);
    },
    eligible,
    anyEligible: (core) => core.activeTaskIds().some((taskId) => eligible(core, taskId)),
    release(core, toolCallId) {
      const marks = closingOf(core);
      for (const [round, call] of marks) if (call === toolCallId) marks.delete(round);
    },
    reset: () => {
      closing = new WeakMap();
    },
  };
}

/** The verdict on one call of an enabled gate (exceptions are the caller's: they block). */
function decide(rules: Eligibility, deps: GateDeps, toolName: string, input: unknown, toolCallId: string | undefined) {
  if (READ_ONLY_TOOLS.has(toolName)) return undefined;
  if (COORDINATION_TOOLS.has(toolName)) return blocked("PI_TASK_WORKER_COORDINATION_FORBIDDEN", "Task workers are leaf roles.");
  const core = deps.core();
  if (core === undefined) return blocked("PI_TASK_WORKER_ASSIGNMENT_REQUIRED", "pi-tasks is not running.");
  if (toolName === "agent_task_done") {
    const taskId = taskIdOf(core, input);
    if (taskId !== undefined && rules.incorporated(core, taskId)) {
      // Marked before sibling calls of the same batch are checked.
      rules.markClosing(core, taskId, toolCallId);
      return undefined;
    }
    return blocked("PI_TASK_WORKER_ASSIGNMENT_REQUIRED", "agent_task_done must name this worker's assignment.");
  }
  if (toolName === "agent_task_message" || toolName === "agent_task_request_grant") {
    const taskId = taskIdOf(core, input);
    if (taskId !== undefined && rules.eligible(core, taskId)) return undefined;
    return blocked("PI_TASK_WORKER_ASSIGNMENT_REQUIRED", `${toolName} must name an active assignment of this worker.`);
  }
  if (rules.anyEligible(core)) return undefined;
  return blocked(
    "PI_TASK_WORKER_ASSIGNMENT_REQUIRED",
    "End your turn: pi-tasks wakes you when an assignment arrives (agent_task_inbox lists your tasks).",
  );
}

export function createWorkerGate(enabled: boolean, deps: GateDeps): WorkerGate {
  const rules = createEligibility(deps);
  return {
    enabled,
    check(toolName, input, toolCallId) {
      if (!enabled) return undefined;
      try {
        return decide(rules, deps, toolName, input, toolCallId);
      } catch {
        return blocked("PI_TASK_WORKER_ASSIGNMENT_REQUIRED", "The gate could not verify an assignment.");
      }
    },
    waiting() {
      if (!enabled) return false;
      const core = deps.core();
      return core === undefined || !rules.anyEligible(core);
    },
    ended(toolCallId, isError) {
      const core = deps.core();
      if (!enabled || !isError || core === undefined) return;
      rules.release(core, toolCallId);
    },
    reset: () => rules.reset(),
  };
}
