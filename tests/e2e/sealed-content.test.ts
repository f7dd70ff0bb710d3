/**
 * Sealed end to end, looked for where a relay keeps things: a secret planted in a task's text, a
 * question, an answer and a result must be in none of the relay process's memory (a V8 heap
 * snapshot of the real relay on Node, taken while each piece is queued at the relay), every key
 * and value of the Redis a relay keeps its state in (read while each piece is queued), and the
 * relays' logs.
 *
 * Each search proves it can find what is there: the sessions' names (which the relay holds in the
 * clear) and a marker sent in the clear (an unsigned envelope, queued beside the task mail) are
 * found in the same snapshots and the same Redis.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { encodeEnvelope } from "../../src/core/envelopes.ts";
import { coreInternals } from "../../src/core/task-core.ts";
import type { TrustOptions } from "../../src/core/trust.ts";
import { generateIdentity, type Identity } from "../../src/trust/keys.ts";
import { eventually } from "../../testkit/async.ts";
import { introduce } from "../../testkit/introduce.ts";
import { closeParties, createParty, type Party } from "../../testkit/party.ts";
import { REDIS_BINARY, REDIS_PACKAGE, type RedisProcess, startRedis } from "../../testkit/redis-process.ts";
import { type RelayProcess, startRelayProcess } from "../../testkit/relay-process.ts";
import { CLI_BUNDLE } from "../../src/host/runtime.ts";
import { NODE_BINARY } from "../helpers/host-kit.ts";
import { describeWithPackage } from "../helpers/requires-package.ts";

setDefaultTimeout(60_000);

/** How long a heap snapshot may take to be written (a relay of a few MB takes well under a second). */
const SNAPSHOT_TIMEOUT_MS = 20_000;
const SNAPSHOT_POLL_MS = 50;

const SECRET = `sealed-secret-${crypto.randomUUID()}`;
const PIECES = {
  task: `${SECRET}-in-the-task`,
  question: `${SECRET}-in-a-question`,
  answer: `${SECRET}-in-an-answer`,
  result: `${SECRET}-in-the-result`,
} as const;
const CLEAR_MARKER = `clear-marker-${crypto.randomUUID()}`;

function trustOf(identity: Identity, peers: Record<string, Identity>): TrustOptions {
  return { identity, peerName: (key) => Object.entries(peers).find(([, peer]) => peer.publicKey === key)?.[0] };
}

interface Pair {
  readonly origin: Party;
  readonly worker: Party;
}

/** Two users paired both ways, the origin introduced to the worker (names carry a findable canary). */
async function pairOn(url: string, canary: string): Promise<Pair> {
  const a = generateIdentity().identity;
  const b = generateIdentity().identity;
  const origin = await createParty({ url, name: `${canary}-origin`, trust: trustOf(a, { worker: b }) });
  const worker = await createParty({ url, name: `${canary}-worker`, trust: trustOf(b, { origin: a }) });
  await introduce(origin.core, worker.core);
  return { origin, worker };
}

/** An unsigned, clear envelope carrying the marker, queued in the worker's mailbox (the search's control). */
async function queueClearMarker(pair: Pair): Promise<void> {
  const from = pair.origin.core.endpoint()!;
  const to = pair.worker.core.endpoint()!;
  const taskId = crypto.randomUUID();
  const intent = { intentId: crypto.randomUUID(), taskId, type: "task.information", payload: { message: CLEAR_MARKER } };
  await coreInternals(pair.origin.core).session.send(encodeEnvelope(from, to, taskId, "intent", intent as never, Date.now()));
}

/**
 * Walks one task through the four pieces; `inspect(piece)` runs while that piece is queued at the
 * relay (sent, not yet received by its reader).
 */
async function walk(pair: Pair, inspect: (piece: keyof typeof PIECES) => Promise<void>): Promise<void> {
  const { origin, worker } = pair;
  const created = await origin.core.createTask({ to: worker.core.endpoint()!, task: `Please do this: ${PIECES.task}` });
  expect(created.delivery).toBe("accepted");
  await inspect("task");
  await worker.core.refresh();
  await worker.core.message({ taskId: created.taskId, type: "question", message: PIECES.question });
  await inspect("question");
  await origin.core.refresh();
  const question = origin.core.getTask(created.taskId).events.find((event) => event.type === "task.question")!;
  await origin.core.message({ taskId: created.taskId, type: "answer", message: PIECES.answer, inReplyTo: question.eventId });
  await inspect("answer");
  await worker.core.refresh();
  await worker.core.done({ taskId: created.taskId, status: "completed", summary: "done", result: { note: PIECES.result } });
  await inspect("result");
  await origin.core.refresh();
  // The walk really happened: each side read what the other wrote.
  const seen = JSON.stringify(origin.core.getTask(created.taskId).events);
  expect(origin.core.getTask(created.taskId).status).toBe("completed");
  for (const piece of Object.values(PIECES)) expect(seen).toContain(piece);
}

