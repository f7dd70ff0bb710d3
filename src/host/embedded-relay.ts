/**
 * The embedded relay: when a Pi session starts and no relay answers at the default loopback URL,
 * the first Pi starts `pi-tasks relay` on that port as a detached process and later Pis use it.
 *
 * - Only for the default loopback relay (`WOLFPACK_PORT` or 18790), never for `PI_TASKS_RELAY_URL`,
 *   and never with `PI_TASKS_EMBEDDED_RELAY=0`. Anything answering on the port (Wolfpack, a user's
 *   own relay, another service) means no relay is started.
 * - Only its user may use it (docs/security.md, "The relay secret"): it is started with the user's
 *   relay secret for the port (`--secret-file`, src/trust/relay-secret.ts) and serves only clients
 *   that prove it. Before a Pi uses what answers on the port, that must prove the secret too
 *   (`relaySecretPlan` in relay-client/auth.ts says when): what answers without the proof is
 *   `untrusted` — never used, and the footer says why.
 * - A probe that times out is not an answer: something holds the port but did not answer in time —
 *   on a busy machine, most often the user's own relay. It is probed again (`relayProbeAttempts`,
 *   each waiting twice as long), and if it still does not answer it is `unanswered`, not a stranger:
 *   no relay is started on its port, and the Pi's passes keep challenging it and use it once it
 *   answers and proves the secret (the transport sends nothing before that).
 * - One per port and user: the starter holds `<relay secret dir>/<port>.lock` (the shared lock file
 *   of src/platform/file-lock.ts, naming its pid) while it starts the relay — also across the user's
 *   PI_TASKS_HOMEs; others wait for the relay to answer. A lock whose pid is gone is taken over.
 * - The relay's output goes to `$PI_TASKS_HOME/relays/<port>.log`; `<port>.json` (mode 0600)
 *   records its pid and a random instance nonce the relay also holds, so `/tasks` can say that
 *   pi-tasks started it and `pi-tasks relay stop` signals that pid only after the relay on the port
 *   proved it is that instance with that pid.
 * - A relay that goes away later without the person stopping it (a crash, a kill) is started again
 *   by the first Pi that finds its port silent (`reviveRelay`, at most every
 *   `relayReviveIntervalMs`, under the same lock). One the person stopped (`/tasks relay stop`,
 *   `pi-tasks relay stop`) leaves `<port>.stopped`: no Pi starts it again until the person does
 *   (`/tasks relay start`) or a new Pi session starts (which clears the mark).
 */
