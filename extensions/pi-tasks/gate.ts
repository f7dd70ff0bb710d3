/**
 * The worker tool gate (`PI_TASK_WORKER` exactly `1`), fail-closed in Pi's `tool_call` hook.
 *
 * - inbox, status and wait are always allowed; the coordination tools (send, cancel, revise, apply,
 *   ack, reassign, spawn, workers, stop) are forbidden to workers: workers are leaves;
 * - every other tool needs an eligible assignment: a task addressed to this endpoint, active in
 *   this lifetime's RAM, whose `task.created`/`task.reassigned` event Pi recorded in the session,
 *   with no terminal intent submitted and not closing;
 * - `agent_task_message` must name an eligible assignment;
 * - preflighting `agent_task_done` marks its task closing before sibling calls are preflighted; a
 *   done retry for the same assigned task stays allowed;
 * - any exception blocks.
 * Old session history never authorises work: the RAM of a new lifetime is empty, and the closing
 * marks belong to the lifetime (core) they were made in.
 */
import type { TaskCore } from "../../src/core/task-core.ts";
import { ERROR_REGISTRY } from "../../src/protocol/errors.ts";
import { latestAssignment } from "../../src/protocol/events.ts";

export const WORKER_ENV = "PI_TASK_WORKER";
export const READ_ONLY_TOOLS: ReadonlySet<string> = new Set(["agent_task_inbox", "agent_task_status", "agent_task_wait"]);
export const COORDINATION_TOOLS: ReadonlySet<string> = new Set([
  "agent_task_send",
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
  /** The current lifetime, if started. */
  core(): TaskCore | undefined;
  /** Whether Pi recorded this event's `pi-tasks-event` message in the session. */
  inSession(eventId: string): boolean;
}

export interface WorkerGate {
  readonly enabled: boolean;
  /** Returns a block reason, or undefined to allow. */
  check(toolName: string, input: unknown): { readonly code: string; readonly reason: string } | undefined;
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

function taskIdOf(input: unknown): string | undefined {
  if (typeof input !== "object" || input === null) return undefined;
  const taskId = (input as { taskId?: unknown }).taskId;
  return typeof taskId === "string" ? taskId : undefined;
}

export function createWorkerGate(enabled: boolean, deps: GateDeps): WorkerGate {
  /** Tasks whose `agent_task_done` was preflighted, per lifetime: a new lifetime starts with none. */
  let closing = new WeakMap<TaskCore, Set<string>>();

  function closingOf(core: TaskCore): Set<string> {
    let set = closing.get(core);
    if (set === undefined) closing.set(core, (set = new Set()));
    return set;
  }

  /** The task's assignment is incorporated: in this lifetime's RAM and recorded in the session. */
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

  function anyEligible(core: TaskCore): boolean {
    return core.activeTaskIds().some((taskId) => eligible(core, taskId));
  }

  function decide(toolName: string, input: unknown) {
    if (READ_ONLY_TOOLS.has(toolName)) return undefined;
    if (COORDINATION_TOOLS.has(toolName)) return blocked("PI_TASK_WORKER_COORDINATION_FORBIDDEN", "Task workers are leaf roles.");
    const core = deps.core();
    if (core === undefined) return blocked("PI_TASK_WORKER_ASSIGNMENT_REQUIRED", "pi-tasks is not running.");
    if (toolName === "agent_task_done") {
      const taskId = taskIdOf(input);
      if (taskId !== undefined && incorporated(core, taskId)) {
        // Marked before sibling calls of the same batch are checked.
        closingOf(core).add(roundOf(core, taskId));
        return undefined;
      }
      return blocked("PI_TASK_WORKER_ASSIGNMENT_REQUIRED", "agent_task_done must name this worker's assignment.");
    }
    if (toolName === "agent_task_message") {
      const taskId = taskIdOf(input);
      if (taskId !== undefined && eligible(core, taskId)) return undefined;
      return blocked("PI_TASK_WORKER_ASSIGNMENT_REQUIRED", "agent_task_message must name an active assignment of this worker.");
    }
    if (anyEligible(core)) return undefined;
    return blocked(
      "PI_TASK_WORKER_ASSIGNMENT_REQUIRED",
      "End your turn: pi-tasks wakes you when an assignment arrives (agent_task_inbox lists your tasks).",
    );
  }

  return {
    enabled,
    check(toolName, input) {
      if (!enabled) return undefined;
      try {
        return decide(toolName, input);
      } catch {
        return blocked("PI_TASK_WORKER_ASSIGNMENT_REQUIRED", "The gate could not verify an assignment.");
      }
    },
    waiting() {
      if (!enabled) return false;
      const core = deps.core();
      return core === undefined || !anyEligible(core);
    },
    reset: () => {
      closing = new WeakMap();
    },
  };
}
