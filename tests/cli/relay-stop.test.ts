/**
 * What `pi-tasks relay stop` and `pi-tasks kill` may signal, at the level of the checks themselves,
 * without signalling any real process: `process.kill` is replaced, for the length of one test, by a
 * simulated process table (`withFakeProcesses`): a pid in it is alive until a signal it obeys ends
 * it; every other pid does not exist (ESRCH); every call is recorded. The waits of stop.ts run on
 * Bun's fake clock, so its `processExitConfirmMs` passes at once.
 *
 * - `stopEmbeddedRelay` (src/host/embedded-relay.ts) signals the recorded pid only after what answers
 *   at the record's URL proves the recorded instance nonce for this call's challenge, as that pid;
 *   a forged, replayed or missing proof, another pid, or a record from before instance proofs
 *   signals nothing, removes the record and fails with RELAY_RECORD_STALE; a record whose process is
 *   gone is nothing to stop (`relay stop`: SESSION_NOT_OWNED).
 * - The relay's instance route (src/relay-server/relay-auth.ts) answers only a well-formed challenge,
 *   only on a relay with an instance nonce, with no token needed.
 * - `stopProcess` / `stopPids` / `stopOwnedWorkers` (src/host/stop.ts): SIGTERM to the holder only,
 *   done once holder and Pi are both gone, SIGKILL only after `processExitConfirmMs`, a record kept
 *   while a process outlives that; a Pi pid file naming no process adds nothing to signal.
 */
