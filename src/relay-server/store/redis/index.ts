/**
 * The Redis `RelayStore` (`pi-tasks relay --store redis://…`, docs/multi-machine.md): the relay's
 * whole state in one Redis that several relay processes share, so every relay rule holds across
 * them. Each method is one Lua script (scripts.ts), atomic however many relays race; the
 * `watch-v1` doorbell is pub/sub (doorbell.ts); the epoch is a key, so a restarted relay process
 * keeps its state and its epoch, while a Redis restarted without persistence is a new epoch.
 *
 * `createRedisStore` connects (bounded), refuses a Redis that persists to disk or evicts keys
 * (guard.ts) and reads or creates the epoch. A store call whose Redis is gone or slow fails with
 * `REDIS_UNAVAILABLE` (answered 503 `RELAY_UNAVAILABLE`); the next call connects anew.
 */
import { canonicalBytes } from "../../../protocol/canonical-json.ts";
import { TaskError } from "../../../protocol/errors.ts";
import {
  redisCommandTimeoutMs,
  redisConnectTimeoutMs,
  relayReceiptOverheadBytes,
  relayRegistrationOverheadBytes,
} from "../../../protocol/limits.ts";
import { violation } from "../invariant.ts";
import {
  type AcknowledgeOutcome,
  type AdmitEachOutcome,
  type AdmitOutcome,
  type AdmitRequest,
  type BindingLookup,
  type BoundOperation,
  type CapacityBudget,
  type ConnectOutcome,
  type PageOutcome,
  type RegistrationState,
  type RegistrationView,
  type RelayStore,
  type SecretMatch,
  type SenderQuota,
  stateReplaced,
  type StoreUsage,
  type WatchOutcome,
  type WatchRequest,
} from "../store.ts";
import { createRedisDoorbell, type RedisDoorbell } from "./doorbell.ts";
import { guardRedisConfig } from "./guard.ts";
import { acceptanceIdOf, mintAcceptanceKey } from "../acceptance.ts";
import { DEFAULT_REDIS_PREFIX, KEYS, REDIS_LAYOUT, redisKey } from "./keys.ts";
import { createRedisLink, errorReply, type RedisLink } from "./link.ts";
import { type RedisScript, SCRIPTS } from "./scripts.ts";
import { parseRedisUrl, type RedisTarget } from "./url.ts";

export { REDIS_PASSWORD_FILE_VARIABLE, REDIS_PASSWORD_VARIABLE } from "./url.ts";

export interface RedisStoreOptions {
  /** `redis://[USER@]HOST[:PORT][/DB]`, or `rediss://…` for TLS; a password in it is refused (url.ts). */
  readonly url: string;
  /** The password (else the file `PI_TASKS_REDIS_PASSWORD_FILE` of `env` names, or `PI_TASKS_REDIS_PASSWORD`). */
  readonly password?: string;
  readonly env?: Record<string, string | undefined>;
  /** Start even when Redis persists to disk, or its configuration cannot be read (guard.ts). */
  readonly allowPersistentStore?: boolean;
  /** Key prefix; relays sharing a Redis and a prefix share one state. Default `{pi-tasks}`. */
  readonly prefix?: string;
  /** Messages for the operator at start-up (e.g. a persistence allowed by the flag). */
  readonly onNotice?: (message: string) => void;
  readonly connectTimeoutMs?: number;
  readonly commandTimeoutMs?: number;
}

export interface RedisStore extends RelayStore {
  /** The store's URL without credentials. */
  readonly target: string;
}

type Reply = readonly string[];

function asReply(value: unknown, script: RedisScript): Reply {
  if (!Array.isArray(value) || value.length === 0 || !value.every((item) => typeof item === "string")) {
    throw violation("a store script answers a list of strings", {
      script: script.name,
      reply: Array.isArray(value) ? `an array of ${value.length}` : typeof value,
    });
  }
  return value as Reply;
}

/** `[id, session, state, lease]` from `at` on. */
function viewAt(reply: Reply, at: number): RegistrationView {
  return {
    endpointId: reply[at]!,
    session: reply[at + 1]!,
    state: reply[at + 2] as RegistrationState,
    leaseExpiresAt: Number(reply[at + 3]),
  };
}

/** `name, value, …` pairs from `at` on, values as numbers. */
function numbersFrom(reply: Reply, at: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (let index = at; index + 1 < reply.length; index += 2) out[reply[index]!] = Number(reply[index + 1]);
  return out;
}

