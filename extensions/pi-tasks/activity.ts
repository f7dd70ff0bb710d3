/**
 * What this Pi's model is doing, for the origins of the tasks it works on (src/core/activity.ts):
 * the tracker follows Pi's events (a run starts, a tool starts and ends, a message ends with its
 * usage, a turn ends, the agent settles), and the reporter sends the origin of every active task
 * this session works on a snapshot — when the state changed (at most once per
 * `minActivityReportIntervalMs`) and at least every `heartbeatIntervalMs` (the heartbeat that lets
 * the origin tell a crashed worker within seconds). A report that cannot be sent is dropped: the
 * next one carries the newer state. Timers are unref'd; `stop()` clears them.
 */
import type { ActivityReport } from "../../src/core/activity.ts";
import type { TaskCore, TaskView } from "../../src/core/task-core.ts";
import {
  minActivityReportIntervalMs,
  heartbeatIntervalMs,
  maxActivitySummaryChars,
  maxActivityToolChars,
  maxUnreportedTextChars,
  stuckAfterMs,
} from "../../src/protocol/limits.ts";
import type { ActivityState, ActivityUsage } from "../../src/protocol/schemas.ts";

export interface ActivityTracker {
  runStarted(): void;
  toolStarted(toolName: string, args: unknown): void;
  toolEnded(): void;
  /** A message ended: an assistant message adds its usage and becomes the last thing the model said. */
  messageEnded(message: unknown): void;
  turnEnded(): void;
  /** The agent settled: idle, or waiting (for an answer or a sub-task). */
  settled(waiting: boolean): void;
  /**
   * The report as of `now` (running with nothing new for `stuckAfterMs` reads `stuck`); for
   * `taskId`, its usage counts only from when the task's assignment entered the session (a task on
   * an interactive Pi is not charged what the person's own turns used before it).
   */
  snapshot(now: number, taskId?: string): ActivityReport;
  /** Forgets where the tasks not in `active` started (they ended). */
  keepOnly(active: readonly string[]): void;
  /** The model's last words (bounded), for a task it ended without reporting. */
  lastText(): string;
  /** Counts changes, so the reporter can tell whether something is new. */
  version(): number;
}

/** A tool call in a few words: the command of `bash`, the path of a file tool, else its first text argument. */
export function summarizeCall(args: unknown): string | undefined {
  if (typeof args !== "object" || args === null) return undefined;
  const record = args as Record<string, unknown>;
  const preferred = [record.command, record.path, record.file_path, record.pattern, record.url];
  const text = preferred.find((value) => typeof value === "string") ?? Object.values(record).find((value) => typeof value === "string");
  if (typeof text !== "string") return undefined;
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length <= maxActivitySummaryChars ? flat : `${flat.slice(0, maxActivitySummaryChars - 1)}…`;
}

function assistantText(message: Record<string, unknown>): string {
  const content = message.content;
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((part): part is { type: "text"; text: string } => typeof part === "object" && part !== null && part.type === "text")
    .map((part) => part.text)
    .join("\n");
}

export function createActivityTracker(now: () => number): ActivityTracker {
  let state: ActivityState = "idle";
  let since = now();
  let lastEventAt = since;
  let tool: string | undefined;
  let summary: string | undefined;
  let turns = 0;
  let tokens = 0;
  let cost: number | undefined;
  let last = "";
  let changes = 0;
  /** Usage when each task's assignment entered the session: its own usage is counted from there. */
  const startedAt = new Map<string, { turns: number; tokens: number; cost: number }>();
  const enter = (next: ActivityState, nextTool?: string, nextSummary?: string) => {
    if (next !== state || nextTool !== tool || nextSummary !== summary) since = now();
    state = next;
    tool = nextTool;
    summary = nextSummary;
    lastEventAt = now();
    changes += 1;
  };
  return {
    runStarted: () => enter("running"),
    toolStarted: (toolName, args) => enter("running", toolName.slice(0, maxActivityToolChars), summarizeCall(args)),
    toolEnded: () => enter("running"),
    messageEnded(message) {
      if (typeof message !== "object" || message === null) return;
      const taskId = (message as { role?: unknown; details?: { taskId?: unknown } }).details?.taskId;
      if ((message as { role?: unknown }).role === "custom" && typeof taskId === "string" && !startedAt.has(taskId))
        startedAt.set(taskId, { turns, tokens, cost: cost ?? 0 });
      if ((message as { role?: unknown }).role !== "assistant") return;
      const usage = (message as { usage?: { totalTokens?: unknown; cost?: { total?: unknown } } }).usage;
      if (typeof usage?.totalTokens === "number") tokens += Math.max(0, Math.round(usage.totalTokens));
      if (typeof usage?.cost?.total === "number" && usage.cost.total > 0) cost = (cost ?? 0) + usage.cost.total;
      const text = assistantText(message as Record<string, unknown>).trim();
      if (text !== "") last = text.slice(-maxUnreportedTextChars);
      lastEventAt = now();
      changes += 1;
    },
    turnEnded() {
      turns += 1;
      lastEventAt = now();
      changes += 1;
    },
    settled: (waiting) => enter(waiting ? "waiting" : "idle"),
    snapshot(at, taskId) {
      const stuck = state === "running" && at - lastEventAt >= stuckAfterMs;
      const from = taskId === undefined ? undefined : startedAt.get(taskId);
      const spent = cost === undefined ? undefined : cost - (from?.cost ?? 0);
      return {
        state: stuck ? "stuck" : state,
        ...(tool === undefined ? {} : { tool }),
        ...(summary === undefined ? {} : { summary }),
        since: stuck ? lastEventAt + stuckAfterMs : since,
        usage: {
          turns: turns - (from?.turns ?? 0),
          tokens: tokens - (from?.tokens ?? 0),
          ...(spent === undefined ? {} : { cost: Math.round(spent * 1e6) / 1e6 }),
        },
      };
    },
    keepOnly(active) {
      for (const taskId of startedAt.keys()) if (!active.includes(taskId)) startedAt.delete(taskId);
    },
    lastText: () => last,
    version: () => changes,
  };
}

