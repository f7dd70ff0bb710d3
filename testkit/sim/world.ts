/**
 * One simulated world per seed: sessions, each run by a Pi — a real configured TaskCore (as the
 * extension runs it: relay loss recovers) with its own identity derived from the seed, all trusting
 * one another, an in-memory presentation host each — on one virtual clock; the real relay (handler,
 * engine, memory store) behind the simulated network. A Pi may crash (its RAM and its host gone,
 * its registration left to lapse) and a new Pi of the session start, with or without resuming the
 * tasks its history shows. Time moves only when the runner says; `quiet()` waits until the relay
 * has answered every request under way.
 */
import { createHash } from "node:crypto";
import { openPayload } from "../../src/core/envelopes.ts";
import { requestEnvelopes } from "../../src/protocol/wire.ts";
import { type ConfiguredTaskCore, createConfiguredTaskCore } from "../../src/core/configured.ts";
import { taskRecordOf } from "../../src/core/resume.ts";
import type { TaskCore } from "../../src/core/task-core.ts";
import type { TrustOptions } from "../../src/core/trust.ts";
import { createInMemoryTaskRelay, type InMemoryTaskRelay } from "../../src/relay-server/in-memory.ts";
import { type Identity, identityFromPrivateKey } from "../../src/trust/keys.ts";
import { flushMicrotasks } from "../async.ts";
import { createMemoryHost, type MemoryHost } from "../memory-host.ts";
import { createVirtualTimers, type VirtualTimers } from "../virtual-timers.ts";
import { createHostileRelay, type HostileRelay, type HostileRates } from "./hostile.ts";
import { createSimNetwork, type NetworkFaults, type SimNetwork } from "./network.ts";
import { createSimRandom, type SimRandom } from "./random.ts";

/** Where the wall clock of every world starts (a fixed date, so runs compare byte for byte). */
export const SIM_EPOCH_MS = Date.UTC(2026, 11, 7, 12);
/** A Pi's request deadline in the world, in ms (the client default is 12 s; shorter keeps runs short). */
export const SIM_REQUEST_TIMEOUT_MS = 5_000;
/** The most tasks one Pi keeps active as their origin (`maxActiveTasks`: FANOUT_LIMIT past it). */
export const SIM_MAX_ACTIVE_TASKS = 4;
/** Real-time yields `quiet()` gives the relay before it calls the world stuck. */
const MAX_QUIET_YIELDS = 10_000;

/** The DER header of an Ed25519 private key in PKCS #8 (RFC 8410), before its 32-byte seed. */
const ED25519_PKCS8_HEADER = Buffer.from("302e020100300506032b657004220420", "hex");

/** One Pi of a session: its configured core and its host, from its start to its crash. */
export interface SimPi {
  readonly id: string;
  readonly configured: ConfiguredTaskCore;
  readonly host: MemoryHost;
  readonly startedAt: number;
  crashedAt?: number;
}

export interface SimSession {
  readonly name: string;
  readonly identity: Identity;
  readonly random: SimRandom;
  /** Every Pi this session ran, the current one last. */
  readonly pis: SimPi[];
  /** The current Pi (crashed when `down`). */
  readonly pi: SimPi;
  /** Its core (the same for the Pi's whole run). */
  readonly core: TaskCore;
  /** The current Pi's host. */
  readonly host: MemoryHost;
  /** 1 for the first Pi, one more per restart. */
  readonly lifetime: number;
  /** Its Pi crashed and none runs now. */
  readonly down: boolean;
}

export interface World {
  readonly seed: number;
  readonly random: SimRandom;
  readonly timers: VirtualTimers;
  readonly network: SimNetwork;
  /** The relay as the sessions reach it: honest, or hostile as the seed says. */
  readonly hostile: HostileRelay;
  readonly sessions: readonly SimSession[];
  /** The wall clock every core, session and the relay read: the virtual time since SIM_EPOCH_MS. */
  wall(): number;
  relay(): InMemoryTaskRelay;
  /** When the relay last restarted (virtual ms), or -1. */
  relayRestartedAt(): number;
  /** The relay restarts empty (a new epoch: every session finds RELAY_RESET). */
  restartRelay(): Promise<void>;
  /** The session's Pi crashes: no goodbye, its RAM gone, its registration left to lapse. */
  crash(session: SimSession): void;
  /**
   * A stranger (a Pi of a key no session trusts, answering hellos as any Pi does) starts under a
   * session's name — it takes the name once its holder's lease lapsed. Returns its connect.
   */
  takeName(session: SimSession): Promise<unknown>;
  /** The strangers' Pis, by the name they took. */
  readonly strangers: ReadonlyMap<string, SimPi>;
  /** Task content that left a session sealed to a stranger's or the hostile relay's key (proof-before-content), in words. */
  readonly leaks: string[];
  /**
   * A new Pi of a session that is down, at once; the returned run connects it and, with `resume`,
   * takes back the tasks its history shows (the caller tracks it while time moves on).
   */
  restart(session: SimSession, resume: boolean): Promise<unknown>;
  /** Waits (real time) until no request is at the relay and every continuation ran. */
  quiet(): Promise<void>;
  /** What happened inside the Pis since the last call (recoveries from relay loss), in words. */
  drainNews(): string[];
  close(): Promise<void>;
}