function stringsFrom(reply: Reply, at: number): Record<string, string> {
  const out: Record<string, string> = {};
  for (let index = at; index + 1 < reply.length; index += 2) out[reply[index]!] = reply[index + 1]!;
  return out;
}

/** The Lua scripts of the store's methods, run against the epoch the relay knows. */
interface Scripts {
  /** Runs a method's script; a replaced state throws `stateReplaced()` (nothing was done). */
  run(script: RedisScript, ...args: string[]): Promise<Reply>;
  /** `run`, with the acceptance ids of the state the script ran against (for the admissions it answers). */
  runWithAcceptance(
    script: RedisScript,
    args: readonly string[],
  ): Promise<{ reply: Reply; acceptanceIdOf: (envelopeId: string) => string }>;
  /** Reads the epoch of the state (creating it for a new, empty state) and knows it from then on. */
  readEpoch(): Promise<string>;
}

function createScripts(link: RedisLink, prefix: string): Scripts {
  const epochKey = redisKey(prefix, KEYS.epoch);
  /**
   * The epoch the relay knows, with the state's acceptance key (read together); every script checks
   * the epoch against the key (see scripts.ts). A call already on its way when it moves (another
   * request read a new epoch) runs on the new state; its reply then carries the new epoch too, so
   * its client resets as it must. An admission's acceptance ids are made with the key read with
   * the epoch it ran against.
   */
  let known: { readonly epoch: string; readonly acceptanceKey: string } | undefined;

  async function evaluate(script: RedisScript, args: readonly string[]): Promise<unknown> {
    try {
      return await link.send("EVALSHA", [script.sha, "1", epochKey, ...args]);
    } catch (error) {
      // Not cached (a fresh or restarted Redis): EVAL runs the same script and caches it.
      if (!errorReply(error)?.startsWith("NOSCRIPT")) throw error;
      return await link.send("EVAL", [script.source, "1", epochKey, ...args]);
    }
  }

  async function runAgainst(state: NonNullable<typeof known>, script: RedisScript, args: readonly string[]): Promise<Reply> {
    const reply = asReply(await evaluate(script, [state.epoch, prefix, ...args]), script);
    if (reply[0] === "replaced") throw stateReplaced();
    return reply;
  }

  return {
    run: (script, ...args) => runAgainst(known!, script, args),
    async runWithAcceptance(script, args) {
      const state = known!;
      const reply = await runAgainst(state, script, args);
      return { reply, acceptanceIdOf: (envelopeId) => acceptanceIdOf(state.acceptanceKey, envelopeId) };
    },
    async readEpoch() {
      const fresh = mintAcceptanceKey();
      const reply = await evaluate(SCRIPTS.epoch, [crypto.randomUUID(), prefix, fresh]);
      if (Array.isArray(reply) && reply[0] === "layout") {
        throw new TaskError("REDIS_LAYOUT", { details: { prefix, layout: String(reply[1]), expected: REDIS_LAYOUT } });
      }
      if (!Array.isArray(reply) || reply.length !== 2 || !reply.every((item) => typeof item === "string")) {
        throw violation("the epoch script answers the epoch and the acceptance key", { reply: String(reply) });
      }
      const [epoch, acceptanceKey] = reply as [string, string];
      known = { epoch, acceptanceKey };
      return epoch;
    },
  };
}

/** Connects, refuses a Redis the relay must not use (guard.ts) and reads the epoch; closes the link when any of it fails. */
async function open(link: RedisLink, target: RedisTarget, options: RedisStoreOptions, scripts: Scripts): Promise<void> {
  try {
    await link.client();
    await guardRedisConfig(target, link.send, {
      allowPersistentStore: options.allowPersistentStore === true,
      notice: options.onNotice ?? (() => undefined),
    });
    await scripts.readEpoch();
  } catch (error) {
    link.close();
    throw error;
  }
}

type Run = Scripts["run"];

/** A binding reply (the `binding_of` of scripts.ts): `binding`, caller known, secret match, then the registration's fields. */
function lookupOf(reply: Reply): BindingLookup {
  return {
    callerKnown: reply[1] === "1",
    secret: reply[2] as SecretMatch,
    registration: reply.length > 3 ? viewAt(reply, 3) : undefined,
  };
}

/** Fields of a binding reply that names a registration: what follows them is the admission's reply. */
const BINDING_FIELDS = 7;

