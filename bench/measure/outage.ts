/**
 * Requests per offered send during a 15 s relay outage. One origin and three workers run the real
 * extension stack (`bench/lib/fake-pi.ts`) with their background passes and watches at their real
 * cadence, all through the fault proxy. Each worker holds one active task (so every party is on
 * the 1 s active cadence). The outage is the proxy answering every request 503 without a relay
 * body (a gateway failure: `RELAY_UNAVAILABLE`, transient) for 15 s; the relay keeps its state.
 *
 * During the outage the origin offers 300 sends, evenly spaced: half are new tasks (`createTask`:
 * its one send fails uncertain — a gateway 503 may have reached the relay — so the task is kept
 * with its assignment pending), half are messages on the active tasks (`message`: written to the
 * outbox). The passes retry both after the outage.
 * Every request any party makes in the window is counted (client-side log; the proxy's count is
 * reported beside it). After the outage the passes drain the queued messages; the drain time and
 * the presentation at the workers (each message exactly once) are checked.
 *
 * Task content goes only to an endpoint that proved which key holds it (src/core/proofs.ts): each
 * worker proves itself to the origin before the setup (untimed, before the outage), so the new
 * tasks offered during the outage go to known workers and try their send at once, as before; no
 * hello is asked in the window.
 */
import { coreInternals } from "../../src/core/task-core.ts";
import { KiB } from "../../src/protocol/limits.ts";
import { eventually } from "../../testkit/async.ts";
import { startRelayProcess } from "../../src/demo/relay-process.ts";
import { createFaultProxy } from "../../testkit/fault-proxy.ts";
import { boundEndpoint, type FakePi, startFakePi } from "../lib/fake-pi.ts";
import { now, sleepUntil } from "../lib/stats.ts";
import { introduceFakePis } from "../lib/proofs.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import { filler } from "../lib/wire.ts";

const OUTAGE_MS = 15_000;
const QUICK_OUTAGE_MS = 1_500;
const OFFERED_SENDS = 300;
const QUICK_OFFERED_SENDS = 20;
const WORKERS = 3;
const TASK_TEXT_CHARS = KiB;
/** After the outage: how long the queued messages may take to drain. */
const DRAIN_TIMEOUT_MS = 60_000;
const SETUP_TIMEOUT_MS = 15_000;
/** How often a wait re-checks its condition. */
const POLL_MS = 10;

export interface OutageResult {
  readonly outageMs: number;
  readonly offered: { readonly total: number; readonly createTask: number; readonly message: number };
  readonly duringOutage: {
    readonly requests: number;
    readonly requestsAtProxy: number;
    readonly requestsPerOfferedSend: number;
    readonly byOperation: Record<string, number>;
    readonly byParty: Record<string, number>;
    readonly accepted: number;
    /** New tasks whose createTask failed uncertain (kept, their assignment pending). */
    readonly pendingNewTasks: number;
    /** Envelopes waiting in the origin's outbox when the outage ends (assignments and messages). */
    readonly queued: number;
  };
  readonly afterOutage: {
    readonly drainMs: number;
    readonly drained: boolean;
    readonly requests: number;
    readonly messagesPresented: number;
    readonly duplicatePresentations: number;
    readonly lost: number;
  };
}

/** The parties of the measurement: an origin and workers, each worker proven and holding one active task. */
interface OutageSetup {
  readonly origin: FakePi;
  readonly workers: readonly FakePi[];
  readonly targets: readonly TaskEndpoint[];
  /** Each worker's active task, by worker index. */
  readonly tasks: readonly string[];
  /** The task text of every new task. */
  readonly text: string;
}

/** Starts the parties behind the proxy (added to `parties` at once, for the caller to stop) and settles them. */
async function setUp(url: string, parties: FakePi[]): Promise<OutageSetup> {
  const origin = startFakePi({ url });
  const workers = Array.from({ length: WORKERS }, () => startFakePi({ url, worker: true }));
  parties.push(origin, ...workers);
  const targets = await Promise.all(workers.map((worker) => boundEndpoint(worker)));
  await boundEndpoint(origin);
  for (const [index, worker] of workers.entries()) await introduceFakePis(origin, worker, targets[index]!);
  const text = filler(TASK_TEXT_CHARS);
  const tasks: string[] = [];
  for (const to of targets) tasks.push((await origin.lifecycle.run((core) => core.createTask({ to, task: text }))).taskId);
  const settled = await eventually(
    () => workers.every((worker, index) => worker.insertions.some((item) => item.taskId === tasks[index])),
    SETUP_TIMEOUT_MS,
    POLL_MS,
  );
  if (!settled) throw new Error("outage: the workers never received their tasks");
  await Bun.sleep(200);
  return { origin, workers, targets, tasks, text };
}

interface Offers {
  accepted: number;
  pendingNewTasks: number;
  /** The messages offered, with the worker each went to. */
  readonly messageTexts: { text: string; worker: number }[];
}