export interface WorldOptions {
  readonly sessions: number;
  readonly faults: NetworkFaults;
  readonly hostile: HostileRates;
}

function identityFor(seed: number, name: string): Identity {
  const secret = createHash("sha256").update(`identity\0${seed}\0${name}`).digest();
  return identityFromPrivateKey(Buffer.concat([ED25519_PKCS8_HEADER, secret]).toString("base64url"));
}

/** What a stranger's Pi trusts: nobody but itself. */
function trustNobody(identity: Identity): TrustOptions {
  return { identity, peerName: () => undefined };
}

/** The task content in a request body that opens with `identity` (hellos and refusals are not content), by envelope id. */
function contentFor(identity: Identity, body: string): string[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return [];
  }
  return requestEnvelopes(parsed).flatMap((envelope) => {
    const payload = envelope.payload as { kind?: string; sealed?: unknown } | undefined;
    if (payload === undefined || payload.kind === "hello" || payload.sealed === undefined) return [];
    try {
      const opened = openPayload(identity, payload as never).payload;
      // A refusal of an assignment the key signed says only why (src/core/intake.ts): not content.
      const refusal = opened.kind === "intent" && (opened.payload as { type?: unknown }).type === "task.refused";
      return refusal ? [] : [String(envelope.envelopeId)];
    } catch {
      return [];
    }
  });
}

function trustFor(identity: Identity, everyone: readonly { name: string; identity: Identity }[]): TrustOptions {
  const names = new Map(everyone.map((peer) => [peer.identity.publicKey, peer.name]));
  return { identity, peerName: (key) => names.get(key) };
}

type PiWorld = Pick<World, "wall" | "timers" | "network" | "relay"> & { readonly news: string[] };

/** A new Pi of a session: a configured core on a new RAM store, its host empty. */
function startPi(world: PiWorld, name: string, trust: TrustOptions, lifetime: number, named?: string): SimPi {
  const id = named ?? `${name}/${lifetime}`;
  const host = createMemoryHost();
  const configured = createConfiguredTaskCore({
    env: {},
    callerSession: name,
    url: world.relay().url,
    // A stranger is a host of its own: a partition of the session whose name it took is not its.
    fetch: world.network.fetchFor(named === undefined ? name : "stranger", id),
    requestTimeoutMs: SIM_REQUEST_TIMEOUT_MS,
    maxActiveTasks: SIM_MAX_ACTIVE_TASKS,
    host,
    clock: world.wall,
    now: world.wall,
    timers: world.timers,
    trust,
    onRecovered: (info) =>
      world.news.push(
        `${id} rebound (${info.cause.code}${info.relayForgot ? ", the relay forgot" : ""}): ${info.previousEndpoint?.id ?? "none"} → ${info.endpoint.id}, ${info.reconnecting} task(s) looking for their peer`,
      ),
  });
  return { id, configured, host, startedAt: world.timers.now() };
}

/** What a Pi's session history holds of the tasks it sent: records, events shown, the worker's key. */
function historyOf(pi: SimPi): unknown[] {
  return pi.configured
    .current()
    .listTasks()
    .filter((task) => task.role === "origin")
    .map((task) => ({
      record: taskRecordOf(task),
      events: task.events,
      ...(task.peer?.verified === true ? { workerKey: task.peer.key } : {}),
    }));
}

function createSession(world: PiWorld, seedRandom: SimRandom, name: string, identity: Identity, trust: TrustOptions) {
  const pis: SimPi[] = [startPi(world, name, trust, 1)];
  const session: SimSession & { startAgain(): SimPi } = {
    name,
    identity,
    random: seedRandom.fork(name),
    pis,
    get pi() {
      return pis.at(-1)!;
    },
    get core() {
      return pis.at(-1)!.configured.current();
    },
    get host() {
      return pis.at(-1)!.host;
    },
    get lifetime() {
      return pis.length;
    },
    get down() {
      return pis.at(-1)!.crashedAt !== undefined;
    },
    startAgain: () => {
      const pi = startPi(world, name, trust, pis.length + 1);
      pis.push(pi);
      return pi;
    },
  };
  return session;
}

