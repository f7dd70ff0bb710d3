/**
 * `npm run faults`: the fault matrix. Each fault runs the same small workload — the origin sends
 * tasks and a message per task, the worker finishes each task — between TaskCores with in-memory
 * Pi hosts, on the real relay (CLI child process) behind the fault proxy, then heals the fault and
 * drains. Per fault it reports what was offered (createTask, message and done calls), accepted by
 * the relay, presented to a model (inserted), presented twice, lost, and the relay requests made.
 *
 * - presented: the worker inserted the task's `task.created` and each message; the origin inserted
 *   the task's terminal event.
 * - reported (two columns): not presented, but the sender's model was told — lost to relay reset
 *   (kept at 0 since both Pis keep their tasks and re-send after a restart; a memory-only
 *   relay), or ended with a lifetime that was shut down (`task.timed_out` at the origin, or the
 *   failed call).
 * - refused: the operation failed definitively and created nothing (the caller was told).
 * - lost = offered − presented − reported − refused. Any loss, or any event inserted twice within
 *   a lifetime, fails the run (exit code 1).
 *
 * Capacity cooldowns and the worker's busy minute run on jump timers (delivery-budget time moves
 * forward between passes without waiting); request deadlines are short so timeouts are quick.
 * `docs/reliability.md` gets the table and how each fault is injected.
 */
import { encodedEnvelope, requestEnvelopes } from "../src/protocol/wire.ts";
import { writeFileSync } from "node:fs";
import { keptSections } from "./lib/doc.ts";
import { join } from "node:path";
import { createConfiguredTaskCore } from "../src/core/configured.ts";
import { type TaskCore, coreInternals, rehomeCore } from "../src/core/task-core.ts";
import { startRelayProcess, type RelayProcess } from "../src/demo/relay-process.ts";
import { toTaskError } from "../src/protocol/errors.ts";
import { eventTypeRow } from "../src/protocol/events.ts";
import {
  activePollIntervalMs,
  capacityCooldownMs,
  maxResponseBodyBytes,
  orphanAfterMs,
  orphanProbeIntervalMs,
  taskTimeoutMinMs,
} from "../src/protocol/limits.ts";
import type { TaskEndpoint } from "../src/protocol/schemas.ts";
import { tryDrain } from "../testkit/drain.ts";
import { introduce } from "../testkit/introduce.ts";
import { clearEnvelope } from "../testkit/sealed.ts";
import { createFaultProxy, type FaultProxy, type FaultRule, type ProxyRequest } from "../testkit/fault-proxy.ts";
import { createJumpClock, createJumpTimers, type JumpClock, type JumpTimers } from "../testkit/jump-timers.ts";
import { createMemoryHost, type MemoryHost } from "../testkit/memory-host.ts";
import { createObservedParty } from "../testkit/observed-party.ts";
import { closeParties } from "../testkit/party.ts";
import { type ObservedReply, observingFetch } from "../testkit/observing-fetch.ts";

/** Tasks per fault (each: a createTask, a message, a done). */
const TASKS = 10;
const QUICK_TASKS = 2;
/** Request deadline of every party (a slow relay is slower than this). */
const REQUEST_TIMEOUT_MS = 400;
/** Passes the drain may use before it gives up. */
const DRAIN_ROUNDS = 40;
/** The busy worker's minute, as passes at the active cadence. */
const BUSY_MS = 60_000;
const QUICK_BUSY_MS = 5_000;

// ---------------------------------------------------------------------------------------------
// Parties
// ---------------------------------------------------------------------------------------------

interface Party {
  readonly label: string;
  readonly host: MemoryHost;
  readonly replies: ObservedReply[];
  core(): TaskCore;
  refresh(): Promise<unknown>;
  close(): Promise<void>;
}

interface Rig {
  readonly proxy: FaultProxy;
  readonly timers: JumpTimers;
  readonly clock: JumpClock;
  readonly origin: Party;
  readonly worker: Party;
}

let serial = 0;
const sessionName = (label: string) => `faults-${label}-${process.pid}-${(serial += 1)}-${crypto.randomUUID().slice(0, 8)}`;

type FetchWrap = (inner: typeof fetch) => typeof fetch;

async function plainParty(label: string, url: string, timers: JumpTimers, clock: JumpClock, wrap?: FetchWrap): Promise<Party> {
  const party = await createObservedParty({
    url,
    name: sessionName(label),
    requestTimeoutMs: REQUEST_TIMEOUT_MS,
    timers,
    clock,
    ...(wrap === undefined ? {} : { wrapFetch: wrap }),
  });
  return {
    label,
    host: party.host,
    replies: party.replies,
    core: () => party.core,
    refresh: () => party.core.refresh(),
    close: () => closeParties([party]),
  };
}

async function configuredParty(label: string, url: string, timers: JumpTimers, clock: JumpClock): Promise<Party> {
  const replies: ObservedReply[] = [];
  const host = createMemoryHost();
  const configured = createConfiguredTaskCore({
    url,
    callerSession: sessionName(label),
    fetch: observingFetch(replies),
    requestTimeoutMs: REQUEST_TIMEOUT_MS,
    host,
    timers,
    clock,
  });
  await configured.run((core) => core.connect());
  return {
    label,
    host,
    replies,
    core: () => configured.current(),
    async refresh() {
      await configured.settled();
      return configured.refresh();
    },
    close: () => configured.close(),
  };
}

/**
 * The worker proves its endpoint to the origin (src/core/proofs.ts: a hello, the worker's pass
 * answering it, the origin's pass taking the proof) before any fault is injected, so that the
 * first assignment leaves with its createTask and the faults hit task mail, as they did before
 * proofs — not the hello round trip a first assignment to an unknown worker now waits for.
 */
async function introduceParties(origin: Party, worker: Party): Promise<void> {
  await introduce(origin.core(), worker.core(), (core) => (core === origin.core() ? origin : worker).refresh());
}

async function makeRig(relay: RelayProcess, configured = false, wrap?: (timers: JumpTimers) => FetchWrap): Promise<Rig> {
  const proxy = createFaultProxy({ target: relay.url });
  const timers = createJumpTimers();
  const clock = createJumpClock();
  const make = (label: string) =>
    configured ? configuredParty(label, proxy.url, timers, clock) : plainParty(label, proxy.url, timers, clock, wrap?.(timers));
  const origin = await make("origin");
  const worker = await make("worker");
  await introduceParties(origin, worker);
  return { proxy, timers, clock, origin, worker };
}

async function closeRig(rig: Rig): Promise<void> {
  await rig.origin.close().catch(() => undefined);
  await rig.worker.close().catch(() => undefined);
  await rig.proxy.stop().catch(() => undefined);
}

// ---------------------------------------------------------------------------------------------
// The ledger: what was offered and what became of it
// ---------------------------------------------------------------------------------------------

type ItemKind = "task" | "message" | "done";

interface Item {
  readonly kind: ItemKind;
  taskId?: string;
  eventId?: string;
  envelopeId?: string;
  refused: boolean;
  /** Set once the sender's model was told the item's fate (relay loss, timeout). */
  reported?: string;
}

interface Ledger {
  readonly items: Item[];
  offerTask(rig: Rig, to: TaskEndpoint, text: string, extra?: Record<string, unknown>): Promise<Item>;
  offerMessage(rig: Rig, taskId: string, text: string): Promise<Item>;
  offerDone(rig: Rig, taskId: string): Promise<Item>;
}