/** The origin's offers from `from` on, evenly spaced over the outage: new tasks and messages on the active tasks, alternating. */
async function offerDuringOutage(setup: OutageSetup, from: number, outageMs: number, offered: number): Promise<Offers> {
  const { origin, targets, tasks, text } = setup;
  const offers: Offers = { accepted: 0, pendingNewTasks: 0, messageTexts: [] };
  const spacing = outageMs / offered;
  const pending: Promise<unknown>[] = [];
  for (let index = 0; index < offered; index += 1) {
    await sleepUntil(from + index * spacing);
    const slot = index % WORKERS;
    if (index % 2 === 0) {
      pending.push(
        origin.lifecycle
          .run((core) => core.createTask({ to: targets[slot]!, task: text }))
          .then(
            () => (offers.accepted += 1),
            () => (offers.pendingNewTasks += 1),
          ),
      );
    } else {
      const message = `outage message ${index}`;
      offers.messageTexts.push({ text: message, worker: slot });
      pending.push(
        origin.lifecycle
          .run((core) => core.message({ taskId: tasks[slot]!, type: "information", message }))
          .then(
            () => (offers.accepted += 1),
            () => undefined,
          ),
      );
    }
  }
  await Promise.all(pending);
  return offers;
}

/** Every request every party made between `from` and `to` (client-side logs), in all, by party and by operation. */
function requestsBetween(parties: readonly FakePi[], from: number, to: number) {
  const byParty: Record<string, number> = {};
  const byOperation: Record<string, number> = {};
  let requests = 0;
  parties.forEach((party, index) => {
    const count = party.log.countBetween(from, to);
    byParty[index === 0 ? "origin" : `worker${index}`] = count;
    requests += count;
    for (const [operation, value] of Object.entries(party.log.byOperation(from, to)))
      byOperation[operation] = (byOperation[operation] ?? 0) + value;
  });
  return { requests, byParty, byOperation };
}

/** After the outage: the passes drain the queue at their real cadence; each message must reach its worker once. */
async function drainAfterOutage(
  setup: OutageSetup,
  parties: readonly FakePi[],
  messageTexts: Offers["messageTexts"],
): Promise<OutageResult["afterOutage"]> {
  const { origin, workers } = setup;
  const presentedMessages = () =>
    workers.reduce((sum, worker) => sum + worker.insertions.filter((item) => item.type === "task.information").length, 0);
  const wanted = messageTexts.length;
  const drainFrom = now();
  const drained =
    (await eventually(
      () => coreInternals(origin.core()).store.pendingOutboxCount() === 0 && presentedMessages() >= wanted,
      DRAIN_TIMEOUT_MS,
      POLL_MS,
    )) === true;
  const drainMs = now() - drainFrom;
  const drainRequests = parties.reduce((sum, party) => sum + party.log.countBetween(drainFrom, now()), 0);
  const presentedIds = workers.flatMap((worker) =>
    worker.insertions.filter((item) => item.type === "task.information").map((item) => item.eventId),
  );
  const messagesByWorker = workers.map((worker) =>
    worker
      .core()
      .listTasks()
      .flatMap((task) =>
        task.events
          .filter((event) => event.type === "task.information")
          .map((event) => String((event.payload as { message?: unknown }).message)),
      ),
  );
  const lost = messageTexts.filter((item) => !messagesByWorker[item.worker]!.includes(item.text)).length;
  return {
    drainMs: Math.round(drainMs),
    drained,
    requests: drainRequests,
    messagesPresented: new Set(presentedIds).size,
    duplicatePresentations: presentedIds.length - new Set(presentedIds).size,
    lost,
  };
}

export async function measureOutage(options: { quick?: boolean } = {}): Promise<OutageResult> {
  const quick = options.quick === true;
  const outageMs = quick ? QUICK_OUTAGE_MS : OUTAGE_MS;
  const offered = quick ? QUICK_OFFERED_SENDS : OFFERED_SENDS;
  const relay = await startRelayProcess();
  const proxy = createFaultProxy({ target: relay.url });
  const parties: FakePi[] = [];
  try {
    const setup = await setUp(proxy.url, parties);
    // The outage.
    const outage = proxy.push({
      operation: "*",
      kind: "reply",
      status: 503,
      body: { error: "relay outage" },
      times: Number.POSITIVE_INFINITY,
    });
    const proxyBefore = proxy.stats().total.seen;
    const from = now();
    const offers = await offerDuringOutage(setup, from, outageMs, offered);
    await sleepUntil(from + outageMs);
    const to = now();
    outage.cancel();
    const requestsAtProxy = proxy.stats().total.seen - proxyBefore;
    const { requests, byParty, byOperation } = requestsBetween(parties, from, to);
    const queued = coreInternals(setup.origin.core()).store.pendingOutboxCount();
    const afterOutage = await drainAfterOutage(setup, parties, offers.messageTexts);
    return {
      outageMs,
      offered: { total: offered, createTask: Math.ceil(offered / 2), message: Math.floor(offered / 2) },
      duringOutage: {
        requests,
        requestsAtProxy,
        requestsPerOfferedSend: Math.round((requests / offered) * 1000) / 1000,
        byOperation,
        byParty,
        accepted: offers.accepted,
        pendingNewTasks: offers.pendingNewTasks,
        queued,
      },
      afterOutage,
    };
  } finally {
    for (const party of parties) await party.stop().catch(() => undefined);
    await proxy.stop().catch(() => undefined);
    await relay.stop().catch(() => undefined);
  }
}