/**
 * The strangers of a world: who holds which name, and the content that leaked to their key — or to
 * the hostile relay's, once it answered a hello with its own (`relayForged`).
 */
function createStrangers(identity: Identity, relay: Identity, relayForged: () => boolean) {
  const byName = new Map<string, SimPi>();
  const pis = new Set<string>();
  const leaks: string[] = [];
  return {
    byName,
    leaks,
    /** Proof before content: nothing a session sends may open with the stranger's key. */
    inspect: async (pi: string, body: () => Promise<string>) => {
      const forged = relayForged();
      if ((byName.size === 0 && !forged) || pis.has(pi)) return;
      const text = await body();
      for (const envelopeId of byName.size === 0 ? [] : contentFor(identity, text))
        leaks.push(`${pi} sent envelope ${envelopeId} sealed to the stranger's key`);
      for (const envelopeId of forged ? contentFor(relay, text) : [])
        leaks.push(`${pi} sent envelope ${envelopeId} sealed to the hostile relay's key`);
    },
    takeName: (world: PiWorld, name: string) => {
      const pi = startPi(world, name, trustNobody(identity), 0, `stranger@${name}`);
      byName.set(name, pi);
      pis.add(pi.id);
      // A name still held (its lease has not lapsed) is not taken: the stranger goes, to try again later.
      return pi.configured
        .run((core) => core.connect())
        .catch(async (error: unknown) => {
          byName.delete(name);
          await pi.configured.close();
          throw error;
        });
    },
  };
}

/** Waits (real time) until the relay answered every request under way and every continuation ran. */
async function quiet(network: SimNetwork): Promise<void> {
  for (let yields = 0; network.inFlight() > 0; yields += 1) {
    if (yields >= MAX_QUIET_YIELDS) throw new Error(`simulator: the relay did not answer ${network.inFlight()} requests`);
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  await flushMicrotasks(20);
}

export async function createWorld(seed: number, options: WorldOptions): Promise<World> {
  const random = createSimRandom(seed);
  const news: string[] = [];
  const timers = createVirtualTimers(0);
  // Exactly virtual time: many calls in one instant read the same time, as Date.now can.
  const wall = () => SIM_EPOCH_MS + timers.now();
  const newRelay = () => createInMemoryTaskRelay({ now: wall, maintenance: "caller" });
  let relay = await newRelay();
  let relayRestartedAt = -1;
  const everyone = Array.from({ length: options.sessions }, (_, index) => ({
    name: `s${index}`,
    identity: identityFor(seed, `s${index}`),
  }));
  const hostile = createHostileRelay({
    random: random.fork("hostile"),
    identity: identityFor(seed, "relay"),
    recipients: () => everyone.map((each) => each.identity),
    rates: options.hostile,
    now: wall,
    onAct: (text) => news.push(text),
  });
  const strangers = createStrangers(identityFor(seed, "stranger"), hostile.identity, () => hostile.acts().forge > 0);
  const hostileFetch = ((request: Request) => hostile.handle(request, relay.fetch)) as typeof fetch;
  const network = createSimNetwork({
    timers,
    random: random.fork("network"),
    relay: () => hostileFetch,
    faults: options.faults,
    inspect: strangers.inspect,
  });
  const piWorld: PiWorld = { wall, timers, network, relay: () => relay, news };
  const sessions = everyone.map(({ name, identity }) => createSession(piWorld, random, name, identity, trustFor(identity, everyone)));
  return {
    seed,
    random,
    timers,
    network,
    hostile,
    sessions,
    wall,
    relay: () => relay,
    relayRestartedAt: () => relayRestartedAt,
    restartRelay: async () => {
      const old = relay;
      relay = await newRelay();
      relayRestartedAt = timers.now();
      await old.stop();
    },
    crash: (session) => {
      const { pi } = session;
      pi.crashedAt = timers.now();
      network.kill(pi.id);
      pi.configured.session.close();
    },
    restart: (session, resume) => {
      const history = resume ? historyOf(session.pi) : [];
      const pi = (session as SimSession & { startAgain(): SimPi }).startAgain();
      return pi.configured.run(async (core) => {
        await core.connect();
        return history.length === 0 ? [] : core.resume(history);
      });
    },
    takeName: (session) => strangers.takeName(piWorld, session.name),
    strangers: strangers.byName,
    leaks: strangers.leaks,
    quiet: () => quiet(network),
    drainNews: () => news.splice(0),
    close: async () => {
      const running = [...sessions.flatMap((session) => session.pis), ...strangers.byName.values()].filter(
        (pi) => pi.crashedAt === undefined,
      );
      await Promise.allSettled(running.map((pi) => pi.configured.close()));
      await relay.stop();
    },
  };
}