function found(reply: Reply): RegistrationView | undefined {
  return reply[0] === "found" ? viewAt(reply, 1) : undefined;
}

function connectOutcome(reply: Reply): ConnectOutcome {
  switch (reply[0]) {
    case "connected":
      return { kind: "connected", registration: viewAt(reply, 1) };
    case "session-protected":
      return { kind: "session-protected", leaseExpiresAt: Number(reply[1]) };
    case "secret-missing":
      return { kind: "secret-missing" };
    case "secret-mismatch":
      return { kind: "secret-mismatch" };
    case "generation-retired":
      return { kind: "generation-retired" };
    default:
      return { kind: "full", details: numbersFrom(reply, 1) };
  }
}

/** An admission's reply; an acceptance's id is `acceptanceId` (the relay's keyed hash of the envelope id). */
function admitOutcome(reply: Reply, acceptanceId: string): AdmitOutcome {
  switch (reply[0]) {
    case "accepted":
      return { kind: "accepted", acceptanceId, duplicate: reply[1] === "1", acceptedAt: Number(reply[2]) };
    case "target-not-live":
      return { kind: "target-not-live" };
    case "conflict":
      return { kind: "conflict" };
    case "expired":
      return { kind: "expired" };
    case "stale":
      return { kind: "stale" };
    case "quota":
      return { kind: "quota", quota: reply[1] as SenderQuota, details: numbersFrom(reply, 2) };
    default:
      return { kind: "full", budget: reply[1] as CapacityBudget, details: numbersFrom(reply, 2) };
  }
}

function usageOf(reply: Reply, watching: number): StoreUsage {
  const [activeItems, activeBytes, receipts, receiptBytes, registrations, sessions, metadataBytes, expiryEntries] = reply
    .slice(1)
    .map(Number) as number[];
  return {
    activeItems: activeItems!,
    activeBytes: activeBytes!,
    receipts: receipts!,
    receiptBytes: receiptBytes!,
    registrations: registrations!,
    sessions: sessions!,
    metadataBytes: metadataBytes!,
    expiryEntries: expiryEntries!,
    watching,
  };
}

type RegistrationMethods = Pick<
  RelayStore,
  "connect" | "binding" | "registration" | "successor" | "disconnect" | "sessionRegistration" | "liveRegistrations"
>;

function registrationMethods(run: Run): RegistrationMethods {
  return {
    async connect(request) {
      const endpointId = crypto.randomUUID();
      const size =
        canonicalBytes({ endpointId, session: request.session, generation: request.generation }) + relayRegistrationOverheadBytes;
      const lease = String(request.now + request.leaseMs);
      const secret = request.secretDigest ?? "";
      return connectOutcome(
        await run(SCRIPTS.connect, request.session, request.generation, lease, String(request.now), secret, endpointId, String(size)),
      );
    },

    async binding(session, endpointId, secretDigest, now) {
      return lookupOf(await run(SCRIPTS.binding, session, endpointId, secretDigest ?? "", now === undefined ? "" : String(now)));
    },

    registration: async (endpointId) => found(await run(SCRIPTS.registration, endpointId)),
    successor: async (endpointId, now) => found(await run(SCRIPTS.successor, endpointId, String(now))),

    async disconnect(endpointId, now) {
      await run(SCRIPTS.disconnect, endpointId, String(now));
    },

    sessionRegistration: async (session) => found(await run(SCRIPTS.session, session)),

    async liveRegistrations(now) {
      const reply = await run(SCRIPTS.live, String(now));
      const views: RegistrationView[] = [];
      for (let at = 1; at + 3 < reply.length; at += 4) views.push(viewAt(reply, at));
      return views;
    },
  };
}

/**
 * The watches of this process on the doorbell; it keeps the parked and answering ones, so `close`
 * lets them answer before the connection goes.
 */
interface Watches {
  watch(request: WatchRequest): Promise<WatchOutcome>;
  /** Resolves once every watch under way has answered. */
  settled(): Promise<void>;
}

