/**
 * Machines for the multi-host tests (tests/netns/): hosts as network namespaces (testkit/netns.ts), a
 * real `redis-server` on one of them, a relay on each other host (on its own loopback, state in that
 * Redis; host a's on Bun, host b's on Node) and task parties as programs on the hosts (testkit/netns-party.ts), each with its own pi-tasks
 * home, paired both ways. `describeWithNetns` skips visibly where namespaces cannot be made, and
 * fails under CI (`PI_TASKS_CI=1`).
 */
import { afterAll, beforeAll, describe, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { CI_VARIABLE } from "../../testkit/debian-package.ts";
import { memoryOnlyArgs } from "../../testkit/redis-process.ts";
import { createNetwork, type Host, type Network, netnsUnavailable } from "../../testkit/netns.ts";
import { BUN, REPO_ROOT, type RelayProcess, startRelayProcess } from "../../testkit/relay-process.ts";
import { ensureIdentity } from "../../src/trust/identity.ts";
import { addPeer } from "../../src/trust/peers.ts";
import { RELAY_RUNTIMES, type RelayRuntime } from "./redis-kit.ts";

export const REDIS_PORT = 6379;
/** A started Redis answers PING within this time. */
const REDIS_READY_MS = 5_000;
/** A party prints its ready line within this time. */
const PARTY_READY_MS = 15_000;

export function describeWithNetns(label: string, body: () => void): void {
  const missing = netnsUnavailable();
  if (missing === undefined) describe(label, body);
  else if (process.env[CI_VARIABLE] === "1") {
    describe(label, () => {
      test(`network namespaces can be made (${CI_VARIABLE}=1)`, () => {
        throw new Error(missing);
      });
    });
  } else {
    console.warn(`skip: ${label}: ${missing}`);
    describe.skip(label, body);
  }
}

/** A Redis on a host, on its network address. */
export interface HostRedis {
  readonly url: string;
  /** Kills it and starts a new, empty one on the same address (a restart without persistence). */
  restart(): Promise<void>;
}

/** How the tests start the shared Redis on its host (docs/multi-machine.md shows the same command). */
export function hostRedisArgs(address: string, dir: string): string[] {
  return ["redis-server", "--bind", address, "--port", String(REDIS_PORT), "--protected-mode", "no", ...memoryOnlyArgs(dir)];
}

export async function startHostRedis(host: Host): Promise<HostRedis> {
  let child: Subprocess | undefined;
  async function launch(): Promise<void> {
    child = host.spawn(hostRedisArgs(host.address, tmpdir()));
    const deadline = Date.now() + REDIS_READY_MS;
    while (host.run(["redis-cli", "-h", host.address, "-p", String(REDIS_PORT), "ping"]).stdout.trim() !== "PONG") {
      if (Date.now() > deadline) throw new Error(`redis-server on ${host.name} did not answer PING`);
      await Bun.sleep(50);
    }
  }
  await launch();
  return {
    url: `redis://${host.address}:${REDIS_PORT}`,
    async restart() {
      child?.kill("SIGKILL");
      await child?.exited;
      await launch();
    },
  };
}

/** The runtime of each host's relay: host a's on Bun, host b's on Node (the built bundle, as Pi's users run it). */
const HOST_RELAY_RUNTIME: Readonly<Record<string, RelayRuntime>> = { a: "bun", b: "node" };

/** A relay on a host's loopback, its state in the Redis at `storeUrl`. */
export function startHostRelay(host: Host, storeUrl: string, port = 0): Promise<RelayProcess> {
  const runtime = HOST_RELAY_RUNTIME[host.name] ?? "bun";
  return startRelayProcess({ command: host.wrap([...RELAY_RUNTIMES[runtime]]), port, args: ["--store", storeUrl] });
}

export interface PartyStats {
  readonly tasks: number;
  readonly completed: number;
  readonly acknowledged: number;
  readonly active: number;
  readonly twice: number;
}

/** A task party running on a host (testkit/netns-party.ts). */
export interface HostParty {
  readonly endpoint: unknown;
  /** Sends tasks to the worker session `toSession` (testkit/netns-party.ts). */
  send(toSession: string, count: number, everyMs: number): void;
  stats(): Promise<PartyStats>;
  stop(): Promise<void>;
}

/** Reads a child's stdout as JSON lines, handing each to whoever waits for its event. */
function lineReader(child: Subprocess<"pipe", "pipe", "pipe">): (event: string, timeoutMs: number) => Promise<Record<string, unknown>> {
  const waiting: { event: string; resolve: (line: Record<string, unknown>) => void }[] = [];
  void (async () => {
    let buffered = "";
    const decoder = new TextDecoder();
    for await (const chunk of child.stdout) {
      buffered += decoder.decode(chunk, { stream: true });
      for (let at = buffered.indexOf("\n"); at >= 0; at = buffered.indexOf("\n")) {
        const line = JSON.parse(buffered.slice(0, at)) as Record<string, unknown>;
        buffered = buffered.slice(at + 1);
        const index = waiting.findIndex((waiter) => waiter.event === line.event);
        if (index >= 0) waiting.splice(index, 1)[0]!.resolve(line);
      }
    }
  })();
  return (event, timeoutMs) =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no ${event} line within ${timeoutMs} ms`)), timeoutMs);
      waiting.push({ event, resolve: (line) => (clearTimeout(timer), resolve(line)) });
    });
}

export async function startHostParty(
  host: Host,
  options: { relay: RelayProcess; home: string; session: string; role: "origin" | "worker" },
): Promise<HostParty> {
  const child = host.spawn([
    BUN,
    join(REPO_ROOT, "testkit", "netns-party.ts"),
    "--relay",
    options.relay.url,
    "--home",
    options.home,
    "--session",
    options.session,
    "--role",
    options.role,
  ]);
  const next = lineReader(child);
  const write = (command: Record<string, unknown>) => {
    child.stdin.write(`${JSON.stringify(command)}\n`);
    child.stdin.flush();
  };
  const ready = await next("ready", PARTY_READY_MS);
  return {
    endpoint: ready.endpoint,
    send: (toSession, count, everyMs) => write({ cmd: "send", toSession, count, everyMs }),
    async stats() {
      const answer = next("stats", PARTY_READY_MS);
      write({ cmd: "stats" });
      return (await answer) as unknown as PartyStats;
    },
    async stop() {
      write({ cmd: "stop" });
      await Promise.race([child.exited, Bun.sleep(3_000)]);
      child.kill("SIGKILL");
    },
  };
}

/** Two pi-tasks homes (identities) that trust each other. */
export async function pairedHomes(): Promise<{ readonly a: string; readonly b: string; remove(): void }> {
  const a = mkdtempSync(join(tmpdir(), "pi-tasks-home-a-"));
  const b = mkdtempSync(join(tmpdir(), "pi-tasks-home-b-"));
  await addPeer(a, "b", ensureIdentity(b).identity.publicKey);
  await addPeer(b, "a", ensureIdentity(a).identity.publicKey);
  return { a, b, remove: () => [a, b].forEach((home) => rmSync(home, { recursive: true, force: true })) };
}

/** A slow, lossy link (testkit/delay-proxy.ts) on each relay's way to Redis. */
export interface LinkFaults {
  readonly delayMs: number;
  readonly loss: number;
  readonly retransmitMs: number;
}

/** Starts testkit/delay-proxy.ts on `host` towards `target` (HOST:PORT); resolves with the Redis URL through it. */
async function startDelayProxy(host: Host, target: string, faults: LinkFaults): Promise<string> {
  const child = host.spawn([
    BUN,
    join(REPO_ROOT, "testkit", "delay-proxy.ts"),
    "--target",
    target,
    "--delay-ms",
    String(faults.delayMs),
    "--loss",
    String(faults.loss),
    "--retransmit-ms",
    String(faults.retransmitMs),
  ]);
  const listening = await lineReader(child)("listening", PARTY_READY_MS);
  return `redis://127.0.0.1:${String(listening.port)}`;
}

/**
 * Hosts `a` and `b` with a relay each and `redis` with the Redis, built before the file's tests and
 * removed after; with `faults`, each relay reaches Redis through a slow, lossy link. A test that
 * restarts a relay puts the new one in `relays`.
 */
export function useMachines(faults?: LinkFaults): {
  readonly net: Network;
  readonly redis: HostRedis;
  readonly relays: Record<"a" | "b", RelayProcess>;
  storeUrl(host: "a" | "b"): string;
} {
  const state: { net?: Network; redis?: HostRedis; relays?: Record<"a" | "b", RelayProcess>; stores: Record<string, string> } = {
    stores: {},
  };
  beforeAll(async () => {
    const net = await createNetwork(["a", "b", "redis"]);
    state.net = net;
    state.redis = await startHostRedis(net.host("redis"));
    for (const name of ["a", "b"]) {
      const target = `${net.host("redis").address}:${REDIS_PORT}`;
      state.stores[name] = faults === undefined ? state.redis.url : await startDelayProxy(net.host(name), target, faults);
    }
    const [a, b] = await Promise.all(["a", "b"].map((name) => startHostRelay(net.host(name), state.stores[name]!)));
    state.relays = { a: a!, b: b! };
  });
  afterAll(async () => {
    // The relays run on the hosts but are not the network's programs: stopped first (the one in
    // `relays` now, a restarted one included), then everything the hosts still run.
    await Promise.all(Object.values(state.relays ?? {}).map((relay) => relay.stop("SIGKILL").catch(() => undefined)));
    await state.net?.destroy();
  });
  return {
    get net() {
      return state.net!;
    },
    get redis() {
      return state.redis!;
    },
    get relays() {
      return state.relays!;
    },
    storeUrl: (host) => state.stores[host]!,
  };
}

/** The task endpoint `session` holds on the relay at `relayUrl` on `host` (asked from that host), once it has one. */
export async function hostEndpoint(host: Host, relayUrl: string, session: string, timeoutMs = PARTY_READY_MS): Promise<unknown> {
  const script = `const r = await fetch(${JSON.stringify(`${relayUrl}/api/session-control/status?session=${encodeURIComponent(session)}`)}); console.log(r.ok ? JSON.stringify((await r.json()).taskEndpoint ?? null) : "null");`;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const answer = host.run([BUN, "-e", script]).stdout.trim();
    if (answer !== "" && answer !== "null") return JSON.parse(answer);
    if (Date.now() > deadline) throw new Error(`${session} has no endpoint on ${host.name}'s relay`);
    await Bun.sleep(200);
  }
}