export interface ActivityReporterDeps {
  readonly tracker: ActivityTracker;
  /** The current core, if any (a stale or stopped Pi run gives none). */
  readonly core: () => TaskCore | undefined;
  readonly now: () => number;
}

export interface ActivityReporter {
  /** Something changed: report soon (coalesced with other changes). */
  changed(): void;
  start(): void;
  stop(): void;
}

/**
 * The chain's usage below `taskId`: this worker's own plus, for every sub-task this session delegated
 * from it, what that sub-task's worker last reported (its own chain when it has one). Undefined when
 * no sub-task has reported.
 */
export function chainUsage(tasks: readonly TaskView[], taskId: string, own: ActivityUsage): ActivityUsage["chain"] {
  const below = tasks
    .filter((task) => task.role === "origin" && task.lineage?.parentTaskId === taskId && task.activity !== undefined)
    .map((task) => task.activity!.usage.chain ?? { ...task.activity!.usage, workers: 1 });
  if (below.length === 0) return undefined;
  const cost = [own, ...below].some((usage) => usage.cost !== undefined)
    ? Math.round([own, ...below].reduce((sum, usage) => sum + (usage.cost ?? 0), 0) * 1e6) / 1e6
    : undefined;
  return {
    turns: below.reduce((sum, usage) => sum + usage.turns, own.turns),
    tokens: below.reduce((sum, usage) => sum + usage.tokens, own.tokens),
    ...(cost === undefined ? {} : { cost }),
    workers: below.reduce((sum, usage) => sum + usage.workers, 1),
  };
}

/** Tasks this session works on (the worker side) that are still active. */
function workingOn(core: TaskCore): string[] {
  return core.activeTaskIds().filter((taskId) => core.findTask(taskId)?.role === "worker");
}

export function createActivityReporter(deps: ActivityReporterDeps): ActivityReporter {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let lastSentAt = Number.NEGATIVE_INFINITY;
  let stopped = true;
  // A change not yet in a sent snapshot: the next report is due a short interval after the last.
  let dirty = false;

  const report = async () => {
    const core = deps.core();
    if (core === undefined) return;
    const taskIds = workingOn(core);
    if (taskIds.length === 0) return;
    lastSentAt = deps.now();
    dirty = false;
    deps.tracker.keepOnly(taskIds);
    const tasks = core.listTasks();
    const reportOf = (taskId: string): ActivityReport => {
      const snapshot = deps.tracker.snapshot(lastSentAt, taskId);
      const chain = chainUsage(tasks, taskId, snapshot.usage);
      return chain === undefined ? snapshot : { ...snapshot, usage: { ...snapshot.usage, chain } };
    };
    // Best effort: a report that cannot be sent now is superseded by the next.
    await Promise.allSettled(taskIds.map((taskId) => core.reportActivity(taskId, reportOf(taskId))));
  };

  const changeDelay = () => Math.max(0, lastSentAt + minActivityReportIntervalMs - deps.now());

  const arm = (delayMs: number) => {
    if (stopped) return;
    if (timer !== undefined) clearTimeout(timer);
    timer = setTimeout(() => {
      timer = undefined;
      void report().finally(() => arm(dirty ? changeDelay() : heartbeatIntervalMs));
    }, delayMs);
    timer.unref?.();
  };

  return {
    changed() {
      if (stopped) return;
      dirty = true;
      arm(changeDelay());
    },
    start() {
      stopped = false;
      arm(heartbeatIntervalMs);
    },
    stop() {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
    },
  };
}
