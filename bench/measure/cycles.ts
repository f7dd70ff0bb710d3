/**
 * Envelope cycles: several senders to one receiver through the real relay (child process), each
 * cycle = send (accepted) + receive (paged) + acknowledge (one `ack-batch-v1` request per page,
 * which our relay advertises), with a 1 KiB text payload. Every
 * envelope id is checked: each accepted envelope is received exactly once and acknowledged (zero
 * loss, zero duplicates), and the relay holds nothing at the end.
 *
 * Two clients drive the same workload: the real client (`VolatileTaskSession`: ky + p-queue + reply
 * validation, what a TaskCore uses) and a raw `fetch` client, which shows what the relay itself
 * sustains when the client costs next to nothing.
 *
 * With `hooks` (bench/measure/signed-cycles.ts), each sender prepares each envelope before its send
 * (e.g. signs its payload, or signs and seals it) and the receiver checks each received payload
 * before its ACK (e.g. verifies it, or opens and verifies it), inside the timed loop. A hook that
 * encodes the payload itself returns its text, which is spliced into the envelope's text as the
 * core splices `encodePayload`'s text (no parse, no re-serialization).
 */
import { maxAckBatchItems, KiB, maxReceivePageItems, maxRelayMailboxItems } from "../../src/protocol/limits.ts";
import { RELAY_ENDPOINT_PATH } from "../../src/protocol/names.ts";
import { toTaskError } from "../../src/protocol/errors.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import type { VolatileTaskSession } from "../../src/relay-client/session.ts";
import { startRelayProcess } from "../../src/demo/relay-process.ts";
import { childCpuMs, ownCpuMs } from "../lib/cpu.ts";
import { now } from "../lib/stats.ts";
import { boundSession, canonicalSize, encodedForSend, envelopeWithText, filler, rawBinding } from "../lib/wire.ts";

/** Envelopes per run. */
const ENVELOPES = 6_000;
const QUICK_ENVELOPES = 120;
const WARMUP_ENVELOPES = 400;
const QUICK_WARMUP_ENVELOPES = 20;
export const SENDERS = 4;
/** Sends each sender keeps in flight. */
const SENDS_IN_FLIGHT = 4;
/** Task text per envelope. */
export const TEXT_CHARS = KiB;
/**
 * Flow control: senders keep at most this many envelopes accepted-or-in-flight but not yet ACKed
 * (the receiver's mailbox bound), so they do not flood a full mailbox with refused sends.
 */
const WINDOW = maxRelayMailboxItems;
/** Back-off of a sender refused for mailbox capacity anyway (should stay rare). */
const CAPACITY_BACKOFF_MS = 2;
/** Watch wait of an idle receiver. */
const RECEIVER_WATCH_MS = 1_000;
/** A run that takes longer than this has stalled. */
const RUN_TIMEOUT_MS = 60_000;
const MICROS_PER_MS = 1_000;

export interface CycleRun {
  readonly client: "session" | "raw";
  /** The variant that ran (the hooks' `label`; "unsigned" without hooks). */
  readonly variant: string;
  /** Whether senders signed and the receiver verified each payload (the hooks' `signed`). */
  readonly signed: boolean;
  /** Whether senders sealed and the receiver opened each payload (the hooks' `sealed`). */
  readonly sealed: boolean;
  readonly envelopes: number;
  readonly seconds: number;
  readonly cyclesPerSecond: number;
  readonly requests: number;
  readonly capacityRefusals: number;
  readonly lost: number;
  readonly duplicates: number;
  readonly relayActiveItemsAfter: number;
  /** Received payloads that did not open or verify (runs with hooks; must be 0). */
  readonly verifyFailures: number;
  /** CPU per cycle of the bench process (all clients), µs. */
  readonly clientCpuUsPerCycle: number;
  /** CPU per cycle of the relay process (10 ms resolution over the run), µs; -1 when unreadable. */
  readonly relayCpuUsPerCycle: number;
}