function createWatches(run: Run, doorbell: RedisDoorbell): Watches {
  const watches = new Set<Promise<WatchOutcome>>();

  async function look(endpointId: string, after: string, mode: "park" | "first" | "final"): Promise<WatchOutcome & { serial: number }> {
    const reply = await run(SCRIPTS.look, endpointId, after, mode);
    if (reply[0] === "cursor-ahead") return { kind: "cursor-ahead", highestCursor: reply[1]!, serial: 0 };
    return { kind: "watch", pending: reply[1] === "1", highestCursor: reply[2]!, serial: Number(reply[3]) };
  }

  async function watch({ endpointId, after, waitMs, signal, onPark }: WatchRequest): Promise<WatchOutcome> {
    // Subscribed before the first look: a ring published after it is never missed.
    const listener = await doorbell.listen(endpointId);
    try {
      const parks = waitMs > 0;
      const first = await look(endpointId, after, parks ? "park" : "first");
      if (first.kind === "cursor-ahead") return { kind: "cursor-ahead", highestCursor: first.highestCursor };
      if (first.pending || !parks) return { kind: "watch", pending: first.pending, highestCursor: first.highestCursor };
      onPark?.();
      await listener.wait(first.serial, waitMs, signal);
      const final = await look(endpointId, after, "final");
      return final.kind === "watch" ? { kind: "watch", pending: final.pending, highestCursor: final.highestCursor } : final;
    } finally {
      listener.release();
    }
  }

  return {
    watch(request) {
      const watching = watch(request);
      watches.add(watching);
      void watching.finally(() => watches.delete(watching)).catch(() => undefined);
      return watching;
    },
    async settled() {
      await Promise.allSettled([...watches]);
    },
  };
}

type MailMethods = Pick<RelayStore, "admit" | "page" | "acknowledge" | "watch" | "bound">;

function pageOutcome(reply: Reply): PageOutcome {
  if (reply[0] === "cursor-ahead") return { kind: "cursor-ahead", highestCursor: reply[1]! };
  return { kind: "page", itemsJson: reply[1]!, nextCursor: reply[2]!, hasMore: reply[3] === "1" };
}

function acknowledgeOutcome(reply: Reply): AcknowledgeOutcome {
  if (reply[0] === "acknowledged") return { kind: "acknowledged", duplicate: reply[1] === "1" };
  return { kind: reply[0] === "gone" ? "gone" : "unknown" };
}

/** A batch's outcomes: two fields per id (kind, duplicate flag), in order. */
function acknowledgeOutcomes(reply: Reply): AcknowledgeOutcome[] {
  const outcomes: AcknowledgeOutcome[] = [];
  for (let at = 0; at + 1 < reply.length; at += 2) outcomes.push(acknowledgeOutcome(reply.slice(at, at + 2)));
  return outcomes;
}

/** How a script's reply reads, given the acceptance ids of the state it ran against. */
type ReadReply = (reply: Reply, acceptanceIdOf: (envelopeId: string) => string) => unknown;

/** A bound operation's script, its arguments after the binding's (ARGV 7…), and how its reply reads. */
function boundCall(operation: BoundOperation): { script: RedisScript; args: string[]; outcome: ReadReply } {
  switch (operation.kind) {
    case "admit": {
      const { request } = operation;
      return {
        script: SCRIPTS.boundAdmit,
        args: admitArgs(request),
        outcome: (reply, ids) => admitOutcome(reply, ids(request.envelopeId)),
      };
    }
    case "page":
      return { script: SCRIPTS.boundPage, args: [operation.after, String(operation.limit)], outcome: pageOutcome };
    case "acknowledge":
      return { script: SCRIPTS.boundAcknowledge, args: [packedEnvelopeId(operation.envelopeId)], outcome: acknowledgeOutcome };
    case "acknowledgeBatch":
      return { script: SCRIPTS.boundAcknowledgeBatch, args: operation.envelopeIds.map(packedEnvelopeId), outcome: acknowledgeOutcomes };
    case "admitEach": {
      const { requests } = operation;
      const args = [String(requests.length), ...requests.flatMap(admitArgs), ...(operation.acknowledge ?? []).map(packedEnvelopeId)];
      return { script: SCRIPTS.boundAdmitEach, args, outcome: (reply, ids) => admitEachOutcome(reply, requests, ids) };
    }
  }
}

/** BOUND_ADMIT_EACH's reply: each admission's reply after its length, then the acknowledgements (two fields each) if any. */
function admitEachOutcome(
  reply: Reply,
  requests: readonly AdmitRequest[],
  acceptanceIdOf: (envelopeId: string) => string,
): AdmitEachOutcome {
  const admitted: AdmitEachOutcome["admitted"][number][] = [];
  let at = 0;
  let accepted = true;
  while (at < reply.length && /^[0-9]+$/.test(reply[at]!)) {
    const length = Number(reply[at]);
    const fields = reply.slice(at + 1, at + 1 + length);
    const request = requests[admitted.length]!;
    admitted.push(fields[0] === "skipped" ? { kind: "skipped" } : admitOutcome(fields, acceptanceIdOf(request.envelopeId)));
    accepted &&= fields[0] === "accepted";
    at += 1 + length;
  }
  return accepted ? { admitted, acknowledged: acknowledgeOutcomes(reply.slice(at)) } : { admitted };
}