import { randomBytes } from "node:crypto";
import { spawn } from "node:child_process";
import { closeSync, openSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { TaskError, toTaskError } from "../protocol/errors.ts";
import { deriveRelayKeys, instanceProof, newChallenge, proofMatches, type RelayKeys } from "../protocol/jwt.ts";
import {
  relayInstanceBytes,
  relayProbeAttempts,
  relayProbeBudgetMs,
  relayProbeMs,
  relayReadyTimeoutMs,
  relayStartPollMs,
} from "../protocol/limits.ts";
import { RELAY_CHALLENGE_HEADER, RELAY_INSTANCE_PATH, RELAY_PROFILE } from "../protocol/names.ts";
import { isRecord } from "../protocol/validate.ts";
import { proveRelay, type RelayProbe, type RelaySecretPlan, relaySecretPlan } from "../relay-client/auth.ts";
import { type Env, fallbackPortsOf, piTasksHome, type RelayConfig } from "../relay-client/config.ts";
import { identifyServer } from "../relay-client/identify.ts";
import { replaceFile } from "../platform/atomic-file.ts";
import { lockHeldByLiveProcess, tryLock } from "../platform/file-lock.ts";
import { ensureHomeSubdirectory } from "../platform/home-dir.ts";
import { ensureRelaySecret, ensureSecretDir, readRelaySecret, relaySecretDir, relaySecretPath } from "../trust/relay-secret.ts";
import { CLI_BUNDLE, ownRuntime } from "./runtime.ts";
import { isAlive } from "../platform/processes.ts";
import { stopPids } from "./stop.ts";

/** The embedded relay's instance nonce travels to it here (its environment, not its command line). */
export const RELAY_INSTANCE_VARIABLE = "PI_TASKS_RELAY_INSTANCE";

/** What a Pi session uses as its relay, and how it came to be. */
export interface RelayInUse {
  readonly url: string;
  /**
   * - `configured`: the user named it (`PI_TASKS_RELAY_URL`);
   * - `running`: something already answered at the default URL;
   * - `started`: this process started it;
   * - `absent`: nothing answers and pi-tasks may not (opted out) or could not start one;
   * - `untrusted`: something answers but cannot prove the user's relay secret: it is never used;
   * - `unanswered`: something holds the port but did not answer the start-up probes in time: used
   *   once it answers (and proves the secret, when it must);
   * - `foreign`: what answers is not a volatile-v1 relay (a Wolfpack with only its v2 task relay,
   *   another server) and no relay of the user's could run beside it: tried, in case it changes.
   */
  readonly state: "configured" | "running" | "started" | "absent" | "untrusted" | "unanswered" | "foreign";
  /** The record of a relay pi-tasks started on this port (by this or an earlier Pi). */
  readonly record?: EmbeddedRelayRecord;
  /** Why nothing was started, or why starting failed, or why the relay is not used. */
  readonly problem?: string;
  /** The code of an `untrusted` or `unanswered` relay's problem (a start that failed is `RELAY_NOT_STARTED`). */
  readonly problemCode?: "RELAY_NOT_PROVEN" | "RELAY_SECRET_INVALID" | "RELAY_NOT_ANSWERING" | "RELAY_NOT_VOLATILE";
  /**
   * What holds the default port, when this relay runs beside it on a port of its own
   * (`fallbackPortsOf`): "port 18790: Wolfpack 1.6.22 with only its older v2 task relay …".
   */
  readonly beside?: string;
  /** The relay secret this relay proved it holds (its clients sign with it). */
  readonly secretFile?: string;
}

export interface EmbeddedRelayRecord {
  readonly pid: number;
  readonly port: number;
  readonly url: string;
  readonly log: string;
  readonly startedAt: string;
  /** The pid of the Pi process that started it. */
  readonly startedBy: number;
  /** The relay's instance nonce (base64url): the relay proves it holds it. Absent in older records. */
  readonly instance?: string;
}

export interface EnsureRelayOptions {
  readonly env: Env;
  readonly config: RelayConfig;
  /** Fetch for the probes (tests). */
  readonly fetch?: typeof fetch;
}

const RECORD_MODE = 0o600;
const INSTANCE_TEXT = new RegExp(`^[A-Za-z0-9_-]{${Math.ceil((relayInstanceBytes * 4) / 3)}}$`);

function relaysDir(env: Env): string {
  // The home's one creator: 0700, and a home others may enter is refused (src/platform/home-dir.ts).
  return ensureHomeSubdirectory(piTasksHome(env), "relays");
}

const paths = (env: Env, port: number) => {
  const dir = relaysDir(env);
  return { record: join(dir, `${port}.json`), log: join(dir, `${port}.log`), stopped: join(dir, `${port}.stopped`) };
};

/** The start lock of a port: the user's, not one home's, so two identities start one relay. */
const lockPath = (env: Env, port: number) => join(relaySecretDir(env), `${port}.lock`);

/** The instance nonce the embedded relay was given, when it is well formed. */
export function instanceFromEnv(env: Env): string | undefined {
  const value = env[RELAY_INSTANCE_VARIABLE]?.trim();
  return value !== undefined && INSTANCE_TEXT.test(value) ? value : undefined;
}

/** The record of `port` as written, whether or not its process still runs. */
function readRecord(env: Env, port: number): EmbeddedRelayRecord | undefined {
  try {
    const value: unknown = JSON.parse(readFileSync(paths(env, port).record, "utf8"));
    if (!isRecord(value) || typeof value.pid !== "number" || typeof value.url !== "string") return undefined;
    return value as unknown as EmbeddedRelayRecord;
  } catch {
    return undefined;
  }
}

/** The mark the person's stop leaves on a port: when, and the process that stopped it. */
export interface RelayStopMark {
  readonly at: string;
  readonly by: number;
}

/** The stop mark of `port`, when the person stopped the relay there (and no Pi started it since). */
export function relayStopMark(env: Env, port: number): RelayStopMark | undefined {
  try {
    const value: unknown = JSON.parse(readFileSync(paths(env, port).stopped, "utf8"));
    return isRecord(value) && typeof value.at === "string" && typeof value.by === "number" ? { at: value.at, by: value.by } : undefined;
  } catch {
    return undefined;
  }
}

/** Forgets the person's stop of `port`: a relay may be started there again. */
export function clearRelayStopMark(env: Env, port: number): void {
  rmSync(paths(env, port).stopped, { force: true });
}

/** The record of a relay pi-tasks started on `port`, when its process is still alive. */
export function embeddedRelayRecord(env: Env, port: number): EmbeddedRelayRecord | undefined {
  const record = readRecord(env, port);
  return record !== undefined && isAlive(record.pid) ? record : undefined;
}

const probe = (url: string, fetcher: typeof fetch, keys?: RelayKeys): Promise<RelayProbe> =>
  proveRelay(url, fetcher, keys, AbortSignal.timeout(relayProbeMs));

/**
 * Probes `url` until something answers: only a probe that timed out is tried again, each attempt
 * waiting twice as long as the one before — `relayProbeAttempts` in all, `relayProbeBudgetMs` at
 * most. A refused connection (nothing listens) or any answer ends it at once.
 */
export async function probeUntilAnswered(url: string, fetcher: typeof fetch, keys?: RelayKeys): Promise<RelayProbe> {
  let found = await probe(url, fetcher, keys);
  for (let attempt = 1; found.timedOut && attempt < relayProbeAttempts; attempt += 1)
    found = await proveRelay(url, fetcher, keys, AbortSignal.timeout(relayProbeMs * 2 ** attempt));
  return found;
}

/** Whether the relay at `url` proves it is the instance `instance` running as `pid` (and if not, why). */
async function instanceProven(
  url: string,
  fetcher: typeof fetch,
  instance: string,
  pid: number,
): Promise<{ readonly ok: true } | { readonly ok: false; readonly reason: string }> {
  const challenge = newChallenge();
  let body: unknown;
  try {
    const response = await fetcher(`${url}${RELAY_INSTANCE_PATH}`, {
      headers: { [RELAY_CHALLENGE_HEADER]: challenge },
      signal: AbortSignal.timeout(relayProbeMs),
    });
    body = await response.json().catch(() => undefined);
  } catch {
    return { ok: false, reason: `no relay answers at ${url}` };
  }
  if (!isRecord(body) || body.ok !== true || typeof body.pid !== "number" || typeof body.proof !== "string") {
    return { ok: false, reason: `what answers at ${url} does not prove which relay it is` };
  }
  if (!proofMatches(instanceProof(instance, challenge, body.pid), body.proof))
    return { ok: false, reason: `the relay at ${url} is not the instance the record names` };
  if (body.pid !== pid) return { ok: false, reason: `the relay at ${url} (that instance) runs as pid ${body.pid}` };
  return { ok: true };
}

/** Waits until a relay answers at `url` — one that proves `keys` when given — while `alive()`. */
async function waitForRelay(url: string, fetcher: typeof fetch, alive: () => boolean, keys: RelayKeys | undefined): Promise<boolean> {
  const ready = async () => {
    const found = await probe(url, fetcher, keys);
    return found.relay && (keys === undefined || found.proven);
  };
  const deadline = Date.now() + relayReadyTimeoutMs;
  while (Date.now() < deadline && alive()) {
    if (await ready()) return true;
    await sleep(relayStartPollMs);
  }
  return ready();
}

/** Waits until the relay this process started answers as itself, while it runs. */
async function waitForInstance(url: string, fetcher: typeof fetch, instance: string, pid: number, alive: () => boolean): Promise<boolean> {
  const deadline = Date.now() + relayReadyTimeoutMs;
  while (Date.now() < deadline && alive()) {
    if ((await instanceProven(url, fetcher, instance, pid)).ok) return true;
    await sleep(relayStartPollMs);
  }
  return alive() && (await instanceProven(url, fetcher, instance, pid)).ok;
}

/** A relay process started detached: its pid, or why it could not start; `exit()` tells whether it already ended. */
interface StartedRelay {
  readonly pid?: number;
  /** Resolves with the reason when the process could not start (a missing or unexecutable runtime). */
  readonly failed: Promise<string>;
  /** The exit code or signal once it ended, else undefined. */
  exit(): string | undefined;
}

/**
 * Starts `pi-tasks relay` detached on our runtime (runtime.ts), with the relay secret's path on its
 * command line and its instance nonce in its environment. Every failure of the child — it could not
 * start, it crashed — is observed here and reported, never left to become an uncaught `error` event in Pi.
 */
function startDetached(env: Env, port: number, log: string, secretFile: string, instance: string): StartedRelay {
  const runtime = ownRuntime(env);
  const out = openSync(log, "a");
  try {
    const inherited = Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined));
    const child = spawn(runtime.command, [CLI_BUNDLE, "relay", "--port", String(port), "--secret-file", secretFile], {
      detached: true,
      stdio: ["ignore", out, out],
      env: { ...inherited, ...runtime.env, [RELAY_INSTANCE_VARIABLE]: instance },
    });
    let ended: string | undefined;
    const failed = new Promise<string>((resolve) => {
      child.once("error", (error) => resolve(`${runtime.command} could not be started (${error.message})`));
    });
    child.once("exit", (code, signal) => {
      ended = signal === null ? `exit code ${code}` : `signal ${signal}`;
    });
    child.unref();
    return { ...(child.pid === undefined ? {} : { pid: child.pid }), failed, exit: () => ended };
  } finally {
    closeSync(out);
  }
}