/** Per-cycle work a run adds on both sides (the signed- and sealed-cycles comparisons). */
export interface CycleHooks {
  /** The variant's name (a comparison's field for its runs, e.g. "signed", "sealed"). */
  readonly label: string;
  /** Whether `prepare` signs and `check` verifies. */
  readonly signed: boolean;
  /** Whether `prepare` seals and `check` opens. */
  readonly sealed: boolean;
  /**
   * Runs on each envelope sender `senderIndex` is about to send: may add to its payload, or encode
   * the payload itself and return its text (sent in place of the envelope's `payload` object).
   */
  prepare(envelope: Record<string, unknown>, senderIndex: number): string | undefined;
  /** Runs on each received payload before its ACK; false counts a verify failure. */
  check(payload: unknown): boolean;
}

/**
 * The text of `envelope` with `payloadText` as its payload, spliced in as is (as the core's
 * envelope text splices `encodePayload`'s): the rest is serialized as `encodedForSend` does.
 */
function envelopeTextWith(envelope: Record<string, unknown>, payloadText: string): string {
  const rest = JSON.stringify({ ...envelope, payload: undefined });
  return `${rest.slice(0, -1)},"payload":${payloadText}}`;
}

export interface CyclesResult {
  readonly senders: number;
  readonly payloadBytes: number;
  readonly envelopeBytes: number;
  readonly session: CycleRun;
  readonly raw: CycleRun;
}

interface Client {
  readonly endpoint: TaskEndpoint;
  /** Sends `envelope`; with `payloadText`, that text is its payload (the object's `payload` is not sent). */
  send(envelope: Record<string, unknown> & { envelopeId: string }, payloadText?: string): Promise<void>;
  receive(cursor: string): Promise<{ deliveries: { cursor: string; envelopeId: string; payload: unknown }[]; nextCursor: string }>;
  acknowledge(envelopeId: string): Promise<void>;
  /** `ack-batch-v1` when the relay advertises it (ours does): one request for up to `maxAckBatchItems` ids. */
  acknowledgeBatch(envelopeIds: readonly string[]): Promise<void>;
  watch(cursor: string, waitMs: number): Promise<void>;
  requests(): number;
  close(): void;
}

class CapacityRefusal extends Error {}

async function sessionClient(url: string, role: string): Promise<Client> {
  const { session, endpoint } = await boundSession(url, role);
  let requests = 1;
  const wrap = async <T>(run: (s: VolatileTaskSession) => Promise<T>): Promise<T> => {
    requests += 1;
    try {
      return await run(session);
    } catch (error) {
      if (toTaskError(error).code === "RELAY_CAPACITY") throw new CapacityRefusal();
      throw error;
    }
  };
  return {
    endpoint,
    send: (envelope, payloadText) =>
      wrap((s) =>
        s.send(
          payloadText === undefined
            ? encodedForSend(envelope)
            : { envelopeId: envelope.envelopeId, text: envelopeTextWith(envelope, payloadText) },
        ),
      ).then(() => undefined),
    receive: (cursor) =>
      wrap((s) => s.receive(cursor, { limit: maxReceivePageItems })).then((page) => ({
        deliveries: page.deliveries.map((item) => ({ cursor: item.cursor, envelopeId: item.envelopeId, payload: item.envelope.payload })),
        nextCursor: page.nextCursor,
      })),
    acknowledge: (envelopeId) => wrap((s) => s.acknowledge(envelopeId)).then(() => undefined),
    acknowledgeBatch: (envelopeIds) => wrap((s) => s.acknowledgeBatch(envelopeIds)).then(() => undefined),
    watch: (cursor, waitMs) => wrap((s) => s.watch(cursor, waitMs)).then(() => undefined),
    requests: () => requests,
    close: () => session.close(),
  };
}

