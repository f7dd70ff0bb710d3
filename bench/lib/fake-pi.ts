/**
 * The real extension stack without the Pi binary: `createLifecycle` (configured core, Pi
 * presenter, background scheduler at its real 1 s / 5 s cadence and the `watch-v1` doorbell) on
 * an in-memory Pi session. `sendMessage` appends to the branch at once (as Pi does when idle), a
 * wake is observed with its `message_end` on the next tick, and the turn it starts ends with
 * `agent_end` (a refresh request), as in Pi. Every relay request goes through a request log.
 *
 * The fake Pis of a bench process, and of the processes it starts (they inherit its environment),
 * share one pi-tasks home — one identity, trusted by itself — in a Pi agent directory of the bench's
 * own (`PI_CODING_AGENT_DIR`, made at load unless the environment names one): never the person's
 * `~/.pi/agent`.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually } from "../../testkit/async.ts";
import { createTasksRuntime, type Lifecycle, type PiContextView } from "../../extensions/pi-tasks/lifecycle.ts";
import { EVENT_MESSAGE, WAKE_MESSAGE } from "../../extensions/pi-tasks/presenter.ts";
import { type ConfiguredTaskCoreOptions, createConfiguredTaskCore } from "../../src/core/configured.ts";
import { piTasksHome } from "../../src/relay-client/config.ts";
import type { TaskCore } from "../../src/core/task-core.ts";
import type { TaskTimers } from "../../src/core/timers.ts";
import { createRequestLog, type RequestLog } from "./request-log.ts";
import { now } from "./stats.ts";

export interface Insertion {
  readonly eventId: string;
  readonly taskId: string;
  readonly type: string;
  /** Monotonic time of the insertion. */
  readonly at: number;
}

export interface FakePi {
  readonly name: string;
  /** The pi-tasks home its trust reads (its identity): a TaskCore given `homeTrust(home)` is the same identity. */
  readonly home: string;
  readonly lifecycle: Lifecycle;
  readonly log: RequestLog;
  /** `pi-tasks-event` messages inserted, in order. */
  readonly insertions: Insertion[];
  /** Relay-loss messages written (one per task). */
  readonly losses: string[];
  /** While true, Pi is not idle (the presenter holds visible events). */
  busy: boolean;
  core(): TaskCore;
  stop(): Promise<void>;
}

export interface FakePiOptions {
  readonly url: string;
  readonly name?: string;
  readonly worker?: boolean;
  readonly requestTimeoutMs?: number;
  readonly timers?: TaskTimers;
  readonly clock?: () => number;
  readonly onInsert?: (insertion: Insertion) => void;
  /** Route requests through the request log (default true; off where its cost would be measured). */
  readonly logRequests?: boolean;
}

interface BranchEntry {
  readonly type: string;
  readonly customType: string;
  readonly details?: unknown;
  readonly data?: unknown;
}

let serial = 0;

function withoutFanOutCap(given: ConfiguredTaskCoreOptions | undefined): ConfiguredTaskCoreOptions {
  const { maxActiveTasks: _cap, ...rest } = given ?? {};
  return rest;
}

type RuntimeDeps = Parameters<typeof createTasksRuntime>[0];

/** What the in-memory Pi session tells the lifecycle, once it exists and while it runs. */
interface SessionHooks {
  readonly onInsert: ((insertion: Insertion) => void) | undefined;
  /** Pi's `message_end` record of a message. */
  messageEnd(message: Record<string, unknown>): void;
  /** The end of the (instant) model turn a wake started: `agent_end`, a refresh request. */
  turnEnded(): void;
}

/** The in-memory Pi session: its branch, what was inserted and written, and Pi's `sendMessage` / `appendEntry`. */
interface PiSession {
  readonly branch: BranchEntry[];
  readonly insertions: Insertion[];
  readonly losses: string[];
  readonly sendMessage: RuntimeDeps["sendMessage"];
  readonly appendEntry: RuntimeDeps["appendEntry"];
}