/** The secret a plan asks for: its keys, or why it cannot be had (undefined keys: nothing to check). */
interface PlannedSecret {
  readonly keys?: RelayKeys;
  readonly problem?: TaskError;
}

function plannedSecret(plan: RelaySecretPlan | undefined): PlannedSecret {
  if (plan === undefined || !plan.mandatory) return {};
  try {
    const secret = plan.create ? ensureRelaySecret(plan.file) : readRelaySecret(plan.file);
    if (secret === undefined)
      throw new TaskError("RELAY_SECRET_INVALID", {
        message: `The relay secret ${plan.file} does not exist (PI_TASKS_RELAY_SECRET_FILE).`,
        details: { path: plan.file },
      });
    return { keys: deriveRelayKeys(secret) };
  } catch (error) {
    return { problem: toTaskError(error) };
  }
}

function untrusted(url: string, found: RelayProbe, file: string): RelayInUse {
  const port = new URL(url).port;
  const what = found.relay ? "a relay answers there" : `something answers there (not a ${RELAY_PROFILE} relay)`;
  return {
    url,
    state: "untrusted",
    problemCode: "RELAY_NOT_PROVEN",
    problem:
      `${what}, but it cannot prove it is yours: it does not hold your relay secret ${file} — another user's process, or a program on port ${port}. ` +
      `pi-tasks sends it nothing. Fix: stop what listens on port ${port} and restart Pi (a relay you run yourself: start it with --secret-file ${file}), or set PI_TASKS_RELAY_URL to a relay you choose`,
  };
}