async function rawClient(url: string, role: string): Promise<Client> {
  const { base, endpoint } = await rawBinding(url, role);
  const target = `${url}${RELAY_ENDPOINT_PATH}`;
  let requests = 1;
  /** POSTs `fields` (and `envelopeText` as its `envelope`, spliced in as is). */
  async function post(fields: Record<string, unknown>, envelopeText?: string): Promise<Record<string, any>> {
    requests += 1;
    const fieldsText = JSON.stringify({ ...fields, ...base });
    const body = envelopeText === undefined ? fieldsText : `${fieldsText.slice(0, -1)},"envelope":${envelopeText}}`;
    const response = await fetch(target, { method: "POST", body, headers: { "content-type": "application/json" } });
    const reply = (await response.json()) as { ok: boolean; value: Record<string, any>; error?: { code: string } };
    if (reply.ok) return reply.value;
    if (reply.error?.code === "RELAY_CAPACITY") throw new CapacityRefusal();
    throw new Error(`relay refused ${String(fields.operation)}: ${JSON.stringify(reply.error)}`);
  }
  return {
    endpoint,
    send: (envelope, payloadText) =>
      (payloadText === undefined
        ? post({ operation: "send", envelope })
        : post({ operation: "send" }, envelopeTextWith(envelope, payloadText))
      ).then(() => undefined),
    receive: (cursor) =>
      post({ operation: "receive", cursor, limit: maxReceivePageItems }).then((value) => ({
        deliveries: (value.deliveries as { cursor: string; envelope: { envelopeId: string; payload: unknown } }[]).map((item) => ({
          cursor: item.cursor,
          envelopeId: item.envelope.envelopeId,
          payload: item.envelope.payload,
        })),
        nextCursor: value.nextCursor as string,
      })),
    acknowledge: (envelopeId) => post({ operation: "acknowledge", envelopeId }).then(() => undefined),
    acknowledgeBatch: (envelopeIds) => post({ operation: "acknowledge", envelopeIds }).then(() => undefined),
    watch: (cursor, waitMs) => post({ operation: "watch", cursor, waitMs }).then(() => undefined),
    requests: () => requests,
    close: () => undefined,
  };
}

export interface CycleOptions {
  readonly hooks?: CycleHooks;
  /** The relay process, for its CPU per cycle. */
  readonly relayPid?: number;
  /** The receiver's relay when it is another than the senders' (relays sharing a store). */
  readonly receiverUrl?: string;
  /** ACKs of a page the receiver sends at once (default: the whole page). */
  readonly ackLanes?: number;
  /** ACK each envelope on its own (a relay without `ack-batch-v1`) instead of one batch per page. */
  readonly singleAcks?: boolean;
}

/** What a run tallies while it goes; the first error of any sender stops the run. */
interface Tally {
  readonly accepted: Set<string>;
  readonly received: Map<string, number>;
  capacityRefusals: number;
  acknowledged: number;
  verifyFailures: number;
  failure: unknown;
}

/** The flow-control window: a slot per envelope from before its send until its ACK. */
interface Window {
  acquire(): Promise<void>;
  release(count: number): void;
}

function createWindow(size: number): Window {
  let open = size;
  const waiting: (() => void)[] = [];
  return {
    async acquire() {
      while (open === 0) await new Promise<void>((resolve) => waiting.push(resolve));
      open -= 1;
    },
    release(count) {
      open += count;
      for (const wake of waiting.splice(0)) wake();
    },
  };
}

/** What every sender sends: its envelopes' target and text, the hooks, the tally and the window. */
interface Sending {
  readonly target: TaskEndpoint;
  readonly text: string;
  readonly hooks: CycleHooks | undefined;
  readonly tally: Tally;
  readonly window: Window;
}

