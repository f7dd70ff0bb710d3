/**
 * Refresh pass cost with a large archive: a TaskCore whose store holds 16,000 archived events
 * (100 terminal tasks × 160 events: created, 158 messages, completed — all settled, nothing
 * pending, no deliveries, no outbox), timing `refresh()` against the real relay (child process).
 * The archive is written through the store API (the shape a long-lived origin ends up with);
 * building it over the wire would take 16,000 envelopes and minutes, and the pass does not care
 * how it got there. Beside it: the same pass on an empty store, and one bare `receive` through
 * the client (a pass makes exactly one relay request when nothing is pending: the receive).
 */
import { coreInternals } from "../../src/core/task-core.ts";
import { makeEvent } from "../../src/core/envelopes.ts";
import type { TaskCore } from "../../src/core/task-core.ts";
import { maxStoreRecords, defaultTaskTimeoutMs } from "../../src/protocol/limits.ts";
import { TASK_PROTOCOL_VERSION } from "../../src/protocol/names.ts";
import type { TaskEndpoint, TaskRecord } from "../../src/protocol/schemas.ts";
import { startRelayProcess } from "../../src/demo/relay-process.ts";
import { closeParties, createParty } from "../../testkit/party.ts";
import { now, roundSummary, type Summary, summarize } from "../lib/stats.ts";
import { benchName, boundSession } from "../lib/wire.ts";

const TASKS = 100;
const EVENTS_PER_TASK = 160;
const QUICK_TASKS = 10;
const QUICK_EVENTS_PER_TASK = 20;
const PASSES = 200;
const QUICK_PASSES = 10;
const WARMUP_PASSES = 50;
const QUICK_WARMUP_PASSES = 3;
/** Characters of each archived message. */
/** Characters of each archived message. */
export const ARCHIVED_MESSAGE_CHARS = 200;

export interface RefreshResult {
  readonly archivedEvents: number;
  readonly tasks: number;
  readonly storeRecords: number;
  readonly storeEncodedBytes: number;
  readonly passes: number;
  readonly archivedPassMs: Summary;
  readonly emptyPassMs: Summary;
  readonly receiveMs: Summary;
  /** Relay requests per pass (must be 1: the receive). */
  readonly requestsPerPass: number;
  readonly pendingAfter: number;
}

/** Writes `tasks` terminal tasks of `eventsPerTask` events each (created, messages, completed) through the store API. */
export function archive(core: TaskCore, target: TaskEndpoint, tasks: number, eventsPerTask: number): void {
  const origin = core.endpoint()!;
  const store = coreInternals(core).store;
  const at = Date.now();
  for (let t = 0; t < tasks; t += 1) {
    const record: TaskRecord = {
      taskId: crypto.randomUUID(),
      protocolVersion: TASK_PROTOCOL_VERSION,
      origin,
      target,
      task: `archived task ${t}`,
      createdAt: at,
      expiresAt: at + defaultTaskTimeoutMs,
      status: "active",
    };
    store.transaction(() => {
      store.putTask(record, "origin");
      store.appendEvent(makeEvent(record, "task.created", "1", at, { task: record.task }));
      for (let sequence = 2; sequence < eventsPerTask; sequence += 1) {
        store.appendEvent(
          makeEvent(record, "task.information", String(sequence), at, {
            message: `message ${sequence} `.padEnd(ARCHIVED_MESSAGE_CHARS, "m"),
          }),
        );
      }
      store.appendEvent(makeEvent(record, "task.completed", String(eventsPerTask), at, { summary: "done" }));
      store.setStatus(record.taskId, "completed");
    });
  }
}

async function timePasses(core: TaskCore, passes: number, warmup: number): Promise<number[]> {
  for (let index = 0; index < warmup; index += 1) await core.refresh();
  const samples: number[] = [];
  for (let index = 0; index < passes; index += 1) {
    const at = now();
    const report = await core.refresh();
    samples.push(now() - at);
    if (report.failures.size > 0)
      throw new Error(`refresh: pass failed: ${[...report.failures.values()].map((error) => error.code).join(", ")}`);
  }
  return samples;
}

export async function measureRefresh(options: { quick?: boolean } = {}): Promise<RefreshResult> {
  const quick = options.quick === true;
  const tasks = quick ? QUICK_TASKS : TASKS;
  const eventsPerTask = quick ? QUICK_EVENTS_PER_TASK : EVENTS_PER_TASK;
  const passes = quick ? QUICK_PASSES : PASSES;
  const warmup = quick ? QUICK_WARMUP_PASSES : WARMUP_PASSES;
  if (tasks * (eventsPerTask + 1) > maxStoreRecords) throw new Error("refresh: archive exceeds the store's record bound");
  const relay = await startRelayProcess();
  let requests = 0;
  const counting: typeof fetch = ((input: string | URL | Request, init?: RequestInit) => {
    requests += 1;
    return fetch(input, init);
  }) as typeof fetch;
  const parties = [
    await createParty({ url: relay.url, name: benchName("refresh"), fetch: counting, connect: false }),
    await createParty({ url: relay.url, name: benchName("refresh"), connect: false }),
  ];
  const [full, empty] = parties.map((party) => party.core) as [TaskCore, TaskCore];
  const worker = await boundSession(relay.url, "refresh-target");
  try {
    await full.connect();
    await empty.connect();
    archive(full, worker.endpoint, tasks, eventsPerTask);
    const stats = coreInternals(full).store.stats();
    const archivedEvents = full.listTasks().reduce((sum, task) => sum + task.events.length, 0);
    // Interleaved (a full pass, a bare receive, an empty pass, in turn), so the machine's drift
    // weighs on all three alike and their ratios hold within the run.
    await timePasses(empty, 0, warmup);
    const before = requests;
    await timePasses(full, 0, warmup);
    const fullSamples: number[] = [];
    const emptySamples: number[] = [];
    const receives: number[] = [];
    for (let index = 0; index < passes; index += 1) {
      fullSamples.push(...(await timePasses(full, 1, 0)));
      const at = now();
      await coreInternals(empty).session.receive("0");
      receives.push(now() - at);
      emptySamples.push(...(await timePasses(empty, 1, 0)));
    }
    const requestsPerPass = (requests - before) / (passes + warmup);
    return {
      archivedEvents,
      tasks,
      storeRecords: stats.records,
      storeEncodedBytes: stats.encodedBytes,
      passes,
      archivedPassMs: roundSummary(summarize(fullSamples)),
      emptyPassMs: roundSummary(summarize(emptySamples)),
      receiveMs: roundSummary(summarize(receives)),
      requestsPerPass,
      pendingAfter: full.hasPendingWork() ? 1 : 0,
    };
  } finally {
    await closeParties(parties);
    worker.session.close();
    await relay.stop().catch(() => undefined);
  }
}