/**
 * Something holds the default URL but never answered in time: not a stranger (nothing proved that),
 * not absent (no relay may be started on its port). The Pi's passes challenge it until it answers.
 */
function unanswered(env: Env, config: RelayConfig, plan: RelaySecretPlan | undefined, secret: PlannedSecret): RelayInUse {
  const { url } = config;
  if (secret.problem !== undefined)
    return { url, state: "untrusted", problemCode: "RELAY_SECRET_INVALID", problem: secret.problem.message };
  const record = config.port === undefined ? undefined : embeddedRelayRecord(env, config.port);
  const until = secret.keys === undefined ? "answers" : "answers and proves it holds your relay secret";
  return {
    url,
    state: "unanswered",
    problemCode: "RELAY_NOT_ANSWERING",
    problem:
      `something holds ${url} but did not answer pi-tasks' start-up probes in time (${relayProbeAttempts} tries within ${relayProbeBudgetMs} ms) — most likely your own relay on a busy machine. ` +
      `pi-tasks keeps trying and uses it once it ${until}; nothing is sent to it before. If it never answers: see what listens on port ${config.port}, or set PI_TASKS_RELAY_URL`,
    ...(record === undefined ? {} : { record }),
    ...(secret.keys === undefined ? {} : { secretFile: plan!.file }),
  };
}