import { describe, expect, jest, setDefaultTimeout, spyOn, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { raised } from "../../testkit/async.ts";
import { type EmbeddedRelayRecord, stopEmbeddedRelay } from "../../src/host/embedded-relay.ts";
import { relayCommand } from "../../src/cli/relay.ts";
import { listSpawned, loadSpawned, piPidFile, type SpawnedWorker, saveSpawned } from "../../src/host/spawned.ts";
import { stopOwnedWorkers, stopProcess } from "../../src/host/stop.ts";
import { instanceProof, isChallenge, newChallenge } from "../../src/protocol/jwt.ts";
import { relayInstanceBytes, processExitConfirmMs, workerReadinessPollMs } from "../../src/protocol/limits.ts";
import { RELAY_CHALLENGE_HEADER, RELAY_INSTANCE_PATH, RELAY_PROFILE } from "../../src/protocol/names.ts";
import { createRelayAuth } from "../../src/relay-server/relay-auth.ts";
import { useCleanups } from "../helpers/cleanups.ts";

// The simulated process table "spawns" many fake processes in a loop (regression #24 counts them as real ones).
setDefaultTimeout(30_000);

const cleanups = useCleanups();

// ---------------------------------------------------------------------------------------------
// A simulated process table behind process.kill
// ---------------------------------------------------------------------------------------------

/** Pids far above any pid_max: even a defect that reached the real kill(2) would find no process. */
const FIRST_FAKE_PID = 1_000_000_001;

interface FakeProcess {
  /** Ends on SIGTERM (true), or ignores it. */
  readonly obeysTerm: boolean;
  /** Ends on SIGKILL (true), or outlives it (what a process stuck in the kernel does). */
  readonly obeysKill: boolean;
  /** Ends on its own this many liveness checks after `follows` ended (a Pi whose holder closed its stdin). */
  readonly follows?: { readonly pid: number; checks: number };
  alive: boolean;
}

interface SentSignal {
  readonly pid: number;
  readonly signal: string | number;
  /** The (fake) clock when it was sent. */
  readonly at: number;
}

interface FakeProcesses {
  /** Adds a live process; its pid. */
  spawn(behaviour?: Partial<Omit<FakeProcess, "alive">>): number;
  alive(pid: number): boolean;
  /** Every call but the liveness checks (signal 0). */
  readonly signals: SentSignal[];
  /** Every pid anything was asked about, liveness checks included. */
  readonly asked: Set<number>;
}

function esrch(pid: number): Error {
  return Object.assign(new Error(`kill ${pid}: ESRCH`), { code: "ESRCH" });
}

/** Runs `body` with process.kill replaced by a simulated process table; the real one afterwards. */
async function withFakeProcesses<T>(body: (table: FakeProcesses) => Promise<T>): Promise<T> {
  const table = new Map<number, FakeProcess>();
  const signals: SentSignal[] = [];
  const asked = new Set<number>();
  let next = FIRST_FAKE_PID;
  const spy = spyOn(process, "kill").mockImplementation((pid: number, signal?: string | number) => {
    asked.add(pid);
    const entry = table.get(pid);
    if (signal !== 0) signals.push({ pid, signal: signal ?? "SIGTERM", at: Date.now() });
    if (entry?.follows !== undefined && entry.alive && !table.get(entry.follows.pid)?.alive) {
      entry.follows.checks -= 1;
      if (entry.follows.checks < 0) entry.alive = false;
    }
    if (entry === undefined || !entry.alive) throw esrch(pid);
    if ((signal === "SIGTERM" && entry.obeysTerm) || (signal === "SIGKILL" && entry.obeysKill)) entry.alive = false;
    return true;
  });
  try {
    return await body({
      spawn(behaviour = {}) {
        const pid = next++;
        const { follows, ...rest } = behaviour;
        table.set(pid, {
          obeysTerm: true,
          obeysKill: true,
          ...rest,
          ...(follows === undefined ? {} : { follows: { ...follows } }),
          alive: true,
        });
        return pid;
      },
      alive: (pid) => table.get(pid)?.alive === true,
      signals,
      asked,
    });
  } finally {
    spy.mockRestore();
  }
}

/**
 * Runs `work` on Bun's fake clock, a poll interval at a time, until it settles: stop.ts's waits
 * (`processExitConfirmMs`, twice) pass without waiting.
 */
async function onFakeClock<T>(work: () => Promise<T>): Promise<T> {
  jest.useFakeTimers();
  try {
    let settled = false;
    const running = work().finally(() => {
      settled = true;
    });
    running.catch(() => undefined);
    const limit = (4 * processExitConfirmMs) / workerReadinessPollMs;
    for (let step = 0; !settled && step < limit; step += 1) {
      for (let turn = 0; turn < 20 && !settled; turn += 1) await Promise.resolve();
      if (!settled) jest.advanceTimersByTime(workerReadinessPollMs);
    }
    return await running;
  } finally {
    jest.useRealTimers();
  }
}

function home(): { PI_TASKS_HOME: string } {
  const dir = mkdtempSync(join(tmpdir(), "pi-tasks-stop-home-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return { PI_TASKS_HOME: dir };
}

// ---------------------------------------------------------------------------------------------
// relay stop
// ---------------------------------------------------------------------------------------------

const PORT = 18_790;
const RELAY_URL = `http://127.0.0.1:${PORT}`;
/** A fresh instance nonce (two are never alike: a forged proof made with another one never verifies). */
const nonce = () => randomBytes(relayInstanceBytes).toString("base64url");

function recordPath(env: { PI_TASKS_HOME: string }): string {
  return join(env.PI_TASKS_HOME, "relays", `${PORT}.json`);
}

/** The record `pi-tasks relay stop` reads: the embedded relay on PORT as `pid`, with `instance`. */
function writeRecord(env: { PI_TASKS_HOME: string }, pid: number, instance: string | undefined): void {
  mkdirSync(join(env.PI_TASKS_HOME, "relays"), { recursive: true, mode: 0o700 });
  const record: EmbeddedRelayRecord = {
    pid,
    port: PORT,
    url: RELAY_URL,
    log: join(env.PI_TASKS_HOME, "relays", `${PORT}.log`),
    startedAt: new Date(0).toISOString(),
    startedBy: 1,
    ...(instance === undefined ? {} : { instance }),
  };
  writeFileSync(recordPath(env), JSON.stringify(record), { mode: 0o600 });
}

/** What answers at the relay's URL: `answer(challenge)` as JSON, each request recorded. */
function answering(answer: (challenge: string | null) => unknown) {
  const requests: { url: string; challenge: string | null }[] = [];
  const fetcher = (async (input: string | URL | Request, init?: RequestInit) => {
    const challenge = new Headers(init?.headers).get(RELAY_CHALLENGE_HEADER);
    requests.push({ url: String(input), challenge });
    const body = answer(challenge);
    return new Response(typeof body === "string" ? body : JSON.stringify(body), { headers: { "content-type": "application/json" } });
  }) as unknown as typeof fetch;
  return { fetcher, requests };
}

/** An instance route's answer as a relay holding `instance` and running as `pid` gives it. */
const provenAnswer = (instance: string, pid: number) => (challenge: string | null) => ({
  ok: true,
  profile: RELAY_PROFILE,
  epoch: "epoch-1",
  pid,
  proof: instanceProof(instance, challenge!, pid),
});

/** The stop's outcome: `{ value }`, or the failure's code and reason. */
async function stopOutcome(env: { PI_TASKS_HOME: string }, fetcher: typeof fetch) {
  return stopEmbeddedRelay(env, PORT, fetcher).then(
    (value) => ({ value }),
    (error: { code?: string; details?: { reason?: string } }) => ({ code: error.code, reason: error.details?.reason }),
  );
}

describe("pi-tasks relay stop signals only the relay whose instance proof verifies (stopEmbeddedRelay)", () => {
  test("a valid proof of the recorded instance, as the recorded pid: that pid gets SIGTERM and is gone, the record removed", async () => {
    // embedded-relay.ts stopEmbeddedRelay → instanceProven: the proof verifies, so stopPids signals.
    const env = home();
    const instance = nonce();
    await withFakeProcesses(async (processes) => {
      const relay = processes.spawn();
      writeRecord(env, relay, instance);
      const { fetcher, requests } = answering(provenAnswer(instance, relay));
      expect(await stopOutcome(env, fetcher)).toEqual({ value: { stopped: true, pid: relay } });
      expect(processes.signals).toEqual([{ pid: relay, signal: "SIGTERM", at: expect.any(Number) }]);
      expect(processes.alive(relay)).toBe(false);
      // Asked once, at the record's URL, with a fresh, well-formed challenge.
      expect(requests).toHaveLength(1);
      expect(requests[0]!.url).toBe(`${RELAY_URL}${RELAY_INSTANCE_PATH}`);
      expect(isChallenge(requests[0]!.challenge)).toBe(true);
    });
    expect(existsSync(recordPath(env))).toBe(false);
  });

  test("a forged proof (made without the instance nonce): no signal is sent, RELAY_RECORD_STALE, the record removed", async () => {
    // instanceProven: `proofMatches(instanceProof(instance, challenge, body.pid), body.proof)`.
    const env = home();
    await withFakeProcesses(async (processes) => {
      const relay = processes.spawn();
      writeRecord(env, relay, nonce());
      const { fetcher } = answering(provenAnswer(nonce(), relay));
      expect(await stopOutcome(env, fetcher)).toEqual({
        code: "RELAY_RECORD_STALE",
        reason: `the relay at ${RELAY_URL} is not the instance the record names`,
      });
      expect(processes.signals).toEqual([]);
      expect(processes.alive(relay)).toBe(true);
    });
    expect(existsSync(recordPath(env))).toBe(false);
  });

  test("a proof replayed from another challenge, right nonce and pid: no signal is sent", async () => {
    // instanceProven: the proof must answer this call's own challenge.
    const env = home();
    const instance = nonce();
    const earlier = newChallenge();
    await withFakeProcesses(async (processes) => {
      const relay = processes.spawn();
      writeRecord(env, relay, instance);
      const { fetcher } = answering(() => provenAnswer(instance, relay)(earlier));
      expect(await stopOutcome(env, fetcher)).toMatchObject({ code: "RELAY_RECORD_STALE" });
      expect(processes.signals).toEqual([]);
      expect(processes.alive(relay)).toBe(true);
    });
  });

  test("the relay's own answer (relay-auth) verifies, but it runs as another pid than the record's: no signal is sent", async () => {
    // instanceProven: `body.pid !== pid` — the relay on the port is that instance, the recorded pid is something else.
    const env = home();
    const instance = nonce();
    const auth = createRelayAuth({ env: {}, instance });
    await withFakeProcesses(async (processes) => {
      const stranger = processes.spawn();
      writeRecord(env, stranger, instance);
      const { fetcher } = answering((challenge) => auth.instance(new Headers({ [RELAY_CHALLENGE_HEADER]: challenge! }), "epoch-1"));
      expect(await stopOutcome(env, fetcher)).toEqual({
        code: "RELAY_RECORD_STALE",
        reason: `the relay at ${RELAY_URL} (that instance) runs as pid ${process.pid}`,
      });
      expect(processes.signals).toEqual([]);
      expect(processes.alive(stranger)).toBe(true);
    });
  });

  test("a record from before instance proofs: no signal is sent, and the relay is not even asked", async () => {
    // stopEmbeddedRelay: `record.instance === undefined` → "the record predates instance proofs".
    const env = home();
    await withFakeProcesses(async (processes) => {
      const relay = processes.spawn();
      writeRecord(env, relay, undefined);
      const { fetcher, requests } = answering(provenAnswer(nonce(), relay));
      expect(await stopOutcome(env, fetcher)).toEqual({ code: "RELAY_RECORD_STALE", reason: "the record predates instance proofs" });
      expect(requests).toEqual([]);
      expect(processes.signals).toEqual([]);
    });
    expect(existsSync(recordPath(env))).toBe(false);
  });

  test("an answer that proves nothing (not JSON, not ok, no pid, no proof) or no answer at all: no signal is sent", async () => {
    // instanceProven: the answer's shape (`body.ok === true`, a numeric pid, a string proof), and a failed request.
    const instance = nonce();
    // Each otherwise a valid proof of the recorded instance and pid.
    const answers: ((relay: number) => (challenge: string | null) => unknown)[] = [
      () => () => "not json",
      (relay) => (challenge) => ({ ...provenAnswer(instance, relay)(challenge), ok: false }),
      (relay) => (challenge) => ({ ...provenAnswer(instance, relay)(challenge), pid: String(relay) }),
      (relay) => (challenge) => ({ ...provenAnswer(instance, relay)(challenge), proof: undefined }),
      () => () => {
        throw new TypeError("connection refused");
      },
    ];
    for (const answer of answers) {
      const env = home();
      await withFakeProcesses(async (processes) => {
        const relay = processes.spawn();
        writeRecord(env, relay, instance);
        const { fetcher } = answering(answer(relay));
        expect(await stopOutcome(env, fetcher)).toMatchObject({ code: "RELAY_RECORD_STALE" });
        expect(processes.signals).toEqual([]);
        expect(processes.alive(relay)).toBe(true);
      });
      expect(existsSync(recordPath(env))).toBe(false);
    }
  });

  test("a record whose process is gone is nothing to stop: the relay is not asked, the record removed; `relay stop` says SESSION_NOT_OWNED", async () => {
    // stopEmbeddedRelay: `record === undefined || !isAlive(record.pid)` → `{ stopped: false }`; relay.ts stopCommand: `!result.stopped`.
    const env = home();
    const instance = nonce();
    await withFakeProcesses(async (processes) => {
      const gone = processes.spawn({ obeysTerm: true });
      process.kill(gone, "SIGTERM");
      processes.signals.length = 0;
      writeRecord(env, gone, instance);
      const { fetcher, requests } = answering(provenAnswer(instance, gone));
      expect(await stopOutcome(env, fetcher)).toEqual({ value: { stopped: false } });
      expect(requests).toEqual([]);
      expect(processes.signals).toEqual([]);
      expect(existsSync(recordPath(env))).toBe(false);
      // The command: no record any more, nothing stopped — it says so, and signals nothing.
      const { error } = await raised(() => relayCommand(["stop", "--port", String(PORT)], { stdout: () => undefined, env }));
      expect(error.code).toBe("SESSION_NOT_OWNED");
      expect(error.details).toEqual({ port: PORT });
      expect(processes.signals).toEqual([]);
    });
  });
});

// ---------------------------------------------------------------------------------------------
// The relay's instance route
// ---------------------------------------------------------------------------------------------

describe("the relay's instance route (relay-auth.ts): the other half of the proof relay stop checks", () => {
  const secret = new Uint8Array(32).fill(7);

  test("answers a well-formed challenge with its pid and a proof keyed with its nonce; anything else is INVALID_REQUEST", async () => {
    // relay-auth.ts instance(): `instanceNonce === undefined || !isChallenge(challenge)` → INVALID_REQUEST.
    const instance = nonce();
    const auth = createRelayAuth({ env: {}, relaySecret: secret, instance });
    expect(auth.instancePath).toBe(RELAY_INSTANCE_PATH);
    const challenge = newChallenge();
    expect(auth.instance(new Headers({ [RELAY_CHALLENGE_HEADER]: challenge }), "epoch-1")).toEqual({
      ok: true,
      profile: RELAY_PROFILE,
      epoch: "epoch-1",
      pid: process.pid,
      proof: instanceProof(instance, challenge, process.pid),
    });
    for (const headers of [
      new Headers(),
      new Headers({ [RELAY_CHALLENGE_HEADER]: "short" }),
      new Headers({ [RELAY_CHALLENGE_HEADER]: `${challenge}x` }),
    ]) {
      const { error } = await raised(() => auth.instance(headers, "epoch-1"));
      expect(error.code).toBe("INVALID_REQUEST");
    }
  });

  test("a relay without an instance nonce has no instance route and proves no instance", async () => {
    // relay-auth.ts: no nonce → no `instancePath`, and instance() refuses.
    const auth = createRelayAuth({ env: {}, relaySecret: secret });
    expect(auth.instancePath).toBeUndefined();
    const { error } = await raised(() => auth.instance(new Headers({ [RELAY_CHALLENGE_HEADER]: newChallenge() }), "epoch-1"));
    expect(error.code).toBe("INVALID_REQUEST");
  });

  test("the instance route needs no token, even on a relay with a secret (relay stop carries none); other routes do", async () => {
    // relay-auth.ts authorize(): the instance route is in the open set.
    const auth = createRelayAuth({ env: {}, relaySecret: secret, instance: nonce() });
    const noToken = { headers: new Headers() };
    expect(await auth.authorize(noToken, RELAY_INSTANCE_PATH)).toEqual({ ok: true });
    expect(await auth.authorize(noToken, "/api/task-relay/volatile-v1")).toMatchObject({
      ok: false,
      error: { code: "RELAY_AUTH_REQUIRED" },
    });
  });
});

// ---------------------------------------------------------------------------------------------
// Stopping a spawned worker (stop.ts)
// ---------------------------------------------------------------------------------------------

/** A spawn record for `session` (holder `pid`, Pi pid file `piPid` when given), saved in `env`'s home. */
function recordWorker(env: { PI_TASKS_HOME: string }, session: string, pid: number, piPid?: string, owner?: number): SpawnedWorker {
  const logs = join(env.PI_TASKS_HOME, "logs");
  mkdirSync(logs, { recursive: true, mode: 0o700 });
  const worker: SpawnedWorker = {
    session,
    pid,
    projectDir: env.PI_TASKS_HOME,
    relay: RELAY_URL,
    log: join(logs, `${session}.log`),
    createdAt: new Date(0).toISOString(),
    ...(owner === undefined ? {} : { owner }),
  };
  saveSpawned(env, worker);
  if (piPid !== undefined) writeFileSync(piPidFile(worker.log), `${piPid}\n`);
  return worker;
}

describe("stopping a spawned worker (stop.ts): what is signalled, when it is done, what is forgotten", () => {
  test("SIGTERM to the holder only; done once the holder and its Pi are both gone; never a SIGKILL; the record and pid file removed", async () => {
    // stopProcess: `stopPids(pids, [record.pid])`; stopPids: `if (await gone(...)) return true`; gone: `pids.every(…)`.
    const env = home();
    await withFakeProcesses(async (processes) => {
      const holder = processes.spawn();
      // Pi ends on its own, a few checks after its holder closed its stdin; a signal would end it too.
      const pi = processes.spawn({ follows: { pid: holder, checks: 3 } });
      const worker = recordWorker(env, "worker-a", holder, String(pi));
      const result = await onFakeClock(() => stopProcess(env, "worker-a"));
      expect(result).toEqual({ session: "worker-a", pids: [holder, pi], confirmed: true });
      expect(processes.alive(holder)).toBe(false);
      expect(processes.alive(pi)).toBe(false);
      expect(processes.signals.map(({ pid, signal }) => [pid, signal])).toEqual([[holder, "SIGTERM"]]);
      expect(loadSpawned(env, "worker-a")).toBeUndefined();
      expect(existsSync(piPidFile(worker.log))).toBe(false);
    });
  });

  test(`a holder that ignores SIGTERM gets SIGKILL only after processExitConfirmMs (${processExitConfirmMs} ms), then the stop is confirmed`, async () => {
    // stopPids: SIGKILL to every pid once `gone(pids, processExitConfirmMs)` is false.
    const env = home();
    await withFakeProcesses(async (processes) => {
      const holder = processes.spawn({ obeysTerm: false });
      recordWorker(env, "stubborn", holder);
      const result = await onFakeClock(async () => {
        const started = Date.now();
        return { stopped: await stopProcess(env, "stubborn"), started };
      });
      expect(result.stopped).toEqual({ session: "stubborn", pids: [holder], confirmed: true });
      const [term, kill] = processes.signals;
      expect(processes.signals.map(({ pid, signal }) => [pid, signal])).toEqual([
        [holder, "SIGTERM"],
        [holder, "SIGKILL"],
      ]);
      expect(kill!.at - term!.at).toBeGreaterThanOrEqual(processExitConfirmMs);
      expect(loadSpawned(env, "stubborn")).toBeUndefined();
    });
  });

  test("a Pi that outlives SIGKILL while its holder is gone: not confirmed, and the record and Pi pid file are kept", async () => {
    // stopPids: the last `gone(pids, processExitConfirmMs)` needs every pid gone; stopProcess: `if (!confirmed) return` before forgetting.
    const env = home();
    await withFakeProcesses(async (processes) => {
      const holder = processes.spawn();
      const pi = processes.spawn({ obeysTerm: false, obeysKill: false });
      const worker = recordWorker(env, "stuck", holder, String(pi));
      const result = await onFakeClock(() => stopProcess(env, "stuck"));
      expect(result).toEqual({ session: "stuck", pids: [holder, pi], confirmed: false });
      expect(processes.alive(holder)).toBe(false);
      expect(processes.alive(pi)).toBe(true);
      expect(processes.signals.map(({ pid, signal }) => [pid, signal])).toEqual([
        [holder, "SIGTERM"],
        [holder, "SIGKILL"],
        [pi, "SIGKILL"],
      ]);
      expect(loadSpawned(env, "stuck")).toMatchObject({ session: "stuck", pid: holder });
      expect(readFileSync(piPidFile(worker.log), "utf8")).toBe(`${pi}\n`);
    });
  });

  test("a Pi pid file that names no process (0, -1, 12.5, text, empty) adds nothing to signal or wait for", async () => {
    // stop.ts piPid: `Number.isInteger(pid) && pid > 0` — 0 and -1 would signal a process group or every process.
    for (const content of ["0", "-1", "12.5", "pi", ""]) {
      const env = home();
      await withFakeProcesses(async (processes) => {
        const holder = processes.spawn();
        recordWorker(env, "odd-pid-file", holder, content);
        const result = await onFakeClock(() => stopProcess(env, "odd-pid-file"));
        expect({ content, result }).toEqual({ content, result: { session: "odd-pid-file", pids: [holder], confirmed: true } });
        expect([...processes.asked]).toEqual([holder]);
      });
    }
  });

  test("no record of that name: nothing to stop, confirmed, nothing signalled", async () => {
    // stopProcess: `record === undefined` → `{ pids: [], confirmed: true }`.
    await withFakeProcesses(async (processes) => {
      expect(await stopProcess(home(), "nobody")).toEqual({ session: "nobody", pids: [], confirmed: true });
      expect(processes.asked.size).toBe(0);
    });
  });

  test("a Pi quitting stops the live workers it owns, and none it kept, none of another Pi, none already gone", async () => {
    // stopOwnedWorkers: `worker.owner === owner && isAlive(worker.pid)`.
    const env = home();
    const me = 4242;
    await withFakeProcesses(async (processes) => {
      const mine = processes.spawn();
      const kept = processes.spawn();
      const others = processes.spawn();
      const gone = processes.spawn();
      process.kill(gone, "SIGTERM");
      processes.signals.length = 0;
      recordWorker(env, "mine", mine, undefined, me);
      recordWorker(env, "kept", kept);
      recordWorker(env, "others", others, undefined, me + 1);
      recordWorker(env, "gone", gone, undefined, me);
      const results = await onFakeClock(() => stopOwnedWorkers(env, me));
      expect(results).toEqual([{ session: "mine", pids: [mine], confirmed: true }]);
      expect(processes.signals.map(({ pid, signal }) => [pid, signal])).toEqual([[mine, "SIGTERM"]]);
      expect(
        listSpawned(env)
          .map((worker) => worker.session)
          .sort(),
      ).toEqual(["gone", "kept", "others"]);
    });
  });
});