/** One sender's share of `total`, over SENDS_IN_FLIGHT lanes; a capacity refusal backs off and sends again. */
async function sendShare(sender: Client, senderIndex: number, quota: number, sending: Sending): Promise<void> {
  const { tally, window, hooks } = sending;
  let next = 0;
  const lanes = Array.from({ length: SENDS_IN_FLIGHT }, async () => {
    while (next < quota && tally.failure === undefined) {
      next += 1;
      await window.acquire();
      const envelope = envelopeWithText(sender.endpoint, sending.target, sending.text);
      const payloadText = hooks?.prepare(envelope, senderIndex);
      for (;;) {
        try {
          await sender.send(envelope, payloadText);
          tally.accepted.add(envelope.envelopeId);
          break;
        } catch (error) {
          if (!(error instanceof CapacityRefusal)) throw error;
          tally.capacityRefusals += 1;
          await Bun.sleep(CAPACITY_BACKOFF_MS);
        }
      }
    }
  });
  await Promise.all(lanes);
}

/** The receiver pages, checks each payload and acknowledges each page until all `total` are acknowledged. */
async function receiveAll(receiver: Client, total: number, options: CycleOptions, tally: Tally, window: Window, deadline: number) {
  const { hooks } = options;
  let cursor = "0";
  while (tally.acknowledged < total && tally.failure === undefined) {
    if (Date.now() > deadline) throw new Error(`envelope cycles stalled: ${tally.acknowledged}/${total} acknowledged`);
    const page = await receiver.receive(cursor);
    if (page.deliveries.length === 0) {
      await receiver.watch(cursor, RECEIVER_WATCH_MS);
      continue;
    }
    for (const delivery of page.deliveries) {
      tally.received.set(delivery.envelopeId, (tally.received.get(delivery.envelopeId) ?? 0) + 1);
      if (hooks !== undefined && !hooks.check(delivery.payload)) tally.verifyFailures += 1;
    }
    const ids = page.deliveries.map((delivery) => delivery.envelopeId);
    if (options.singleAcks === true) {
      const lanes = options.ackLanes ?? ids.length;
      for (let start = 0; start < ids.length; start += lanes)
        await Promise.all(ids.slice(start, start + lanes).map((id) => receiver.acknowledge(id)));
    } else {
      for (let start = 0; start < ids.length; start += maxAckBatchItems)
        await receiver.acknowledgeBatch(ids.slice(start, start + maxAckBatchItems));
    }
    tally.acknowledged += page.deliveries.length;
    window.release(page.deliveries.length);
    cursor = page.nextCursor;
  }
}

/** Time and CPU over a run: what `cycleRun` divides by the envelopes. */
interface RunCosts {
  readonly seconds: number;
  readonly requests: number;
  readonly clientCpuMs: number;
  readonly relayCpuMs: number | undefined;
}

/** The run's record from its tally: lost and duplicated ids, rate and CPU per cycle. */
function cycleRun(kind: CycleRun["client"], hooks: CycleHooks | undefined, total: number, tally: Tally, costs: RunCosts): CycleRun {
  const { accepted, received } = tally;
  const lost = [...accepted].filter((id) => !received.has(id)).length;
  const duplicates =
    [...received.values()].reduce((sum, count) => sum + (count - 1), 0) + [...received.keys()].filter((id) => !accepted.has(id)).length;
  const perCycleUs = (ms: number) => Math.round((ms * MICROS_PER_MS) / total);
  return {
    client: kind,
    variant: hooks?.label ?? "unsigned",
    signed: hooks?.signed === true,
    sealed: hooks?.sealed === true,
    envelopes: total,
    seconds: Math.round(costs.seconds * 1000) / 1000,
    cyclesPerSecond: Math.round(total / costs.seconds),
    requests: costs.requests,
    capacityRefusals: tally.capacityRefusals,
    lost,
    duplicates,
    relayActiveItemsAfter: -1,
    verifyFailures: tally.verifyFailures,
    clientCpuUsPerCycle: perCycleUs(costs.clientCpuMs),
    relayCpuUsPerCycle: costs.relayCpuMs === undefined ? -1 : perCycleUs(costs.relayCpuMs),
  };
}