/** What answered at the default URL, classified: used (`running`), or `untrusted`. */
function classifyAnswer(
  env: Env,
  config: RelayConfig,
  plan: RelaySecretPlan | undefined,
  secret: PlannedSecret,
  found: RelayProbe,
): RelayInUse {
  const { url } = config;
  if (secret.problem !== undefined)
    return { url, state: "untrusted", problemCode: "RELAY_SECRET_INVALID", problem: secret.problem.message };
  if (secret.keys !== undefined && !found.proven) return untrusted(url, found, plan!.file);
  const record = config.port === undefined ? undefined : embeddedRelayRecord(env, config.port);
  const problem = found.relay ? undefined : `something answers at ${url}, but it is not a ${RELAY_PROFILE} relay`;
  return {
    url,
    state: "running",
    ...(record === undefined ? {} : { record }),
    ...(problem === undefined ? {} : { problem }),
    ...(secret.keys === undefined ? {} : { secretFile: plan!.file }),
  };
}

/** What answers at `url` is not a volatile-v1 relay: named (`known`: already identified), with the fix (`foreign`: still tried, in case it changes). */
async function foreign(url: string, fetcher: typeof fetch, fix: string, known?: string): Promise<RelayInUse> {
  const words = known ?? (await identifyServer(url, fetcher)).words;
  return {
    url,
    state: "foreign",
    problemCode: "RELAY_NOT_VOLATILE",
    problem: `no ${RELAY_PROFILE} relay at ${url}: ${words} answers there. ${fix}`,
  };
}

/** A relay named by `PI_TASKS_RELAY_URL`: used as it is, unless the plan says it must prove a secret. */
async function configuredRelay(url: string, plan: RelaySecretPlan | undefined, fetcher: typeof fetch): Promise<RelayInUse> {
  const secret = plannedSecret(plan);
  if (secret.problem !== undefined)
    return { url, state: "untrusted", problemCode: "RELAY_SECRET_INVALID", problem: secret.problem.message };
  const found = await probe(url, fetcher, secret.keys);
  if (found.answered && found.foreign === true)
    return foreign(
      url,
      fetcher,
      "Fix: set PI_TASKS_RELAY_URL to a volatile-v1 relay, or unset it and pi-tasks runs your own relay beside it",
    );
  if (secret.keys === undefined) return { url, state: "configured" };
  // Not up yet: the transport challenges it before it sends it anything.
  if (found.answered && !found.proven) return untrusted(url, found, plan!.file);
  return { url, state: "configured", secretFile: plan!.file };
}

/** The relay this Pi session will use, starting the embedded relay when the rules allow it. */
export async function ensureRelay(options: EnsureRelayOptions): Promise<RelayInUse> {
  const { env, config } = options;
  const fetcher = options.fetch ?? fetch;
  const plan = relaySecretPlan(env, config);
  if (config.source === "PI_TASKS_RELAY_URL" || config.port === undefined) return configuredRelay(config.url, plan, fetcher);
  const secret = plannedSecret(plan);
  const found = await probeUntilAnswered(config.url, fetcher, secret.keys);
  if (found.answered && found.foreign === true) return besideForeign(env, { ...config, port: config.port }, fetcher);
  if (found.answered) return classifyAnswer(env, config, plan, secret, found);
  if (found.timedOut) return unanswered(env, config, plan, secret);
  if (!config.embedded) return { url: config.url, state: "absent", problem: "no relay answers and PI_TASKS_EMBEDDED_RELAY=0" };
  if (secret.problem !== undefined) return { url: config.url, state: "absent", problem: secret.problem.message };
  return startEmbedded(env, { ...config, port: config.port }, plan?.file ?? relaySecretPath(env, config.port), fetcher);
}