function createLedger(): Ledger {
  const items: Item[] = [];
  return {
    items,
    async offerTask(rig, to, text, extra = {}) {
      const item: Item = { kind: "task", refused: false };
      items.push(item);
      try {
        const created = await rig.origin.core().createTask({ to, task: text, ...extra });
        item.taskId = created.taskId;
        item.envelopeId = created.envelopeId;
      } catch (raw) {
        const error = toTaskError(raw);
        // With a task id the task exists (its envelope waits for a retry); without one nothing
        // was created and the caller was told.
        if (typeof error.details.taskId === "string") {
          item.taskId = error.details.taskId;
          item.envelopeId = error.details.envelopeId as string | undefined;
        } else item.refused = true;
      }
      if (item.taskId !== undefined)
        item.eventId = rig.origin
          .core()
          .findTask(item.taskId)
          ?.events.find((event) => event.type === "task.created")?.eventId;
      return item;
    },
    async offerMessage(rig, taskId, text) {
      const item: Item = { kind: "message", taskId, refused: false };
      items.push(item);
      try {
        const sent = await rig.origin.core().message({ taskId, type: "information", message: text });
        item.eventId = sent.eventId;
        item.envelopeId = sent.envelopeId;
      } catch (raw) {
        const error = toTaskError(raw);
        const envelopeId = error.details.envelopeId as string | undefined;
        if (envelopeId === undefined) item.refused = true;
        else {
          item.envelopeId = envelopeId;
          const stored = coreInternals(rig.origin.core()).store.getEnvelope(envelopeId);
          const envelope = stored === undefined ? undefined : clearEnvelope(stored);
          item.eventId = (envelope?.payload.payload as { eventId?: string } | undefined)?.eventId;
        }
      }
      return item;
    },
    async offerDone(rig, taskId) {
      const item: Item = { kind: "done", taskId, refused: false };
      items.push(item);
      try {
        await rig.worker.core().done({ taskId, status: "completed", summary: `done ${taskId.slice(0, 8)}` });
      } catch (raw) {
        const error = toTaskError(raw);
        // A retryable failure keeps the intent (and its envelope) for the passes.
        if (!error.retryable) item.refused = true;
      }
      item.envelopeId = coreInternals(rig.worker.core()).store.getOperation(taskId, "terminal_intent")?.envelopeIds[0];
      return item;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Accounting
// ---------------------------------------------------------------------------------------------

export interface FaultRow {
  readonly fault: string;
  readonly injection: string;
  readonly offered: number;
  readonly accepted: number;
  readonly presented: number;
  readonly duplicated: number;
  /** Not presented, but reported to the sender's model (both kinds below). */
  readonly reported: number;
  /** Accepted mail the relay lost in a restart, reported as `RELAY_STATE_LOST`. */
  readonly lostToRelayReset: number;
  /** Mail to or from a lifetime that was shut down, reported by the task's timeout or the failed call. */
  readonly endedWithLifetime: number;
  readonly refused: number;
  readonly lost: number;
  readonly requests: number;
  /** Requests the fault actually hit (proof the fault was injected). */
  readonly faulted: number;
  readonly checks: readonly { readonly name: string; readonly ok: boolean }[];
  readonly note: string;
  readonly ok: boolean;
}

function acceptedIds(parties: readonly Party[]): Set<string> {
  const ids = new Set<string>();
  for (const party of parties) {
    for (const entry of party.replies) {
      if (entry.operation !== "send" || entry.reply?.ok !== true) continue;
      const id = (entry.reply.value as { envelopeId?: unknown } | undefined)?.envelopeId;
      if (typeof id === "string") ids.add(id);
    }
  }
  return ids;
}

function insertionCounts(host: MemoryHost): Map<string, number> {
  const counts = new Map<string, number>();
  for (const id of host.insertedIds()) counts.set(id, (counts.get(id) ?? 0) + 1);
  return counts;
}

/** `workers`: every worker lifetime that held the tasks (a reassignment adds one). */
function presentedItem(rig: Rig, item: Item, workers: readonly Party[] = [rig.worker]): boolean {
  if (item.kind === "done") {
    // The origin's model sees the canonical terminal event of the task.
    return rig.origin.host.inserted.some((entry) => entry.taskId === item.taskId && eventTypeRow(entry.event.type).terminalStatus !== null);
  }
  return item.eventId !== undefined && workers.some((worker) => worker.host.insertedIds().includes(item.eventId!));
}

function account(
  fault: string,
  injection: string,
  rig: Rig,
  ledger: Ledger,
  requests: number,
  faulted: number,
  checks: FaultRow["checks"],
  note: string,
  workers: readonly Party[] = [rig.worker],
): FaultRow {
  const accepted = acceptedIds([rig.origin, ...workers]);
  let presented = 0;
  let reported = 0;
  let lostToRelayReset = 0;
  let refused = 0;
  let acceptedCount = 0;
  for (const item of ledger.items) {
    if (item.envelopeId !== undefined && accepted.has(item.envelopeId)) acceptedCount += 1;
    if (item.refused) refused += 1;
    else if (presentedItem(rig, item, workers)) presented += 1;
    else if (item.reported !== undefined) {
      reported += 1;
      if (item.reported === "RELAY_STATE_LOST") lostToRelayReset += 1;
    }
  }
  let duplicated = 0;
  for (const host of [rig.origin.host, ...workers.map((worker) => worker.host)])
    for (const count of insertionCounts(host).values()) duplicated += count - 1;
  const offered = ledger.items.length;
  const lost = offered - presented - reported - refused;
  const ok = lost === 0 && duplicated === 0 && faulted > 0 && checks.every((check) => check.ok);
  return {
    fault,
    injection,
    offered,
    accepted: acceptedCount,
    presented,
    duplicated,
    reported,
    lostToRelayReset,
    endedWithLifetime: reported - lostToRelayReset,
    refused,
    lost,
    requests,
    faulted,
    checks,
    note,
    ok,
  };
}

// ---------------------------------------------------------------------------------------------
// Workload and drain
// ---------------------------------------------------------------------------------------------

/** Passes on both parties until nothing is pending locally or at the relay (timers jump past cooldowns). */
async function drain(rig: Rig, rounds = DRAIN_ROUNDS): Promise<boolean> {
  return (await tryDrain([rig.origin, rig.worker], { timers: rig.timers, rounds })) !== undefined;
}

/**
 * The standard workload: per task, the origin sends it, the worker takes it in, the origin sends a
 * message, the worker takes it in and finishes the task, the origin takes the result in. Faults
 * may make any step fail; what is left is finished after `heal()` and a drain.
 */
async function workload(rig: Rig, ledger: Ledger, tasks: number, heal: () => void, between?: () => Promise<void>): Promise<boolean> {
  const to = rig.worker.core().endpoint()!;
  const taskIds: string[] = [];
  for (let index = 0; index < tasks; index += 1) {
    const task = await ledger.offerTask(rig, to, `fault workload task ${index}`);
    if (task.taskId !== undefined) taskIds.push(task.taskId);
    await rig.worker.refresh().catch(() => undefined);
    if (task.taskId !== undefined) await ledger.offerMessage(rig, task.taskId, `message for task ${index}`);
    await rig.worker.refresh().catch(() => undefined);
    await between?.();
  }
  const done = new Set<string>();
  const finish = async () => {
    for (const taskId of taskIds) {
      if (done.has(taskId) || rig.worker.core().findTask(taskId) === undefined) continue;
      done.add(taskId);
      await ledger.offerDone(rig, taskId);
      await rig.origin.refresh().catch(() => undefined);
    }
  };
  await finish();
  heal();
  const drained = await drain(rig);
  await finish();
  return (await drain(rig)) && drained;
}

// ---------------------------------------------------------------------------------------------
// The faults
// ---------------------------------------------------------------------------------------------

type Body = {
  envelope?: { envelopeId?: string; target?: TaskEndpoint; payload?: { kind?: string } };
  envelopeId?: string;
  endpoint?: TaskEndpoint;
};
const bodyOf = (request: ProxyRequest): Body => (request.body ?? {}) as Body;
const fromEndpoint = (endpoint: TaskEndpoint) => (request: ProxyRequest) => bodyOf(request).endpoint?.id === endpoint.id;

interface FaultContext {
  readonly relay: RelayProcess;
  readonly tasks: number;
  readonly quick: boolean;
}

interface FaultSpec {
  readonly name: string;
  readonly injection: string;
  run(context: FaultContext): Promise<FaultRow>;
}

/** A fault made of proxy rules applied during the standard workload. */
function ruleFault(name: string, injection: string, rules: (rig: Rig) => FaultRule[], note = ""): FaultSpec {
  return {
    name,
    injection,
    async run({ relay, tasks }) {
      const rig = await makeRig(relay);
      try {
        const handles = rules(rig).map((rule) => rig.proxy.push(rule));
        const ledger = createLedger();
        const drained = await workload(rig, ledger, tasks, () => rig.proxy.clear());
        const faulted = handles.reduce((sum, handle) => sum + handle.hits(), 0);
        return account(name, injection, rig, ledger, rig.proxy.stats().total.seen, faulted, [{ name: "drained", ok: drained }], note);
      } finally {
        await closeRig(rig);
      }
    },
  };
}

const relayRestart: FaultSpec = {
  name: "relay restart",
  injection:
    "configured cores (`createConfiguredTaskCore`) through the proxy; after half of the tasks the relay process is stopped and a new one started on the same port (new epoch, empty memory); the next passes fail `RELAY_RESET`, each core binds a fresh endpoint and keeps its tasks, finds its peer again by session name (its new endpoint proving the task's bound key with a fresh hello: proofs hold for one relay lifetime) and re-sends what the new relay never saw; then every task is finished and the second half runs. Before the first half, the worker proved its endpoint to the origin (untimed), as in every row.",
  async run({ relay: _shared, tasks }) {
    let relay = await startRelayProcess();
    const port = relay.port;
    const rig = await makeRig(relay, true);
    try {
      const ledger = createLedger();
      // At least two: the second is never taken in before the restart (found with the first's peer).
      const half = Math.max(2, Math.floor(tasks / 2));
      const to = () => rig.worker.core().endpoint()!;
      const before: string[] = [];
      for (let index = 0; index < half; index += 1) {
        const task = await ledger.offerTask(rig, to(), `before the restart ${index}`);
        // The worker takes the first one in; the rest stay accepted at the relay (and are lost with it).
        if (index === 0) await rig.worker.refresh().catch(() => undefined);
        if (task.taskId === undefined) continue;
        before.push(task.taskId);
        await ledger.offerMessage(rig, task.taskId, `message before the restart ${index}`);
      }
      const endpoints = [rig.origin.core().endpoint()!.id, rig.worker.core().endpoint()!.id];
      await relay.stop();
      relay = await startRelayProcess({ port });
      // Each side meets the new epoch (RELAY_RESET), rebinds, looks its peer up and re-sends.
      const reconnected =
        (await tryDrain([rig.origin, rig.worker], { timers: rig.timers, rounds: DRAIN_ROUNDS, cooldownMs: orphanProbeIntervalMs })) !==
        undefined;
      const rebound = rig.origin.core().endpoint()!.id !== endpoints[0] && rig.worker.core().endpoint()!.id !== endpoints[1];
      // What the new relay never saw arrives with the re-sends: let them land, then finish every task.
      await drain(rig);
      for (const taskId of before) if (rig.worker.core().findTask(taskId) !== undefined) await ledger.offerDone(rig, taskId);
      const drained = await workload(rig, ledger, Math.max(0, tasks - half), () => undefined);
      const completed = before.every((taskId) => rig.origin.core().findTask(taskId)?.status === "completed");
      // The fault hit both sides: each met the new epoch and rebound.
      const hits = [rig.origin, rig.worker].filter((party, index) => party.core().endpoint()!.id !== endpoints[index]).length;
      return account(
        this.name,
        this.injection,
        rig,
        ledger,
        rig.proxy.stats().total.seen,
        hits,
        [
          { name: "fresh endpoints bound", ok: rebound },
          { name: "peers found again", ok: reconnected },
          { name: "tasks from before the restart completed", ok: completed },
          { name: "drained", ok: drained },
        ],
        `${before.length} tasks begun before the restart: re-sent after it and completed`,
      );
    } finally {
      await closeRig(rig);
      await relay.stop().catch(() => undefined);
    }
  },
};

/** Send attempts with the delivery-budget (jump-timer) time they started at and whether capacity refused them. */
interface SendAttempt {
  readonly envelopeId: string;
  readonly at: number;
  capacity: boolean;
}

function sendRecorder(attempts: SendAttempt[]): (timers: JumpTimers) => FetchWrap {
  return (timers) => (inner) =>
    (async (input: string | URL | Request, init?: RequestInit) => {
      const text = input instanceof Request ? await input.clone().text() : typeof init?.body === "string" ? init.body : "";
      // One attempt per envelope a send carries (a send-batch-v1 request carries several).
      let sent: SendAttempt[] = [];
      try {
        const body = JSON.parse(text) as { operation?: string };
        if (body.operation === "send")
          sent = requestEnvelopes(body)
            .map((envelope) => envelope.envelopeId)
            .filter((envelopeId): envelopeId is string => typeof envelopeId === "string")
            .map((envelopeId) => ({ envelopeId, at: timers.now(), capacity: false }));
      } catch {
        // not a relay POST
      }
      attempts.push(...sent);
      const response = await inner(input, init);
      if (sent.length > 0) {
        const capacity = (await response.clone().text()).includes('"RELAY_CAPACITY"');
        for (const attempt of sent) attempt.capacity = capacity;
      }
      return response;
    }) as typeof fetch;
}

const capacityRetryAfter: FaultSpec = {
  name: "capacity with retryAfterMs",
  injection: `every send is refused \`RELAY_CAPACITY\` with \`retryAfterMs\` = ${capacityCooldownMs + activePollIntervalMs} ms (503, relay body) until 6 refusals were served; passes run every 1 s of jump-timer time; a send of a refused envelope started (jump-timer time) before its retryAfterMs elapsed counts as an early retry.`,
  async run({ relay, tasks }) {
    const attempts: SendAttempt[] = [];
    const rig = await makeRig(relay, false, sendRecorder(attempts));
    try {
      const retryAfterMs = capacityCooldownMs + activePollIntervalMs;
      const handle = rig.proxy.push({ operation: "send", kind: "capacity", retryAfterMs, times: 6 });
      const ledger = createLedger();
      const drained = await workload(
        rig,
        ledger,
        tasks,
        () => undefined,
        async () => {
          rig.timers.jump(activePollIntervalMs);
          for (const party of [rig.origin, rig.worker]) await party.refresh().catch(() => undefined);
        },
      );
      // A refused envelope may be sent again only retryAfterMs after the refused attempt started.
      let early = 0;
      const refusedAt = new Map<string, number>();
      for (const attempt of attempts) {
        const refused = refusedAt.get(attempt.envelopeId);
        if (refused !== undefined && attempt.at < refused + retryAfterMs) early += 1;
        if (attempt.capacity) refusedAt.set(attempt.envelopeId, attempt.at);
      }
      return account(
        this.name,
        this.injection,
        rig,
        ledger,
        rig.proxy.stats().total.seen,
        handle.hits(),
        [
          { name: "no re-send before retryAfterMs", ok: early === 0 },
          { name: "refusals seen by the client", ok: attempts.filter((attempt) => attempt.capacity).length === handle.hits() },
          { name: "drained", ok: drained },
        ],
        `${early} early re-sends of ${refusedAt.size} refused envelopes`,
      );
    } finally {
      await closeRig(rig);
    }
  },
};

const duplicateDelivery: FaultSpec = {
  name: "duplicate delivery",
  injection:
    "(a) the worker's receive replies are cut mid-body twice (the page is served again); (b) after each task, an envelope the worker already received is re-served in its next page under a fresh, higher cursor (a cursor the relay assigned to a filler envelope the bench sent and ACKed out of band; those three requests count too).",
  async run({ relay, tasks }) {
    const rig = await makeRig(relay);
    try {
      const worker = rig.worker.core().endpoint()!;
      const drops = rig.proxy.push({ operation: "receive", kind: "drop-reply", times: 2, when: fromEndpoint(worker) });
      let reserved = 0;
      const delivered = () =>
        rig.worker.replies
          .filter((entry) => entry.operation === "receive")
          .flatMap((entry) =>
            ((entry.reply?.value as { deliveries?: { envelope: Record<string, unknown> }[] } | undefined)?.deliveries ?? []).map(
              (item) => item.envelope,
            ),
          );
      /** A cursor the relay assigned but the worker's core never fetched. */
      const gapCursor = async (): Promise<string> => {
        const self = rig.origin.core().endpoint()!;
        const envelope = {
          envelopeId: crypto.randomUUID(),
          protocolVersion: 2,
          source: self,
          target: worker,
          payload: { taskId: crypto.randomUUID(), kind: "canonical_event", payload: {} },
          createdAt: new Date().toISOString(),
        };
        await coreInternals(rig.origin.core()).session.send(encodedEnvelope(envelope));
        const page = await coreInternals(rig.worker.core()).session.receive(coreInternals(rig.worker.core()).store.checkpoint().highWater);
        const cursor = page.deliveries.find((delivery) => delivery.envelopeId === envelope.envelopeId)!.cursor;
        await coreInternals(rig.worker.core()).session.acknowledge(envelope.envelopeId);
        return cursor;
      };
      const ledger = createLedger();
      const drained = await workload(
        rig,
        ledger,
        tasks,
        () => rig.proxy.clear(),
        async () => {
          const old = delivered().find((envelope) => (envelope.payload as { kind?: string } | undefined)?.kind === "assignment");
          if (old === undefined) return;
          const cursor = await gapCursor();
          rig.proxy.push({
            operation: "receive",
            kind: "rewrite",
            when: fromEndpoint(worker),
            rewrite: (reply: { value: { deliveries: unknown[] } }) => {
              reply.value.deliveries.unshift({ cursor, envelope: old });
              reserved += 1;
              return reply;
            },
          });
          await rig.worker.refresh().catch(() => undefined);
        },
      );
      return account(
        this.name,
        this.injection,
        rig,
        ledger,
        rig.proxy.stats().total.seen,
        drops.hits() + reserved,
        [{ name: "drained", ok: drained }],
        `${drops.hits()} pages served twice, ${reserved} envelopes re-served under a new cursor`,
      );
    } finally {
      await closeRig(rig);
    }
  },
};

function workerBusy(busyMs: number): FaultSpec {
  const passes = Math.round(busyMs / activePollIntervalMs);
  return {
    name: `worker busy for ${busyMs / 1000} s`,
    injection: `the worker's host reports not presentable (Pi busy) for ${busyMs / 1000} s of simulated time: ${passes} worker passes at the 1 s active cadence with the jump timers advanced 1 s per pass (no real waiting), while the origin keeps sending; then the host is idle again and both sides drain.`,
    async run({ relay, tasks }) {
      const rig = await makeRig(relay);
      try {
        const ledger = createLedger();
        const to = rig.worker.core().endpoint()!;
        rig.worker.host.busy = true;
        const before = rig.proxy.stats().total.seen;
        const every = Math.max(1, Math.floor(passes / tasks));
        const offered: string[] = [];
        for (let pass = 0; pass < passes; pass += 1) {
          if (pass % every === 0 && offered.length < tasks) {
            const task = await ledger.offerTask(rig, to, `while the worker is busy ${offered.length}`);
            if (task.taskId !== undefined) {
              offered.push(task.taskId);
              await ledger.offerMessage(rig, task.taskId, `message while busy ${offered.length}`);
            }
          }
          await rig.worker.refresh().catch(() => undefined);
          rig.timers.jump(activePollIntervalMs);
        }
        const duringBusy = rig.proxy.stats().total.seen - before;
        const insertedWhileBusy = rig.worker.host.inserted.length;
        const recorded = offered.filter((taskId) => rig.worker.core().findTask(taskId) !== undefined).length;
        rig.worker.host.busy = false;
        await rig.worker.refresh().catch(() => undefined);
        for (const taskId of offered) {
          await ledger.offerDone(rig, taskId);
        }
        const drained = await drain(rig);
        return account(
          this.name,
          this.injection,
          rig,
          ledger,
          rig.proxy.stats().total.seen,
          passes,
          [
            { name: "nothing inserted while busy", ok: insertedWhileBusy === 0 },
            { name: "assignments recorded while busy", ok: recorded === offered.length },
            { name: "drained", ok: drained },
          ],
          `${duringBusy} requests during the busy period (${passes} passes)`,
        );
      } finally {
        await closeRig(rig);
      }
    },
  };
}

const shutdownMidPass: FaultSpec = {
  name: "shutdown mid-pass",
  injection:
    "the worker's lifetime is closed while its pass waits on a receive held at the proxy; its tasks (minimum timeout) are timed out by the origin once the record clock passes their deadline (`task.timed_out` presented to the origin's model). Then the origin's lifetime is closed while its send of a new task to a fresh worker is delayed at the proxy (the send reaches the relay after the close). Fresh lifetimes then run the rest of the workload.",
  async run({ relay, tasks }) {
    const rig = await makeRig(relay);
    const extra: Party[] = [];
    const unhandled: unknown[] = [];
    const listener = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", listener);
    try {
      // 1. The worker shuts down mid-pass.
      const ledger = createLedger();
      const worker = rig.worker.core().endpoint()!;
      const first = Math.max(1, Math.floor(tasks / 2));
      for (let index = 0; index < first; index += 1)
        await ledger.offerTask(rig, worker, `to a worker that shuts down ${index}`, { timeoutMs: taskTimeoutMinMs });
      const held = rig.proxy.push({ operation: "receive", kind: "hold", when: fromEndpoint(worker) });
      const pass = rig.worker.refresh().catch(() => undefined);
      await rig.proxy.waitFor((stats) => stats.held === 1);
      await rig.worker.close();
      await pass;
      rig.proxy.release();
      const workerCleared = coreInternals(rig.worker.core()).store.stats().records === 0;
      rig.clock.jump(taskTimeoutMinMs);
      await rig.origin.refresh().catch(() => undefined);
      for (const item of ledger.items) {
        const timedOut = rig.origin.host.inserted.some((entry) => entry.taskId === item.taskId && entry.event.type === "task.timed_out");
        if (timedOut && !presentedItem(rig, item)) item.reported = "task.timed_out";
      }
      const firstRow = account(this.name, this.injection, rig, ledger, 0, 1, [], "");

      // 2. The origin shuts down while a send is in flight (delayed at the proxy).
      const freshWorker = await plainParty("worker", rig.proxy.url, rig.timers, rig.clock);
      extra.push(freshWorker);
      // Proven first, so the delayed send is the assignment itself (not a hello).
      await introduceParties(rig.origin, freshWorker);
      const delayed = rig.proxy.push({
        operation: "send",
        kind: "delay",
        ms: REQUEST_TIMEOUT_MS / 2,
        when: fromEndpoint(rig.origin.core().endpoint()!),
      });
      const lateLedger = createLedger();
      const late = lateLedger.offerTask(rig, freshWorker.core().endpoint()!, "sent while the origin shuts down");
      await rig.proxy.waitFor((stats) => (stats.operations.send?.faulted ?? 0) >= 1);
      await rig.origin.close();
      const lateItem = await late;
      await Bun.sleep(REQUEST_TIMEOUT_MS);
      const originCleared = coreInternals(rig.origin.core()).store.stats().records === 0;

      // 3. Fresh lifetimes carry on (the fresh worker also takes in the late assignment).
      const freshOrigin = await plainParty("origin", rig.proxy.url, rig.timers, rig.clock);
      extra.push(freshOrigin);
      await introduceParties(freshOrigin, freshWorker);
      const fresh: Rig = { ...rig, origin: freshOrigin, worker: freshWorker };
      const second = createLedger();
      const drained = await workload(fresh, second, Math.max(1, tasks - first), () => undefined);
      const secondRow = account(this.name, this.injection, fresh, second, 0, 1, [], "");
      // The late task: inserted at the fresh worker, or its caller was told (the call failed).
      const lateInserted = lateItem.eventId !== undefined && freshWorker.host.insertedIds().includes(lateItem.eventId);
      const lateReported = !lateInserted && !lateItem.refused;

      const checks = [
        { name: "closed stores hold nothing", ok: workerCleared && originCleared },
        { name: "no unhandled rejection", ok: unhandled.length === 0 },
        { name: "fresh lifetimes drained", ok: drained },
      ];
      const offered = firstRow.offered + secondRow.offered + 1;
      const presented = firstRow.presented + secondRow.presented + (lateInserted ? 1 : 0);
      const reported = firstRow.reported + secondRow.reported + (lateReported ? 1 : 0);
      const refused = firstRow.refused + secondRow.refused + (lateItem.refused ? 1 : 0);
      const duplicated = firstRow.duplicated + secondRow.duplicated;
      const lost = offered - presented - reported - refused;
      return {
        fault: this.name,
        injection: this.injection,
        offered,
        accepted: firstRow.accepted + secondRow.accepted + (lateInserted ? 1 : 0),
        presented,
        duplicated,
        reported,
        lostToRelayReset: 0,
        endedWithLifetime: reported,
        refused,
        lost,
        requests: rig.proxy.stats().total.seen,
        faulted: held.hits() + delayed.hits(),
        checks,
        note: `${firstRow.reported} tasks of the closed worker reported to the origin as task.timed_out; the late send ${lateInserted ? "reached the relay after the origin closed and was inserted at the fresh worker once" : lateItem.refused ? "failed and created nothing" : "failed (its caller was told)"}`,
        ok: lost === 0 && duplicated === 0 && held.hits() > 0 && delayed.hits() > 0 && checks.every((check) => check.ok),
      };
    } finally {
      process.off("unhandledRejection", listener);
      for (const party of extra) await party.close().catch(() => undefined);
      await closeRig(rig);
    }
  },
};

// ---------------------------------------------------------------------------------------------
// Outcomes under failure (issue 14): a lost worker, a worker that returns after reassignment,
// a result that arrives after the timeout
// ---------------------------------------------------------------------------------------------

/** The bound on orphan detection, in passes at the active cadence (simulated time). */
const ORPHAN_BOUND_PASSES = (orphanAfterMs + orphanProbeIntervalMs) / activePollIntervalMs;

/** Passes at the active cadence (timers and record clock move together) until `done()`; the passes used, or undefined. */
async function atCadence(rig: Rig, parties: readonly Party[], done: () => boolean, limit: number): Promise<number | undefined> {
  for (let passes = 1; passes <= limit; passes += 1) {
    rig.timers.jump(activePollIntervalMs);
    rig.clock.jump(activePollIntervalMs);
    for (const party of parties) await party.refresh().catch(() => undefined);
    if (done()) return passes;
  }
  return undefined;
}

/** The start of these rows: tasks with one message each, taken in by the worker's model. */
async function delegate(
  rig: Rig,
  ledger: Ledger,
  tasks: number,
  label: string,
  extra: Record<string, unknown> = {},
): Promise<{ taskIds: string[]; tookIn: boolean }> {
  const to = rig.worker.core().endpoint()!;
  const taskIds: string[] = [];
  for (let index = 0; index < tasks; index += 1) {
    const task = await ledger.offerTask(rig, to, `${label} ${index}`, extra);
    if (task.taskId === undefined) continue;
    taskIds.push(task.taskId);
    await ledger.offerMessage(rig, task.taskId, `message: ${label} ${index}`);
  }
  const drained = await drain(rig);
  const tookIn = ledger.items.every(
    (item) => item.kind === "done" || (item.eventId !== undefined && rig.worker.host.insertedIds().includes(item.eventId)),
  );
  return { taskIds, tookIn: drained && tookIn };
}

/**
 * Origin passes at the active cadence until the origin has just probed its worker (a successful
 * `resolve`): the registration dropped right after is the worst case for the orphan bound.
 */
async function justProbed(rig: Rig): Promise<boolean> {
  const probes = () => rig.origin.replies.filter((entry) => entry.operation === "resolve" && entry.reply?.ok === true).length;
  const before = probes();
  return (await atCadence(rig, [rig.origin], () => probes() > before, ORPHAN_BOUND_PASSES)) !== undefined;
}

const allOrphaned = (rig: Rig, taskIds: readonly string[]) => () =>
  taskIds.every((taskId) => rig.origin.core().findTask(taskId)?.attention === "orphaned");

/** Each task's orphan record: one event, inserted once, woken once. */
function orphanToldOnce(rig: Rig, taskIds: readonly string[]): boolean {
  return taskIds.every((taskId) => {
    const events = rig.origin
      .core()
      .getTask(taskId)
      .events.filter((event) => event.type === "task.orphaned");
    const inserted = rig.origin.host.inserted.filter((entry) => entry.taskId === taskId && entry.event.type === "task.orphaned");
    const woken = rig.origin.host.wakes.flat().filter((entry) => entry.taskId === taskId && entry.event.type === "task.orphaned");
    return events.length === 1 && inserted.length === 1 && woken.length === 1;
  });
}

/** Moves every task to `to`; how many moved. */
async function reassignAll(rig: Rig, taskIds: readonly string[], to: TaskEndpoint): Promise<number> {
  let moved = 0;
  for (const taskId of taskIds) {
    if (
      await rig.origin
        .core()
        .reassignTask(taskId, { to })
        .then(
          () => true,
          () => false,
        )
    )
      moved += 1;
  }
  return moved;
}

/** The new worker holds each task under generation 2 with every event the origin forwards. */
function carriedHistory(rig: Rig, worker: Party, taskIds: readonly string[]): boolean {
  return taskIds.every((taskId) => {
    const origin = rig.origin.core().getTask(taskId);
    const held = worker.core().findTask(taskId);
    if (held === undefined || origin.generation !== 2 || held.generation !== 2) return false;
    const ids = new Set(held.events.map((event) => event.eventId));
    return origin.events.filter((event) => !eventTypeRow(event.type).originLocal).every((event) => ids.has(event.eventId));
  });
}

const workerKilled: FaultSpec = {
  name: "worker killed mid-task",
  injection: `after each task and its message reached the worker's model, the worker's Pi dies: its lifetime is closed and the relay drops its registration (a disconnect; a crash drops it at lease expiry, and the bound counts from then). The origin runs passes at the ${activePollIntervalMs / 1000} s active cadence (jump timers and record clock) until each task is \`orphaned\` — required within orphanAfterMs + orphanProbeIntervalMs = ${(orphanAfterMs + orphanProbeIntervalMs) / 1000} s of simulated time (${ORPHAN_BOUND_PASSES} passes) — and shown once; then it reassigns every task (\`reassignTask(taskId, {to})\`) to a fresh worker lifetime, which receives the history, finishes each task, and the origin acknowledges them.`,
  async run({ relay, tasks }) {
    const rig = await makeRig(relay);
    const extra: Party[] = [];
    try {
      const ledger = createLedger();
      const { taskIds, tookIn } = await delegate(rig, ledger, tasks, "to a worker that dies");
      const probed = await justProbed(rig);
      await coreInternals(rig.worker.core())
        .session.disconnect()
        .catch(() => undefined);
      await rig.worker.close();
      const passes = await atCadence(rig, [rig.origin], allOrphaned(rig, taskIds), 2 * ORPHAN_BOUND_PASSES);
      const orphaned = taskIds.filter((taskId) => rig.origin.core().getTask(taskId).attention === "orphaned").length;
      // The pass after presents the last records; later passes must not repeat them.
      for (let pass = 0; pass < 3; pass += 1) {
        rig.timers.jump(orphanProbeIntervalMs);
        await rig.origin.refresh().catch(() => undefined);
      }
      const toldOnce = orphanToldOnce(rig, taskIds);

      const fresh = await plainParty("worker", rig.proxy.url, rig.timers, rig.clock);
      extra.push(fresh);
      await introduceParties(rig.origin, fresh);
      const next: Rig = { ...rig, worker: fresh };
      const moved = await reassignAll(rig, taskIds, fresh.core().endpoint()!);
      const handedOver = await drain(next);
      const carried = carriedHistory(rig, fresh, taskIds);
      for (const taskId of taskIds) await ledger.offerDone(next, taskId);
      const finished = await drain(next);
      for (const taskId of taskIds)
        await rig.origin
          .core()
          .acknowledge({ taskId })
          .catch(() => undefined);
      const acknowledgedDrained = await drain(next);
      const completed = taskIds.every((taskId) => {
        const view = rig.origin.core().getTask(taskId);
        return view.status === "completed" && view.outcome === "succeeded" && view.attention === undefined;
      });
      const acknowledged = taskIds.every((taskId) =>
        fresh
          .core()
          .getTask(taskId)
          .events.some((event) => event.type === "task.parent_acknowledged"),
      );
      return account(
        this.name,
        this.injection,
        rig,
        ledger,
        rig.proxy.stats().total.seen,
        orphaned,
        [
          { name: "taken in before the death", ok: tookIn && probed },
          { name: "orphaned within orphanAfterMs + orphanProbeIntervalMs", ok: passes !== undefined && passes <= ORPHAN_BOUND_PASSES },
          { name: "orphan shown once per task (one record, one wake)", ok: toldOnce },
          { name: "reassigned under generation 2 with its history", ok: moved === taskIds.length && carried },
          { name: "completed by the new worker, attention cleared", ok: completed },
          { name: "acknowledged", ok: acknowledged },
          { name: "drained", ok: handedOver && finished && acknowledgedDrained },
        ],
        `${orphaned} tasks orphaned after ${passes ?? "more than " + 2 * ORPHAN_BOUND_PASSES} passes (${((passes ?? 0) * activePollIntervalMs) / 1000} s simulated), reassigned and completed by a fresh worker`,
        [rig.worker, fresh],
      );
    } finally {
      for (const party of extra) await party.close().catch(() => undefined);
      await closeRig(rig);
    }
  },
};

const zombieWorker: FaultSpec = {
  name: "zombie worker",
  injection:
    "the worker's registration is gone (its session disconnects) while its Pi keeps its tasks in RAM; the origin orphans the tasks at the active cadence and reassigns them to a fresh worker (generation 2). Then the old worker comes back — bound again on the same relay state (`rebind`) with its lifetime re-homed (`rehomeCore`), as the recovering core does — and reports every task completed with its generation-1 intents before the new worker says anything; then the new worker finishes them.",
  async run({ relay, tasks }) {
    const rig = await makeRig(relay);
    const extra: Party[] = [];
    try {
      const ledger = createLedger();
      const { taskIds, tookIn } = await delegate(rig, ledger, tasks, "to a worker that comes back");
      const zombie = rig.worker;
      const session = coreInternals(zombie.core()).session;
      await session.disconnect().catch(() => undefined);
      const passes = await atCadence(rig, [rig.origin], allOrphaned(rig, taskIds), 2 * ORPHAN_BOUND_PASSES);
      const fresh = await plainParty("worker", rig.proxy.url, rig.timers, rig.clock);
      extra.push(fresh);
      await introduceParties(rig.origin, fresh);
      const next: Rig = { ...rig, worker: fresh };
      const moved = await reassignAll(rig, taskIds, fresh.core().endpoint()!);

      // The old worker returns and reports, before the new worker said anything.
      const back = await session.rebind();
      rehomeCore(zombie.core(), back.endpoint, false);
      const zombieSummary = (taskId: string) => `zombie result ${taskId.slice(0, 8)}`;
      let sent = 0;
      for (const taskId of taskIds) {
        const result = await zombie
          .core()
          .done({ taskId, status: "completed", summary: zombieSummary(taskId) })
          .catch(() => undefined);
        if (result?.terminalDelivery.state === "accepted") sent += 1;
      }
      await rig.origin.refresh().catch(() => undefined);
      const refusedFirst = rig.origin.core().rejections().STALE_GENERATION ?? 0;

      // The new worker takes the tasks in, then finishes them.
      const handedOver = (await tryDrain([rig.origin, fresh, zombie], { timers: rig.timers, rounds: DRAIN_ROUNDS })) !== undefined;
      for (const taskId of taskIds) await ledger.offerDone(next, taskId);
      const drained =
        handedOver && (await tryDrain([rig.origin, fresh, zombie], { timers: rig.timers, rounds: DRAIN_ROUNDS })) !== undefined;
      const stale = rig.origin.core().rejections().STALE_GENERATION ?? 0;
      const recorded = rig.origin.host.rejections.filter((rejection) => rejection.code === "STALE_GENERATION").length;
      const isZombie = (payload: Record<string, unknown>) =>
        typeof payload.summary === "string" && payload.summary.startsWith("zombie result");
      const shown = rig.origin.host.inserted.some((entry) => isZombie(entry.event.payload));
      const kept = taskIds.some((taskId) =>
        rig.origin
          .core()
          .getTask(taskId)
          .events.some((event) => isZombie(event.payload)),
      );
      const fromNew = taskIds.every((taskId) => {
        const view = rig.origin.core().getTask(taskId);
        const terminal = view.events.filter(
          (event) => eventTypeRow(event.type).terminalStatus !== null || event.type === "task.late_terminal",
        );
        return (
          view.status === "completed" &&
          view.generation === 2 &&
          terminal.length === 1 &&
          terminal[0]!.payload.summary === `done ${taskId.slice(0, 8)}`
        );
      });
      return account(
        this.name,
        this.injection,
        rig,
        ledger,
        rig.proxy.stats().total.seen,
        stale,
        [
          { name: "taken in before the loss", ok: tookIn },
          { name: "orphaned and reassigned (generation 2)", ok: passes !== undefined && moved === taskIds.length },
          { name: "the old worker's done reached the relay", ok: sent === taskIds.length },
          {
            name: "refused STALE_GENERATION and counted, once per done",
            ok: refusedFirst === taskIds.length && stale === taskIds.length && recorded === taskIds.length,
          },
          { name: "never presented, never recorded", ok: !shown && !kept },
          { name: "the result comes from the new generation", ok: fromNew },
          { name: "drained", ok: drained },
        ],
        `${stale} generation-1 completions refused; every result came from the reassigned worker`,
        [zombie, fresh],
      );
    } finally {
      for (const party of extra) await party.close().catch(() => undefined);
      await closeRig(rig);
    }
  },
};

/** A worker's result that reached the origin after the task timed out (shown once: it settles the outcome). */
function isLateResult(event: { readonly type: string; readonly payload: Record<string, unknown> }): boolean {
  return event.type === "task.late_terminal" && typeof event.payload.intentId === "string";
}

const completionAfterTimeout: FaultSpec = {
  name: "completion after timeout",
  injection: `every task is sent with the minimum timeout (${taskTimeoutMinMs / 1000} s); after the worker took it and its message in, the origin's record clock passes the deadline and its pass times the task out (\`task.timed_out\`, shown to its model; outcome unknown, attention indeterminate). Only then does the worker — not yet aware of it — report each task completed.`,
  async run({ relay, tasks }) {
    const rig = await makeRig(relay);
    try {
      const ledger = createLedger();
      const { taskIds, tookIn } = await delegate(rig, ledger, tasks, "finished after its timeout", { timeoutMs: taskTimeoutMinMs });
      rig.clock.jump(taskTimeoutMinMs);
      await rig.origin.refresh().catch(() => undefined);
      const view = (taskId: string) => rig.origin.core().getTask(taskId);
      const insertedOf = (taskId: string, match: (event: { type: string; payload: Record<string, unknown> }) => boolean) =>
        rig.origin.host.inserted.filter((entry) => entry.taskId === taskId && match(entry.event));
      const timedOut = taskIds.filter((taskId) => view(taskId).status === "timed_out").length;
      const indeterminate = taskIds.every(
        (taskId) =>
          view(taskId).outcome === "unknown" &&
          view(taskId).attention === "indeterminate" &&
          insertedOf(taskId, (event) => event.type === "task.timed_out").length === 1,
      );
      const unaware = taskIds.every((taskId) => rig.worker.core().getTask(taskId).status === "active");
      for (const taskId of taskIds) await ledger.offerDone(rig, taskId);
      const drained = await drain(rig);
      for (let pass = 0; pass < 3; pass += 1) await rig.origin.refresh().catch(() => undefined);
      const settled = taskIds.every((taskId) => {
        const current = view(taskId);
        return (
          current.status === "timed_out" &&
          current.outcome === "succeeded" &&
          current.attention === undefined &&
          !current.events.some((event) => event.type === "task.completed")
        );
      });
      const shownOnce = taskIds.every((taskId) => {
        const late = insertedOf(taskId, isLateResult);
        const woken = rig.origin.host.wakes.flat().filter((entry) => entry.taskId === taskId && isLateResult(entry.event));
        return late.length === 1 && late[0]!.event.payload.lateType === "task.completed" && woken.length === 1;
      });
      return account(
        this.name,
        this.injection,
        rig,
        ledger,
        rig.proxy.stats().total.seen,
        timedOut,
        [
          { name: "taken in before the timeout", ok: tookIn },
          { name: "timed out: outcome unknown, attention indeterminate, shown", ok: timedOut === taskIds.length && indeterminate },
          { name: "the worker completed without knowing", ok: unaware },
          { name: "outcome settled, status stays timed_out", ok: settled },
          { name: "late result shown once", ok: shownOnce },
          { name: "drained", ok: drained },
        ],
        `${timedOut} tasks timed out at the origin, then completed: outcome succeeded, status timed_out, the late result shown once`,
      );
    } finally {
      await closeRig(rig);
    }
  },
};

export function faultSpecs(quick: boolean): FaultSpec[] {
  return [
    relayRestart,
    ruleFault(
      "lost send reply",
      "the proxy forwards a send, then sends half of the relay's reply and resets the connection (`drop-reply`) — the first 3 sends; the relay accepted each, the client saw `RELAY_UNAVAILABLE`; retries resend the identical envelope and the relay answers `duplicate:true`.",
      () => [{ operation: "send", kind: "drop-reply", times: 3 }],
    ),
    ruleFault(
      "lost ACK reply",
      "`drop-reply` on the worker's and origin's first 3 acknowledges: the relay removed the envelope, the client saw a failure; the next pass repairs the ACK (`duplicate:true`).",
      () => [{ operation: "acknowledge", kind: "drop-reply", times: 3 }],
    ),
    ruleFault(
      "429 burst without profile",
      'Wolfpack\'s generic rate-limit reply (429 `{"error":"rate limit exceeded"}`, no `profile`) to the next 8 sends, receives and acknowledges; capacity cooldowns pass on jump timers.',
      () => [{ operation: ["send", "receive", "acknowledge"], kind: "status-429", times: 8 }],
    ),
    capacityRetryAfter,
    ruleFault(
      "slow relay past the deadline",
      `the first 3 sends and the worker's first 2 receives are forwarded after ${REQUEST_TIMEOUT_MS + 200} ms, past the ${REQUEST_TIMEOUT_MS} ms request deadline (\`RELAY_TIMEOUT\`, may have been delivered); the late sends still reach the relay.`,
      (rig) => [
        { operation: "send", kind: "delay", ms: REQUEST_TIMEOUT_MS + 200, times: 3 },
        { operation: "receive", kind: "delay", ms: REQUEST_TIMEOUT_MS + 200, times: 2, when: fromEndpoint(rig.worker.core().endpoint()!) },
      ],
    ),
    ruleFault(
      "malformed page",
      "the worker's receive replies are replaced: 2 × not JSON (a truncated success object), then 2 pages rewritten with an item repeated and with cursors reversed (`INVALID_RESPONSE` / `INVALID_INBOX`; the checkpoint must not move).",
      (rig) => {
        const when = fromEndpoint(rig.worker.core().endpoint()!);
        return [
          { operation: "receive", kind: "malformed-json", times: 2, when },
          {
            operation: "receive",
            kind: "rewrite",
            when,
            rewrite: (reply: { value: { deliveries: unknown[] } }) => (
              reply.value.deliveries.length > 0 && reply.value.deliveries.push(reply.value.deliveries[0]), reply
            ),
          },
          {
            operation: "receive",
            kind: "rewrite",
            when,
            rewrite: (reply: { value: { deliveries: unknown[] } }) => (reply.value.deliveries.reverse(), reply),
          },
        ];
      },
    ),
    ruleFault(
      "oversized reply",
      `the worker's first 3 receive replies are padded past the ${maxResponseBodyBytes / 1024} KiB response cap (with Content-Length, chunked, and 1 byte over).`,
      (rig) => {
        const when = fromEndpoint(rig.worker.core().endpoint()!);
        return [
          { operation: "receive", kind: "oversized", when },
          { operation: "receive", kind: "oversized", chunked: true, when },
          { operation: "receive", kind: "oversized", bytes: maxResponseBodyBytes + 1, when },
        ];
      },
    ),
    duplicateDelivery,
    workerBusy(quick ? QUICK_BUSY_MS : BUSY_MS),
    shutdownMidPass,
    workerKilled,
    zombieWorker,
    completionAfterTimeout,
  ];
}

// ---------------------------------------------------------------------------------------------
// The matrix
// ---------------------------------------------------------------------------------------------

export interface FaultMatrix {
  readonly date: string;
  readonly quick: boolean;
  readonly tasksPerFault: number;
  readonly durationSeconds: number;
  readonly rows: readonly FaultRow[];
  readonly ok: boolean;
}

export async function runFaults(options: { quick?: boolean; progress?: (line: string) => void } = {}): Promise<FaultMatrix> {
  const quick = options.quick === true;
  const tasks = quick ? QUICK_TASKS : TASKS;
  const started = performance.now();
  const relay = await startRelayProcess();
  const rows: FaultRow[] = [];
  try {
    for (const spec of faultSpecs(quick)) {
      const at = performance.now();
      let row: FaultRow;
      try {
        row = await spec.run({ relay, tasks, quick });
      } catch (error) {
        row = {
          fault: spec.name,
          injection: spec.injection,
          offered: 0,
          accepted: 0,
          presented: 0,
          duplicated: 0,
          reported: 0,
          lostToRelayReset: 0,
          endedWithLifetime: 0,
          refused: 0,
          lost: 0,
          requests: 0,
          faulted: 0,
          checks: [{ name: `ran without throwing: ${error instanceof Error ? error.message : String(error)}`, ok: false }],
          note: "",
          ok: false,
        };
      }
      rows.push(row);
      options.progress?.(`${row.ok ? "ok    " : "FAILED"} ${spec.name} (${Math.round(performance.now() - at)} ms)`);
    }
  } finally {
    await relay.stop().catch(() => undefined);
  }
  return {
    date: new Date().toISOString(),
    quick,
    tasksPerFault: tasks,
    durationSeconds: Math.round((performance.now() - started) / 100) / 10,
    rows,
    ok: rows.every((row) => row.ok),
  };
}

export function reliabilityMarkdown(matrix: FaultMatrix): string {
  const lines: string[] = [];
  lines.push("# Reliability: the fault matrix");
  lines.push("");
  lines.push(
    `Generated by \`npm run faults\` (\`bench/faults.ts\`) on ${matrix.date.slice(0, 10)} in ${matrix.durationSeconds} s. Each fault runs the same workload between two TaskCores with in-memory Pi hosts, on the real relay (CLI child process) behind the fault proxy (\`testkit/fault-proxy.ts\`): ${matrix.tasksPerFault} tasks, each sent by the origin (\`createTask\`), followed by one origin message, and finished by the worker (\`done\`) — ${matrix.tasksPerFault * 3} offered sends — then the fault is healed and both sides drain. Before a fault is injected, each worker proves its endpoint to its origin (a content-free hello and its answer, src/core/proofs.ts), so the faults hit task mail, not a first assignment's proof round trip; the rows' request counts include those hellos.`,
  );
  lines.push("");
  lines.push(
    "Columns: **offered** createTask/message/done calls; **accepted** of those whose envelope the relay accepted (as seen in the replies that reached the client); **presented** inserted into the receiving model (the worker's `task.created` and message, the origin's terminal event); **twice** events inserted more than once within a lifetime; **lost to relay reset** accepted mail lost with a relay restart and never re-sent (0: both Pis keep their tasks, find each other again and re-send what the new relay never saw); **ended with lifetime** mail to or from a lifetime that was shut down, reported to the sender's model (the origin's `task.timed_out`, or the failed call itself); **refused** failed definitively, nothing created (the caller was told); **lost** = offered − presented − lost to relay reset − ended with lifetime − refused: silent loss; **requests** every request that reached the proxy; **hits** requests the fault actually hit. The run fails (exit 1) on any loss, any double insertion, a fault that never hit, or a failed check.",
  );
  lines.push("");
  lines.push(
    "| fault | offered | accepted | presented | twice | lost to relay reset | ended with lifetime | refused | lost | requests | hits | verdict |",
  );
  lines.push("|---|---|---|---|---|---|---|---|---|---|---|---|");
  for (const row of matrix.rows) {
    lines.push(
      `| ${row.fault} | ${row.offered} | ${row.accepted} | ${row.presented} | ${row.duplicated} | ${row.lostToRelayReset} | ${row.endedWithLifetime} | ${row.refused} | ${row.lost} | ${row.requests} | ${row.faulted} | ${row.ok ? "ok" : "FAILED"} |`,
    );
  }
  lines.push("");
  lines.push(
    'A relay restart loses the relay\'s memory by design, not the tasks: both Pis keep them in RAM, bind fresh endpoints, find each other again by session name and re-send what the new relay never saw (docs/protocol.md, "Outcomes under failure"). Only the **lost** column is silent loss, and it must be 0.',
  );
  lines.push("");
  lines.push("## How each fault is injected");
  lines.push("");
  for (const row of matrix.rows) {
    const checks = row.checks.map((check) => `${check.ok ? "✓" : "✗"} ${check.name}`).join("; ");
    lines.push(`- **${row.fault}**: ${row.injection}${row.note ? ` Result: ${row.note}.` : ""}${checks ? ` Checks: ${checks}.` : ""}`);
  }
  lines.push("");
  return lines.join("\n");
}

export const RELIABILITY_DOC = join(import.meta.dir, "..", "docs", "reliability.md");
/** The doc's sections from this heading on are written by hand (the multi-host tests' figures) and kept. */
const KEPT_HEADING = "## Across machines";

if (import.meta.main) {
  const quick = process.argv.includes("--quick");
  const matrix = await runFaults({ quick, progress: (line) => process.stderr.write(`faults: ${line}\n`) });
  if (!quick) writeFileSync(RELIABILITY_DOC, reliabilityMarkdown(matrix) + keptSections(RELIABILITY_DOC, KEPT_HEADING));
  for (const row of matrix.rows) {
    process.stdout.write(
      `${row.ok ? "ok    " : "FAILED"} ${row.fault.padEnd(30)} offered ${row.offered} accepted ${row.accepted} presented ${row.presented} twice ${row.duplicated} reset-lost ${row.lostToRelayReset} lifetime-ended ${row.endedWithLifetime} refused ${row.refused} lost ${row.lost} requests ${row.requests} hits ${row.faulted}${
        row.checks.some((check) => !check.ok)
          ? ` failed checks: ${row.checks
              .filter((check) => !check.ok)
              .map((check) => check.name)
              .join("; ")}`
          : ""
      }\n`,
    );
  }
  process.stdout.write(`faults: ${matrix.durationSeconds} s${quick ? " (quick: nothing written)" : `; wrote ${RELIABILITY_DOC}`}\n`);
  if (!matrix.ok) process.exitCode = 1;
}