function createPiSession(hooks: SessionHooks): PiSession {
  const branch: BranchEntry[] = [];
  const insertions: Insertion[] = [];
  const losses: string[] = [];
  return {
    branch,
    insertions,
    losses,
    sendMessage(message, sendOptions) {
      const entry = { type: "custom_message", customType: message.customType, details: message.details };
      branch.push(entry);
      const details = (message.details ?? {}) as { eventId?: string; taskId?: string; event?: { type?: string } };
      if (message.customType === EVENT_MESSAGE && typeof details.eventId === "string") {
        const insertion = { eventId: details.eventId, taskId: String(details.taskId), type: String(details.event?.type), at: now() };
        insertions.push(insertion);
        hooks.onInsert?.(insertion);
        // Pi ends the inserted message as its own record.
        queueMicrotask(() => hooks.messageEnd({ role: "custom", customType: EVENT_MESSAGE, details: message.details }));
      }
      if (message.customType === "pi-tasks-relay-loss") losses.push(String(details.taskId));
      if (message.customType === WAKE_MESSAGE && sendOptions.triggerTurn === true) {
        // The wake starts a turn: Pi ends the wake message, the (instant) model turn ends, agent_end.
        setTimeout(() => {
          hooks.messageEnd({ role: "custom", customType: WAKE_MESSAGE, details: message.details });
          hooks.turnEnded();
        }, 0);
      }
    },
    appendEntry(customType, data) {
      branch.push({ type: "custom", customType, data });
    },
  };
}

/**
 * The benches hold far more active tasks than a Pi session's fan-out cap allows: they measure the
 * core under load, not a model's delegation (the cap is tested in tests/extension/fanout.test.ts).
 */
function createCoreFor(options: FakePiOptions, log: RequestLog): typeof createConfiguredTaskCore {
  return (given) =>
    createConfiguredTaskCore({
      ...withoutFanOutCap(given),
      ...(options.logRequests === false ? {} : { fetch: log.fetch }),
      ...(options.requestTimeoutMs === undefined ? {} : { requestTimeoutMs: options.requestTimeoutMs }),
      ...(options.timers === undefined ? {} : { timers: options.timers }),
      ...(options.clock === undefined ? {} : { clock: options.clock }),
    });
}

/** The bench's Pi agent directory (see the header); children inherit it. */
const AGENT_DIR = process.env.PI_CODING_AGENT_DIR ?? mkdtempSync(join(tmpdir(), "pi-tasks-bench-agent-"));
process.env.PI_CODING_AGENT_DIR = AGENT_DIR;

export function startFakePi(options: FakePiOptions): FakePi {
  serial += 1;
  const name = options.name ?? `bench-${options.worker ? "worker" : "origin"}-${process.pid}-${serial}-${crypto.randomUUID().slice(0, 8)}`;
  const env: Record<string, string | undefined> = {
    PI_CODING_AGENT_DIR: AGENT_DIR,
    WOLFPACK_SESSION_NAME: name,
    PI_TASKS_RELAY_URL: options.url,
    PI_TASK_WORKER: options.worker ? "1" : undefined,
    WOLFPACK_JWT_SECRET: "",
  };
  const log = createRequestLog();
  let stopped = false;
  // Pi's `message_end` reaches the lifecycle only once it exists and while it runs.
  let lifecycle: Lifecycle | undefined;
  const session = createPiSession({
    onInsert: options.onInsert,
    messageEnd: (message) => {
      if (!stopped) lifecycle?.onMessageEnd(message);
    },
    turnEnded: () => {
      if (!stopped) lifecycle?.requestRefresh();
    },
  });
  const pi = {
    name,
    home: piTasksHome(env),
    log,
    insertions: session.insertions,
    losses: session.losses,
    busy: false,
  } as FakePi & { lifecycle: Lifecycle };
  ({ lifecycle } = createTasksRuntime({
    env,
    createCore: createCoreFor(options, log),
    sendMessage: session.sendMessage,
    appendEntry: session.appendEntry,
  }));
  const context: PiContextView = {
    cwd: process.cwd(),
    isIdle: () => !pi.busy,
    hasPendingMessages: () => false,
    branch: () => session.branch,
    setStatus: () => undefined,
    notify: () => undefined,
    abort: () => undefined,
  };
  lifecycle!.start(context);
  Object.assign(pi, {
    lifecycle,
    core: () => lifecycle!.current(),
    async stop() {
      if (stopped) return;
      stopped = true;
      await lifecycle!.stop();
    },
  });
  return pi;
}

/** Waits until the fake Pi's endpoint is bound (its first pass connected). */
export async function boundEndpoint(pi: FakePi, timeoutMs = 10_000): Promise<NonNullable<ReturnType<TaskCore["endpoint"]>>> {
  const deadline = Date.now() + timeoutMs;
  await pi.lifecycle.ready();
  const endpoint = await eventually(() => pi.core().endpoint(), deadline - Date.now(), 5);
  if (endpoint === undefined) throw new Error(`${pi.name} did not bind within ${timeoutMs} ms`);
  return endpoint;
}