/**
 * The default port is held by a server that is not a volatile-v1 relay (the released Wolfpack):
 * the user's own relay runs beside it, on the first port of `fallbackPortsOf` that answers as the
 * user's relay or is free to start it on — the same port for every Pi of the user. A port held by
 * anything else is passed over. When none can be had (or pi-tasks may not start a relay), the
 * default is `foreign`: named, and still tried.
 */
async function besideForeign(env: Env, config: RelayConfig & { readonly port: number }, fetcher: typeof fetch): Promise<RelayInUse> {
  const held = (await identifyServer(config.url, fetcher)).words;
  const beside = `port ${config.port}: ${held} answers there`;
  if (config.embedded)
    for (const port of fallbackPortsOf(config.port)) {
      const url = `http://127.0.0.1:${port}`;
      const file = relaySecretPath(env, port);
      const secret = plannedSecret({ file, mandatory: true, create: true });
      if (secret.problem !== undefined) continue;
      const found = await probeUntilAnswered(url, fetcher, secret.keys);
      if (found.answered && found.proven) {
        const record = embeddedRelayRecord(env, port);
        return { url, state: "running", secretFile: file, beside, ...(record === undefined ? {} : { record }) };
      }
      if (found.answered || found.timedOut) continue;
      const started = await startEmbedded(env, { ...config, url, port }, file, fetcher);
      if (started.state === "started" || started.state === "running") return { ...started, beside };
    }
  const fix = config.embedded
    ? `pi-tasks found no port of ${fallbackPortsOf(config.port).join(", ")} free for your own relay beside it. Fix: free one of them, or set PI_TASKS_RELAY_URL`
    : "Fix: allow pi-tasks to run your relay beside it (unset PI_TASKS_EMBEDDED_RELAY=0), or set PI_TASKS_RELAY_URL";
  return foreign(config.url, fetcher, fix, held);
}

/** Starts the relay on the port under the user's start lock (or waits for the Pi that holds it). */
async function startEmbedded(
  env: Env,
  config: RelayConfig & { readonly port: number },
  secretFile: string,
  fetcher: typeof fetch,
): Promise<RelayInUse> {
  const { url, port } = config;
  let keys: RelayKeys;
  let lock: ReturnType<typeof tryLock>;
  try {
    keys = deriveRelayKeys(ensureRelaySecret(secretFile));
    ensureSecretDir(relaySecretDir(env));
    // The start lock for the port; a lock whose holder is gone is taken over at once.
    lock = tryLock(lockPath(env, port), { staleMs: 0 });
  } catch (error) {
    return { url, state: "absent", problem: toTaskError(error).message };
  }
  if (lock === undefined) {
    // Another Pi (of any home of this user) is starting it: use it once it answers as ours.
    const up = await waitForRelay(url, fetcher, () => lockHeldByLiveProcess(lockPath(env, port)), keys);
    const record = embeddedRelayRecord(env, port);
    return up
      ? { url, state: "running", secretFile, ...(record === undefined ? {} : { record }) }
      : { url, state: "absent", problem: "another Pi was starting the relay, and it did not answer" };
  }
  try {
    return await launch(env, config, secretFile, keys, fetcher);
  } catch (error) {
    return { url, state: "absent", problem: toTaskError(error).message };
  } finally {
    lock.release();
  }
}