export async function runCycles(url: string, kind: "session" | "raw", total: number, options: CycleOptions = {}): Promise<CycleRun> {
  const { hooks, relayPid } = options;
  const make = kind === "session" ? sessionClient : rawClient;
  const receiver = await make(options.receiverUrl ?? url, "cycle-receiver");
  const senders = await Promise.all(Array.from({ length: SENDERS }, (_, index) => make(url, `cycle-sender-${index}`)));
  const text = filler(TEXT_CHARS);
  const tally: Tally = {
    accepted: new Set(),
    received: new Map(),
    capacityRefusals: 0,
    acknowledged: 0,
    verifyFailures: 0,
    failure: undefined,
  };
  const relayCpuAtStart = relayPid === undefined ? undefined : childCpuMs(relayPid);
  const cpuAtStart = ownCpuMs();
  const started = now();
  const deadline = Date.now() + RUN_TIMEOUT_MS;
  // The window: at most one mailbox of envelopes sent but not yet acknowledged.
  const sending: Sending = { target: receiver.endpoint, text, hooks, tally, window: createWindow(WINDOW) };
  const perSender = Math.ceil(total / SENDERS);
  const shares = senders.map((sender, senderIndex) =>
    sendShare(sender, senderIndex, Math.min(perSender, total - senderIndex * perSender), sending),
  );
  const sent = Promise.all(shares).catch((error) => {
    tally.failure = error;
  });
  await receiveAll(receiver, total, options, tally, sending.window, deadline);
  const seconds = (now() - started) / 1000;
  const clientCpuMs = ownCpuMs() - cpuAtStart;
  const relayCpuAtEnd = relayPid === undefined ? undefined : childCpuMs(relayPid);
  const relayCpuMs = relayCpuAtStart === undefined || relayCpuAtEnd === undefined ? undefined : relayCpuAtEnd - relayCpuAtStart;
  await sent;
  if (tally.failure !== undefined) throw tally.failure;
  const clients = [receiver, ...senders];
  const requests = clients.reduce((sum, client) => sum + client.requests(), 0);
  for (const client of clients) client.close();
  return cycleRun(kind, hooks, total, tally, { seconds, requests, clientCpuMs, relayCpuMs });
}

export async function activeItems(url: string): Promise<number> {
  const { session } = await boundSession(url, "cycle-health");
  try {
    return Number((await session.health()).activeItems);
  } finally {
    session.close();
  }
}

/** Runs on a fresh relay: a relay keeps a dedupe receipt per accepted envelope for 15 minutes. */
export async function onFreshRelay(kind: "session" | "raw", total: number, warmup: number, hooks?: CycleHooks): Promise<CycleRun> {
  const relay = await startRelayProcess();
  try {
    await runCycles(relay.url, kind, warmup, { hooks });
    const run = await runCycles(relay.url, kind, total, { hooks, relayPid: relay.process.pid });
    return { ...run, relayActiveItemsAfter: await activeItems(relay.url) };
  } finally {
    await relay.stop().catch(() => undefined);
  }
}

export async function measureCycles(options: { quick?: boolean } = {}): Promise<CyclesResult> {
  const quick = options.quick === true;
  const total = quick ? QUICK_ENVELOPES : ENVELOPES;
  const warmup = quick ? QUICK_WARMUP_ENVELOPES : WARMUP_ENVELOPES;
  const session = await onFreshRelay("session", total, warmup);
  const raw = await onFreshRelay("raw", total, warmup);
  const sample = envelopeWithText({ relay: "r", id: crypto.randomUUID() }, { relay: "r", id: crypto.randomUUID() }, filler(TEXT_CHARS));
  return { senders: SENDERS, payloadBytes: canonicalSize(sample.payload), envelopeBytes: canonicalSize(sample), session, raw };
}
