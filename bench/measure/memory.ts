/**
 * Relay memory per queued 1 KiB envelope: an in-process relay (`startRelayServer`), JS heap after a
 * full synchronous GC before and after queueing envelopes (unacknowledged) spread over several
 * target mailboxes (each mailbox holds at most `maxRelayMailboxItems`), sent by enough sources that
 * each stays within its fair share of a mailbox (`maxRelaySenderMailboxItems`, quotas-v1; the
 * sources are registered before the first heap reading). Requests are handed to the
 * relay engine as the HTTP layer does (the body text parsed with `JSON.parse`), without sockets, so
 * the heap holds only what the relay keeps: the canonical envelope text, the one object that is
 * its mailbox item and its dedupe receipt, and their index entries. Median of a few trials on fresh relays.
 */
import { heapStats } from "bun:jsc";
import { KiB, maxRelayActiveItems, maxRelayMailboxItems, maxRelaySenderMailboxItems } from "../../src/protocol/limits.ts";
import { RELAY_PROFILE, WIRE_PROTOCOL_VERSION } from "../../src/protocol/names.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import { startRelayServer } from "../../src/relay-server/server.ts";
import { round } from "../lib/stats.ts";
import { benchName } from "../lib/wire.ts";

export const TARGETS = 16;
/** Envelopes per target mailbox (16 × 250 = 4,000, under the relay's 4,096 active items). */
export const PER_TARGET = 250;
export const QUICK_TARGETS = 2;
/**
 * A quick run's mailboxes are as full as a full run's: with 50 each, the heap's noise between two
 * collections (the rest of the bench process) once outweighed 100 envelopes (a negative figure).
 */
export const QUICK_PER_TARGET = PER_TARGET;
const TRIALS = 3;
const QUICK_TRIALS = 1;
const TEXT_CHARS = KiB;

export interface MemoryResult {
  readonly envelopes: number;
  readonly trials: number;
  readonly bytesPerEnvelope: number;
  readonly trialBytesPerEnvelope: readonly number[];
  /** Canonical bytes of one envelope (what the relay's budgets charge). */
  readonly encodedBytesPerEnvelope: number;
  readonly heapBeforeBytes: number;
  readonly heapAfterBytes: number;
}

/** Settles between collections, so native objects' finalizers (hashes among them) have run. */
const GC_SETTLE_MS = 20;

/** The JS heap after full collections (and their finalizers). */
export async function heapAfterGc(): Promise<number> {
  Bun.gc(true);
  await Bun.sleep(GC_SETTLE_MS);
  Bun.gc(true);
  await Bun.sleep(GC_SETTLE_MS);
  Bun.gc(true);
  return heapStats().heapSize;
}

interface Handle {
  readonly engine: Awaited<ReturnType<typeof startRelayServer>>["engine"];
}

async function connect(relay: Handle, role: string): Promise<{ session: string; endpoint: TaskEndpoint }> {
  const session = benchName(role);
  const result = await relay.engine.handle("connect", {
    operation: "connect",
    profile: RELAY_PROFILE,
    callerSession: session,
    generation: crypto.randomUUID(),
    protocolVersions: [WIRE_PROTOCOL_VERSION],
  });
  const value = (result as { value: { endpoint: TaskEndpoint } }).value;
  return { session, endpoint: value.endpoint };
}

/** A relay's registered source and target mailboxes, and the queueing of envelopes into them. */
export interface MemoryWorkload {
  /** Sends `targets × perTarget` envelopes with a 1 KiB text, round robin over the targets; resolves with the count. */
  queue(): Promise<number>;
}

/**
 * Registers `targets` sinks and enough sources on the relay, then (`queue`) sends to them through
 * its engine: each source sends to one sink only, at most its share of that mailbox.
 */
export async function memoryWorkload(
  relay: Handle & { readonly epoch: string },
  targets: number,
  perTarget: number,
): Promise<MemoryWorkload> {
  const sourcesPerTarget = Math.ceil(perTarget / maxRelaySenderMailboxItems);
  const sources: Awaited<ReturnType<typeof connect>>[] = [];
  for (let index = 0; index < targets * sourcesPerTarget; index += 1) sources.push(await connect(relay, `memory-source-${index}`));
  const sinks: TaskEndpoint[] = [];
  for (let index = 0; index < targets; index += 1) sinks.push((await connect(relay, `memory-sink-${index}`)).endpoint);
  return {
    async queue() {
      const total = targets * perTarget;
      for (let index = 0; index < total; index += 1) {
        // Round robin over the sinks, as before; each sink's sources take its envelopes in turn.
        const target = index % targets;
        const source = sources[target * sourcesPerTarget + (Math.floor(index / targets) % sourcesPerTarget)]!;
        const taskId = crypto.randomUUID();
        const text = `${index}:`.padEnd(TEXT_CHARS, "x");
        const body = JSON.stringify({
          operation: "send",
          profile: RELAY_PROFILE,
          epoch: relay.epoch,
          callerSession: source.session,
          endpoint: source.endpoint,
          envelope: {
            envelopeId: crypto.randomUUID(),
            protocolVersion: WIRE_PROTOCOL_VERSION,
            source: source.endpoint,
            target: sinks[target]!,
            payload: { taskId, kind: "canonical_event", payload: { taskId, type: "task.information", message: text } },
            createdAt: new Date().toISOString(),
          },
        });
        await relay.engine.handle("send", JSON.parse(body) as Record<string, unknown>);
      }
      return total;
    },
  };
}

async function trial(targets: number, perTarget: number): Promise<{ perEnvelope: number; encoded: number; before: number; after: number }> {
  const relay = await startRelayServer({ port: 0 });
  try {
    const workload = await memoryWorkload(relay, targets, perTarget);
    const before = await heapAfterGc();
    const total = await workload.queue();
    const after = await heapAfterGc();
    const usage = await relay.engine.usage();
    if (usage.activeItems !== total) throw new Error(`memory: ${usage.activeItems} of ${total} envelopes queued`);
    return { perEnvelope: (after - before) / total, encoded: usage.activeBytes / total, before, after };
  } finally {
    await relay.stop();
  }
}

export async function measureMemory(options: { quick?: boolean } = {}): Promise<MemoryResult> {
  const quick = options.quick === true;
  const targets = quick ? QUICK_TARGETS : TARGETS;
  const perTarget = Math.min(quick ? QUICK_PER_TARGET : PER_TARGET, maxRelayMailboxItems);
  if (targets * perTarget > maxRelayActiveItems) throw new Error("memory: workload exceeds the relay's active-item budget");
  const trials = quick ? QUICK_TRIALS : TRIALS;
  // One untimed warm-up trial: JIT tiers and lazily built structures are not per-envelope memory.
  await trial(2, 20);
  const results = [];
  for (let index = 0; index < trials; index += 1) results.push(await trial(targets, perTarget));
  const sorted = [...results].sort((a, b) => a.perEnvelope - b.perEnvelope);
  const median = sorted[Math.floor(sorted.length / 2)]!;
  return {
    envelopes: targets * perTarget,
    trials,
    bytesPerEnvelope: Math.round(median.perEnvelope),
    trialBytesPerEnvelope: results.map((result) => Math.round(result.perEnvelope)),
    encodedBytesPerEnvelope: round(median.encoded, 0),
    heapBeforeBytes: median.before,
    heapAfterBytes: median.after,
  };
}
