/**
 * The simulated network between the sessions and the relay: every request a session's transport
 * makes goes through `fetchFor(session)`, which the seed decides the fate of — delivered, delayed
 * (virtual time), lost before the relay saw it, lost after (the relay acted, the reply never came),
 * or delivered twice; a partitioned session reaches nothing, nor does a Pi that crashed. `inFlight()` counts requests the relay
 * is working on now (real awaits), so the world can wait for them before time moves on.
 */
import type { TaskTimers } from "../../src/core/timers.ts";
import type { SimRandom } from "./random.ts";

/** What can befall one request, with how likely each is when faults are on (per request). */
export interface NetworkFaults {
  readonly delay: number;
  readonly loseRequest: number;
  readonly loseReply: number;
  readonly duplicate: number;
}

/** No faults: every request delivered at once. */
export const NO_NETWORK_FAULTS: NetworkFaults = { delay: 0, loseRequest: 0, loseReply: 0, duplicate: 0 };

/** The longest a delayed request waits, in virtual ms (under the client's request deadline). */
export const MAX_NETWORK_DELAY_MS = 3_000;

export type RequestFate = "delivered" | "delayed" | "lost-request" | "lost-reply" | "duplicated" | "partitioned" | "dead";

export interface SimNetwork {
  /** The fetch one Pi of a session uses (`pi` names that Pi: a crash kills it alone). */
  fetchFor(session: string, pi: string): typeof fetch;
  /** A Pi crashed: nothing it sends arrives any more. */
  kill(pi: string): void;
  /** Cut a session off until virtual time `untilMs` (every request fails as unreachable); a time already past heals it. */
  partition(session: string, untilMs: number): void;
  partitioned(session: string): boolean;
  /** Whether the session was partitioned at any moment from `fromMs` (virtual) until now. */
  partitionedSince(session: string, fromMs: number): boolean;
  /** Faults on (the seed's rates) or off (a healed network, for the end of a run). */
  setFaults(faults: NetworkFaults): void;
  /** Requests the relay is answering now. */
  inFlight(): number;
  /** How many requests met each fate. */
  fates(): Readonly<Record<RequestFate, number>>;
}

export interface SimNetworkOptions {
  readonly timers: TaskTimers;
  readonly random: SimRandom;
  /** The relay's fetch now (it changes when the relay restarts). */
  readonly relay: () => typeof fetch;
  readonly faults: NetworkFaults;
  /**
   * Sees every request that reaches the relay, with the Pi that sent it (invariants); it reads the
   * body (`body()`) only when it wants it.
   */
  readonly inspect?: (pi: string, body: () => Promise<string>) => Promise<void>;
}

function unreachable(session: string, why: string): TypeError {
  return new TypeError(`simulated network: ${session} ${why}`);
}

export function createSimNetwork(options: SimNetworkOptions): SimNetwork {
  const { timers, random } = options;
  let faults = options.faults;
  let inFlight = 0;
  const cutUntil = new Map<string, number>();
  /** Every partition, as [session, from, until] (virtual ms). */
  const cuts: [string, number, number][] = [];
  const fates: Record<RequestFate, number> = {
    delivered: 0,
    delayed: 0,
    "lost-request": 0,
    "lost-reply": 0,
    duplicated: 0,
    partitioned: 0,
    dead: 0,
  };
  const dead = new Set<string>();
  const isCut = (session: string) => (cutUntil.get(session) ?? -1) > timers.now();
  const fateOf = (): RequestFate => {
    if (random.chance(faults.loseRequest)) return "lost-request";
    if (random.chance(faults.loseReply)) return "lost-reply";
    if (random.chance(faults.duplicate)) return "duplicated";
    if (random.chance(faults.delay)) return "delayed";
    return "delivered";
  };
  const toRelay = async (request: Request): Promise<Response> => {
    inFlight += 1;
    try {
      return await options.relay()(request);
    } finally {
      inFlight -= 1;
    }
  };
  const deliver = async (session: string, pi: string, request: Request): Promise<Response> => {
    const fate = dead.has(pi) ? "dead" : isCut(session) ? "partitioned" : fateOf();
    fates[fate] += 1;
    if (fate === "dead") throw unreachable(pi, "crashed");
    if (fate === "partitioned") throw unreachable(session, "is partitioned");
    if (fate === "lost-request") throw unreachable(session, "lost the request");
    if (fate === "delayed") await timers.timeout(random.between(1, MAX_NETWORK_DELAY_MS));
    if (options.inspect !== undefined) await options.inspect(pi, () => request.clone().text());
    if (fate === "duplicated") await (await toRelay(request.clone() as unknown as Request)).text();
    const response = await toRelay(request);
    if (fate === "lost-reply") {
      await response.text();
      throw unreachable(session, "lost the reply");
    }
    return response;
  };
  return {
    fetchFor: (session, pi) =>
      (async (input: string | URL | Request, init?: RequestInit) =>
        deliver(
          session,
          pi,
          input instanceof Request && init === undefined ? input : (new Request(input as string, init) as unknown as Request),
        )) as typeof fetch,
    kill: (pi) => void dead.add(pi),
    partition: (session, untilMs) => {
      // A cut while cut lasts until the later end; healing (an end before now) ends it at once.
      cutUntil.set(session, untilMs <= timers.now() ? untilMs : Math.max(untilMs, cutUntil.get(session) ?? untilMs));
      cuts.push([session, timers.now(), untilMs]);
    },
    partitionedSince: (session, fromMs) =>
      cuts.some(([cut, from, until]) => cut === session && until > fromMs && from <= timers.now() && until > from),
    partitioned: isCut,
    setFaults: (next) => void (faults = next),
    inFlight: () => inFlight,
    fates: () => ({ ...fates }),
  };
}