/** Starts the relay process, records it, and waits until it answers as the instance it was given. */
async function launch(
  env: Env,
  config: RelayConfig & { readonly port: number },
  secretFile: string,
  keys: RelayKeys,
  fetcher: typeof fetch,
): Promise<RelayInUse> {
  const { url, port } = config;
  const files = paths(env, port);
  const instance = randomBytes(relayInstanceBytes).toString("base64url");
  const started = startDetached(env, port, files.log, secretFile, instance);
  if (started.pid === undefined) return { url, state: "absent", problem: await started.failed };
  const pid = started.pid;
  const record: EmbeddedRelayRecord = {
    pid,
    port,
    url,
    log: files.log,
    startedAt: new Date().toISOString(),
    startedBy: process.pid,
    instance,
  };
  replaceFile(files.record, `${JSON.stringify(record, null, 2)}\n`, RECORD_MODE);
  if (await waitForInstance(url, fetcher, instance, pid, () => started.exit() === undefined && isAlive(pid))) {
    clearRelayStopMark(env, port);
    return { url, state: "started", record, secretFile };
  }
  // It did not come up (port taken in the meantime, or it failed): someone else may answer now.
  rmSync(files.record, { force: true });
  const again = await probe(url, fetcher, keys);
  if (again.answered) return classifyAnswer(env, config, { file: secretFile, mandatory: true, create: false }, { keys }, again);
  const ended = started.exit();
  return {
    url,
    state: "absent",
    problem:
      ended === undefined
        ? `the relay pi-tasks started did not answer within ${relayReadyTimeoutMs} ms (see ${files.log})`
        : `the relay pi-tasks started ended at once (${ended}; see ${files.log})`,
  };
}

/**
 * Stops a relay pi-tasks started on `port` (by its record); false when there is none. The recorded
 * pid is signalled only when the relay on the port proves it is the recorded instance running as
 * that pid: a record whose process is gone or was replaced (a pid reused by something else, another
 * relay on the port) signals nothing — the stale record is removed and `RELAY_RECORD_STALE` says why.
 */
export async function stopEmbeddedRelay(
  env: Env,
  port: number,
  fetcher: typeof fetch = fetch,
): Promise<{ stopped: boolean; pid?: number }> {
  const record = readRecord(env, port);
  const file = paths(env, port).record;
  if (record === undefined || !isAlive(record.pid)) {
    rmSync(file, { force: true });
    return { stopped: false };
  }
  const proof =
    record.instance === undefined
      ? { ok: false as const, reason: "the record predates instance proofs" }
      : await instanceProven(record.url, fetcher, record.instance, record.pid);
  if (!proof.ok) {
    rmSync(file, { force: true });
    throw new TaskError("RELAY_RECORD_STALE", {
      message: `The record of the relay pi-tasks started on port ${port} names pid ${record.pid}, but ${proof.reason}: nothing was signalled, and the stale record was removed.`,
      details: { port, pid: record.pid, reason: proof.reason },
    });
  }
  const confirmed = await stopPids([record.pid]);
  if (!confirmed)
    throw new TaskError("TASK_ERROR", {
      message: `The relay process ${record.pid} could not be confirmed gone.`,
      details: { pid: record.pid, port },
    });
  rmSync(file, { force: true });
  const mark: RelayStopMark = { at: new Date().toISOString(), by: process.pid };
  replaceFile(paths(env, port).stopped, `${JSON.stringify(mark)}\n`, RECORD_MODE);
  return { stopped: true, pid: record.pid };
}

/** What a Pi found when it looked at its embedded relay's silent port (`reviveRelay`). */
export type RelayRevival =
  | { readonly kind: "not-embedded" }
  | { readonly kind: "stopped"; readonly port: number; readonly mark: RelayStopMark }
  | { readonly kind: "looked"; readonly relay: RelayInUse };

/**
 * For a Pi whose relay at `url` stopped answering: when it is the user's embedded relay (the
 * default loopback one, or the one beside a foreign server) and the person did not stop it, finds
 * or starts it as session start does (`ensureRelay`: only one Pi starts it; the others use it).
 */
export async function reviveRelay(options: EnsureRelayOptions & { readonly url: string }): Promise<RelayRevival> {
  const { env, config } = options;
  if (config.source === "PI_TASKS_RELAY_URL" || config.port === undefined || !config.embedded) return { kind: "not-embedded" };
  const port = Number(new URL(options.url).port);
  const mark = relayStopMark(env, port);
  if (mark !== undefined) return { kind: "stopped", port, mark };
  return { kind: "looked", relay: await ensureRelay(options) };
}
