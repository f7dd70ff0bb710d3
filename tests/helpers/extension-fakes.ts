/**
 * In-memory stand-ins for the parts of a TaskCore the extension modules read (gate, tools), and
 * builders of task views, presentation items, pass reports, the tools over one core and an idle Pi
 * context. Only what those modules touch is implemented;
 * everything else throws so a test notices when a module starts depending on more.
 */
import type { PresentationItem } from "../../src/core/host.ts";
import { outcomeOf } from "../../src/core/views.ts";
import { supersededBy } from "../../src/core/corrections.ts";
import type { TaskCore, TaskView } from "../../src/core/task-core.ts";
import { TaskError } from "../../src/protocol/errors.ts";
import type { TaskEvent, TaskEventType, TerminalDelivery } from "../../src/protocol/schemas.ts";
import type { TaskRole } from "../../src/store/task-store.ts";
import type { PiContextView, SessionInfo } from "../../extensions/pi-tasks/lifecycle.ts";
import { createTaskTools, type TaskToolDefinition, type ToolDeps } from "../../extensions/pi-tasks/tools/index.ts";
import type { PassReport } from "../../src/core/pass.ts";
import type { FailureKind } from "../../src/core/scope.ts";
import { ORIGIN, taskEvent, taskRecord, WORKER } from "./fixtures.ts";

export interface ViewOptions {
  readonly role?: TaskRole;
  readonly status?: TaskView["status"];
  readonly terminalDelivery?: TerminalDelivery;
  readonly task?: string;
  /** Extra events after `task.created` (type and payload). */
  readonly events?: readonly { type: TaskEventType; payload?: Record<string, unknown> }[];
}

/** A task view whose first event is its `task.created`. */
export function taskView(options: ViewOptions = {}): TaskView {
  const record = taskRecord({ status: options.status ?? "active", ...(options.task === undefined ? {} : { task: options.task }) });
  const events: TaskEvent[] = [taskEvent(record, 1, "task.created")];
  for (const [index, extra] of (options.events ?? []).entries()) events.push(taskEvent(record, index + 2, extra.type, extra.payload));
  const snapshot = { ...record, role: options.role ?? "worker", events } as const;
  return {
    ...snapshot,
    outcome: outcomeOf(snapshot),
    superseded: supersededBy(events),
    terminalDelivery: options.terminalDelivery ?? { state: "not_submitted" },
    deliveryEvidence: {
      relayAcceptance: "not_applicable",
      receiverReceipt: "confirmed",
      piInsertion: "confirmed",
      wakeAcceptance: "confirmed",
      modelExecution: "not_evidenced",
    },
  };
}

export function assignmentOf(task: TaskView): TaskEvent {
  return task.events.find((event) => event.type === "task.created" || event.type === "task.reassigned")!;
}

export const PENDING_DELIVERY: TerminalDelivery = {
  state: "pending",
  intentId: "intent-1",
  intentType: "task.completed",
  envelopeId: "envelope-1",
  origin: ORIGIN,
};
export const ACCEPTED_DELIVERY: TerminalDelivery = { ...PENDING_DELIVERY, state: "accepted" };
export const BLOCKED_DELIVERY: TerminalDelivery = {
  state: "delivery_blocked",
  intentId: "intent-1",
  intentType: "task.completed",
  envelopeId: "envelope-1",
  origin: ORIGIN,
  blockedAt: 5,
  error: { code: "TARGET_NOT_REGISTERED", retryable: false, details: {} },
};

export interface FakeCore {
  readonly core: TaskCore;
  readonly tasks: Map<string, TaskView>;
  /** Event ids whose insertion the store recorded as evidence. */
  readonly inserted: Set<string>;
  /** `getTask` call times (`Date.now()`). */
  readonly reads: number[];
  listeners(): number;
  /** Replaces a task and notifies `onChange` listeners (a store commit). */
  commit(task: TaskView): void;
  /** Makes every read throw (a broken store). */
  breakReads(error?: unknown): void;
}