function expectNoSecret(where: string, text: string): void {
  expect({ where, secret: text.includes(SECRET) }).toEqual({ where, secret: false });
}

// -------------------------------------------------------------------------------------------------

describe("the relay's memory (a heap snapshot of the real relay on Node)", () => {
  let relay: RelayProcess;
  let snapshots: string;
  let pair: Pair | undefined;

  beforeAll(async () => {
    snapshots = mkdtempSync(join(tmpdir(), "pi-tasks-heap-"));
    relay = await startRelayProcess({
      command: [NODE_BINARY, "--heapsnapshot-signal=SIGUSR2", `--diagnostic-dir=${snapshots}`, CLI_BUNDLE],
    });
  });

  afterAll(async () => {
    if (pair !== undefined) await closeParties([pair.origin, pair.worker]);
    await relay?.stop();
    rmSync(snapshots, { recursive: true, force: true });
  });

  /** Signals the relay for a snapshot and reads it once written (the relay answers again only after). */
  async function snapshot(): Promise<string> {
    const before = new Set(readdirSync(snapshots));
    relay.process.kill("SIGUSR2");
    const file = await eventually(
      () => readdirSync(snapshots).find((name) => name.endsWith(".heapsnapshot") && !before.has(name)),
      SNAPSHOT_TIMEOUT_MS,
      SNAPSHOT_POLL_MS,
    );
    if (file === undefined) throw new Error(`no heap snapshot within ${SNAPSHOT_TIMEOUT_MS} ms`);
    // Node writes the snapshot on its main thread: once the relay answers a request, it is complete.
    await fetch(`${relay.url}/api/task-relay/profile`);
    const path = join(snapshots, file);
    const size = statSync(path).size;
    expect(size).toBeGreaterThan(0);
    const text = readFileSync(path, "utf8");
    rmSync(path);
    return text;
  }

  test("no piece of the task is in the relay's memory while it is queued there; the names and a clear marker are", async () => {
    const canary = `heap-canary-${crypto.randomUUID().slice(0, 8)}`;
    pair = await pairOn(relay.url, canary);
    await queueClearMarker(pair);
    const inspected: string[] = [];
    await walk(pair, async (piece) => {
      const heap = await snapshot();
      expectNoSecret(`relay heap, ${piece} queued`, heap);
      // Controls: what the relay holds in the clear is findable in the same snapshot.
      expect(heap).toContain(`${canary}-worker`);
      if (piece === "task") expect(heap).toContain(CLEAR_MARKER);
      inspected.push(piece);
    });
    expect(inspected).toEqual(Object.keys(PIECES));
    expectNoSecret("relay log", relay.stderr());
  });
});

describeWithPackage("the Redis a relay keeps its state in", REDIS_BINARY, REDIS_PACKAGE, () => {
  let redis: RedisProcess;
  let relay: RelayProcess;
  let pair: Pair | undefined;

  beforeAll(async () => {
    redis = await startRedis();
    relay = await startRelayProcess({ args: ["--store", redis.url] });
  });

  afterAll(async () => {
    if (pair !== undefined) await closeParties([pair.origin, pair.worker]);
    await relay?.stop();
    await redis?.stop();
  });

  /** Every key and every value in the Redis, as text. */
  async function everything(): Promise<string> {
    const keys = (await redis.command("KEYS", ["*"])) as string[];
    const parts: string[] = [];
    for (const key of keys) {
      const type = String(await redis.command("TYPE", [key]));
      const read: Record<string, [string, string[]]> = {
        string: ["GET", [key]],
        hash: ["HGETALL", [key]],
        list: ["LRANGE", [key, "0", "-1"]],
        set: ["SMEMBERS", [key]],
        zset: ["ZRANGE", [key, "0", "-1", "WITHSCORES"]],
        stream: ["XRANGE", [key, "-", "+"]],
      };
      const command = read[type];
      if (command === undefined) throw new Error(`a Redis key of an unexpected type: ${key} (${type})`);
      parts.push(key, JSON.stringify(await redis.command(command[0], command[1])));
    }
    return parts.join("\n");
  }

  test("no piece of the task is in any Redis key or value while it is queued there; the names and a clear marker are", async () => {
    const canary = `redis-canary-${crypto.randomUUID().slice(0, 8)}`;
    pair = await pairOn(relay.url, canary);
    await queueClearMarker(pair);
    const inspected: string[] = [];
    await walk(pair, async (piece) => {
      const state = await everything();
      expectNoSecret(`Redis, ${piece} queued`, state);
      expect(state).toContain(`${canary}-worker`);
      if (piece === "task") expect(state).toContain(CLEAR_MARKER);
      inspected.push(piece);
    });
    expect(inspected).toEqual(Object.keys(PIECES));
    expectNoSecret("relay log", relay.stderr());
  });
});