const LOWERCASE_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * An envelope id as the scripts keep it (keys.ts, "Packed ids"): a lowercase UUID as `~` and its 16
 * bytes in base64url (22 characters); any other id as `#`, its UTF-8 in base64url, and `:`.
 */
function packedEnvelopeId(envelopeId: string): string {
  if (LOWERCASE_UUID.test(envelopeId)) return `~${Buffer.from(envelopeId.replaceAll("-", ""), "hex").toString("base64url")}`;
  return `#${Buffer.from(envelopeId).toString("base64url")}:`;
}

/** The script arguments of an admission (ADMIT's ARGV 3–10). */
function admitArgs(request: AdmitRequest): string[] {
  const receiptBytes =
    canonicalBytes({ id: request.envelopeId, source: request.source, target: request.target }) + relayReceiptOverheadBytes;
  return [
    packedEnvelopeId(request.envelopeId),
    request.digest,
    request.text,
    request.target.id,
    String(receiptBytes),
    request.fresh ? "1" : "0",
    String(request.now),
    request.source.id,
  ];
}

function mailMethods(scripts: Scripts, watches: Watches): MailMethods {
  const { run } = scripts;
  return {
    async admit(request) {
      const { reply, acceptanceIdOf } = await scripts.runWithAcceptance(SCRIPTS.admit, admitArgs(request));
      return admitOutcome(reply, acceptanceIdOf(request.envelopeId));
    },

    async bound(binding, operation) {
      const call = boundCall(operation);
      const bindingArgs = [binding.session, binding.endpointId, binding.secretDigest ?? "", String(binding.now)];
      const { reply, acceptanceIdOf } = await scripts.runWithAcceptance(call.script, [...bindingArgs, ...call.args]);
      const lookup = lookupOf(reply.slice(0, BINDING_FIELDS));
      if (reply.length <= BINDING_FIELDS) return { lookup };
      return { lookup, outcome: call.outcome(reply.slice(BINDING_FIELDS), acceptanceIdOf) as never };
    },

    page: async (endpointId, after, limit) => pageOutcome(await run(SCRIPTS.page, endpointId, after, String(limit))),
    acknowledge: async (endpointId, envelopeId) =>
      acknowledgeOutcome(await run(SCRIPTS.acknowledge, endpointId, packedEnvelopeId(envelopeId))),

    watch: (request) => watches.watch(request),
  };
}

export async function createRedisStore(options: RedisStoreOptions): Promise<RedisStore> {
  const target: RedisTarget = parseRedisUrl(options.url, options.env ?? {}, options.password);
  const prefix = options.prefix ?? DEFAULT_REDIS_PREFIX;
  const timeouts = {
    connectTimeoutMs: options.connectTimeoutMs ?? redisConnectTimeoutMs,
    commandTimeoutMs: options.commandTimeoutMs ?? redisCommandTimeoutMs,
  };
  const link: RedisLink = createRedisLink(target, timeouts);
  const scripts = createScripts(link, prefix);
  await open(link, target, options, scripts);
  const doorbell = createRedisDoorbell(target, timeouts, (endpointId) => redisKey(prefix, KEYS.bell, endpointId));
  const watches = createWatches(scripts.run, doorbell);

  return {
    target: target.display,
    epoch: scripts.readEpoch,
    ...registrationMethods(scripts.run),
    ...mailMethods(scripts, watches),

    async maintain(now) {
      const reply = await scripts.run(SCRIPTS.maintain, String(now), crypto.randomUUID());
      if (reply[0] === "violation") throw violation(reply[1]!, stringsFrom(reply, 2));
      return { reaped: Number(reply[1]), expiredReceipts: Number(reply[2]), expiredMail: Number(reply[3]) };
    },

    usage: async () => ({ ...usageOf(await scripts.run(SCRIPTS.usage), doorbell.waiting()), roundTrips: link.sent() }),

    async close() {
      // Parked watches are answered with the state, then the connection goes.
      doorbell.close();
      await watches.settled();
      link.close();
    },
  };
}