export function fakeCore(initial: readonly TaskView[] = []): FakeCore {
  const tasks = new Map(initial.map((task) => [task.taskId, task]));
  const inserted = new Set<string>();
  const reads: number[] = [];
  const listeners = new Set<() => void>();
  let broken: unknown;
  const check = () => {
    if (broken !== undefined) throw broken;
  };
  const unexpected = (name: string) => () => {
    throw new Error(`fake core: ${name} is not implemented`);
  };
  const core = {
    findTask(taskId: string) {
      check();
      return tasks.get(taskId);
    },
    getTask(taskId: string) {
      check();
      reads.push(Date.now());
      const task = tasks.get(taskId);
      if (task === undefined) throw new TaskError("UNKNOWN_TASK", { details: { taskId } });
      return task;
    },
    listTasks() {
      check();
      return [...tasks.values()];
    },
    onChange(listener: () => void) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    insertionRecorded(eventId: string) {
      check();
      return inserted.has(eventId);
    },
    activeTaskIds() {
      check();
      return [...tasks.values()].filter((task) => task.status === "active").map((task) => task.taskId);
    },
    hasActiveTasks() {
      check();
      return [...tasks.values()].some((task) => task.status === "active");
    },
    endpoint: () => WORKER,
    createTask: unexpected("createTask"),
    message: unexpected("message"),
    done: unexpected("done"),
    cancel: unexpected("cancel"),
    acknowledge: unexpected("acknowledge"),
  } as unknown as TaskCore;
  return {
    core,
    tasks,
    inserted,
    reads,
    listeners: () => listeners.size,
    commit(task) {
      tasks.set(task.taskId, task);
      for (const listener of [...listeners]) listener();
    },
    breakReads(error = new Error("store exploded")) {
      broken = error;
    },
  };
}

export function presentationItem(
  task: TaskView,
  event: TaskEvent = assignmentOf(task),
  overrides: Partial<PresentationItem> = {},
): PresentationItem {
  return {
    kind: "relay",
    order: 1,
    taskId: task.taskId,
    eventId: event.eventId,
    event,
    role: task.role,
    visible: true,
    task,
    envelopeId: `envelope-${event.eventId}`,
    ...overrides,
  };
}

/**
 * What the `agent_task_*` tools get from a lifetime, over one core: `run` runs an operation on it
 * (through `wrap`, e.g. to settle it in virtual time), no background refresh, no peer names.
 */
export function toolDepsOn(
  core: TaskCore,
  options: { readonly info?: SessionInfo; readonly wrap?: <T>(operation: Promise<T>) => Promise<T> } = {},
): ToolDeps {
  const wrap = options.wrap ?? (<T>(operation: Promise<T>) => operation);
  return {
    run: (operation) => wrap(operation(core)),
    current: () => core,
    ready: async () => undefined,
    info: () => options.info,
    requestRefresh: () => undefined,
    rememberPeer: () => undefined,
    spentOn: () => undefined,
    wakeModel: () => undefined,
  };
}

/** Every `agent_task_*` tool over one core (see `toolDepsOn`), by name. */
export function toolsOn(core: TaskCore, options: Parameters<typeof toolDepsOn>[1] = {}): Record<string, TaskToolDefinition> {
  return Object.fromEntries(createTaskTools(toolDepsOn(core, options)).map((tool) => [tool.name, tool]));
}

/** A Pi context as the lifecycle reads it: idle, nothing pending, an empty branch; each footer text goes to `statuses`. */
export function idleContextView(cwd: string, statuses: (string | undefined)[]): PiContextView {
  return {
    cwd,
    isIdle: () => true,
    hasPendingMessages: () => false,
    branch: () => [],
    setStatus: (_key, text) => statuses.push(text),
    notify: () => undefined,
    abort: () => undefined,
  };
}

/** A pass report with these failures and nothing else of note. */
export function passReport(failures: readonly [FailureKind, TaskError][] = []): PassReport {
  return {
    intake: { fetched: 0, redriven: 0, timedOut: 0, drained: true },
    presented: 0,
    shipped: 0,
    acknowledged: 0,
    retried: 0,
    counts: { scopedSends: 0, oldWorkSends: 0, ackAttempts: 0 },
    failures: new Map(failures),
    truncated: false,
  };
}
