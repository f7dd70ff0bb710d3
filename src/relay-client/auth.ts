/**
 * The client's credentials for a relay, and the check that a relay is the user's own.
 *
 * - The optional Wolfpack JWT (`WOLFPACK_JWT_SECRET`): a fresh HS256 token per request, only for
 *   plain-HTTP loopback URLs (`127.0.0.1`, `[::1]`, `localhost`). The secret never goes to HTTPS or
 *   remote URLs.
 * - The relay secret (docs/security.md, "The relay secret"): for a relay that must prove it holds
 *   the user's relay secret (`relaySecretPlan` says which), the transport first challenges it
 *   (`proveRelay`, on the profile, no token), then sends a one-use relay token with every request
 *   and checks the relay's proof on every reply. Such a relay gets no Wolfpack JWT.
 */
import { resolve } from "node:path";
import {
  challengeProof,
  deriveRelayKeys,
  type JwtClaimsOptions,
  jwtClaimsFromEnv,
  newChallenge,
  proofMatches,
  type RelayKeys,
  readJwtSecret,
  signJwt,
} from "../protocol/jwt.ts";
import { RELAY_CHALLENGE_HEADER, RELAY_CHALLENGE_PROOF_HEADER, RELAY_PROFILE, RELAY_PROFILE_PATH } from "../protocol/names.ts";
import { HTTP_STATUS } from "../protocol/http.ts";
import { isRecord } from "../protocol/validate.ts";
import { readRelaySecret, RELAY_SECRET_FILE_VARIABLE, relaySecretExists, relaySecretPath } from "../trust/relay-secret.ts";
import { defaultRelayPort, fallbackPortsOf, isLoopbackHttpUrl, type RelayConfig, relayConfigFromEnv } from "./config.ts";

/** The relay secret of one relay: the keys derived from it, and where it came from. */
export interface RelaySecretAuth {
  /** The relay's origin: only requests to it carry relay tokens. */
  readonly url: string;
  readonly keys: RelayKeys;
  readonly file: string;
}

export interface RelayAuth extends JwtClaimsOptions {
  /** `WOLFPACK_JWT_SECRET`. */
  readonly secret?: string;
  /** The relay secret of the configured relay, when it must prove it. */
  readonly relay?: RelaySecretAuth;
}

/**
 * Whether the relay at `config` must prove a relay secret, and which file holds it:
 *
 * - `PI_TASKS_RELAY_SECRET_FILE` names one: always, with that file (any relay URL);
 * - the default loopback relay `http://127.0.0.1:${WOLFPACK_PORT:-18790}` — found there, or named
 *   by `PI_TASKS_RELAY_URL` (as `pi-tasks spawn` names it to its workers) — with the user's secret
 *   for that port: always on 18790 without `WOLFPACK_PORT` (the secret is made then: `create`),
 *   else when the user has a secret for the port (pi-tasks started a relay there);
 * - an explicit loopback URL (`--relay http://127.0.0.1:PORT`, `PI_TASKS_RELAY_URL`) on a port
 *   where pi-tasks started a relay (the user has its secret): always, with that secret — the CLI
 *   reaches the relay a Pi started however it is named;
 * - any other relay (another explicit URL, Wolfpack on `WOLFPACK_PORT`): never — the user's choice.
 */
export interface RelaySecretPlan {
  readonly file: string;
  /** The relay must prove the secret (else it is used as it is). */
  readonly mandatory: boolean;
  /** A missing secret is made (the default port). */
  readonly create: boolean;
}

export function relaySecretPlan(env: Record<string, string | undefined>, config: RelayConfig): RelaySecretPlan | undefined {
  const named = env[RELAY_SECRET_FILE_VARIABLE]?.trim();
  if (named) return { file: resolve(named), mandatory: true, create: false };
  let port: number;
  try {
    port = defaultRelayPort(env);
  } catch {
    return undefined; // a malformed WOLFPACK_PORT beside PI_TASKS_RELAY_URL: not the default relay
  }
  if (config.url !== `http://127.0.0.1:${port}`) {
    // The user's own relay beside a server on the default port that is not a volatile-v1 relay
    // (src/host/embedded-relay.ts): it proves the secret made for its port, once one exists.
    const beside = fallbackPortsOf(port).find((next) => config.url === `http://127.0.0.1:${next}`);
    if (beside !== undefined) {
      const file = relaySecretPath(env, beside);
      return { file, mandatory: relaySecretExists(file), create: false };
    }
    return startedThere(env, config.url);
  }
  const file = relaySecretPath(env, port);
  const always = config.source === "default";
  return { file, mandatory: always || relaySecretExists(file), create: always };
}

/** A loopback relay URL on a port where pi-tasks started a relay (its secret exists): that secret, mandatory. */
function startedThere(env: Record<string, string | undefined>, url: string): RelaySecretPlan | undefined {
  const port = /^http:\/\/127\.0\.0\.1:(\d+)$/.exec(url)?.[1];
  if (port === undefined) return undefined;
  const file = relaySecretPath(env, Number(port));
  return relaySecretExists(file) ? { file, mandatory: true, create: false } : undefined;
}

/** The relay secret the environment's relay must prove, when the user has it. Throws `RELAY_SECRET_INVALID`. */
function relaySecretFromEnv(env: Record<string, string | undefined>, url: string | undefined): RelaySecretAuth | undefined {
  let config: RelayConfig;
  try {
    const configured = relayConfigFromEnv(env);
    // The relay the session was given (the user's relay beside a foreign server) is the one to prove.
    config = url === undefined || url === configured.url ? configured : { url, source: "PI_TASKS_RELAY_URL", embedded: false };
  } catch {
    return undefined; // the caller's own reading of the configuration reports it
  }
  const plan = relaySecretPlan(env, config);
  if (plan === undefined || !plan.mandatory) return undefined;
  const secret = readRelaySecret(plan.file);
  return secret === undefined ? undefined : { url: config.url, keys: deriveRelayKeys(secret), file: plan.file };
}

/**
 * The credentials from the environment: the Wolfpack JWT (a secret under 32 characters is
 * `RELAY_AUTH_REQUIRED`) and the relay secret of the configured relay (or of `url`, the relay the
 * session was given); undefined when neither.
 */
export function authFromEnv(env: Record<string, string | undefined>, url?: string): RelayAuth | undefined {
  const secret = readJwtSecret(env);
  const relay = relaySecretFromEnv(env, url);
  if (secret === undefined && relay === undefined) return undefined;
  return { ...(secret === undefined ? {} : { secret, ...jwtClaimsFromEnv(env) }), ...(relay === undefined ? {} : { relay }) };
}

/** The relay secret `auth` holds for the relay at `baseUrl`, if any. */
export function relaySecretFor(auth: RelayAuth | undefined, baseUrl: string): RelaySecretAuth | undefined {
  const relay = auth?.relay;
  if (relay === undefined) return undefined;
  try {
    return new URL(baseUrl).origin === new URL(relay.url).origin ? relay : undefined;
  } catch {
    return undefined;
  }
}

/** A Wolfpack JWT for `url` (only plain-HTTP loopback), or undefined. */
export async function tokenFor(auth: RelayAuth, url: string): Promise<string | undefined> {
  if (auth.secret === undefined || !isLoopbackHttpUrl(url)) return undefined;
  return signJwt(auth.secret, auth);
}

/** What answers at a relay URL: anything, a volatile-v1 relay, one that proved the secret. */
export interface RelayProbe {
  /** A whole answer came back (of any kind). */
  readonly answered: boolean;
  /**
   * No answer came within the deadline, although the request may have reached something (a refused
   * connection fails at once instead): a relay too busy to answer in time, or a program that never
   * answers. Not an answer, and no verdict on who holds the port.
   */
  readonly timedOut: boolean;
  readonly relay: boolean;
  /** It answered, but not as a volatile-v1 relay, and not asking for credentials: some other server. */
  readonly foreign?: boolean;
  /** It answered the challenge with the secret's proof (false without keys). */
  readonly proven: boolean;
  /** Why the request failed, when nothing answered. */
  readonly failure?: unknown;
}

function isTimeout(error: unknown): boolean {
  return error instanceof Error && error.name === "TimeoutError";
}

/**
 * Asks for the profile — with a fresh challenge when `keys` are given — and judges the answer. No
 * token, nothing of the secret goes out: a stranger learns only that someone asked. A deadline that
 * passes before the whole answer arrived (its headers or its body) is `timedOut`, never an answer.
 */
export async function proveRelay(
  url: string,
  fetcher: typeof fetch,
  keys: RelayKeys | undefined,
  signal: AbortSignal,
): Promise<RelayProbe> {
  const challenge = keys === undefined ? undefined : newChallenge();
  try {
    const response = await fetcher(`${url.replace(/\/+$/, "")}${RELAY_PROFILE_PATH}`, {
      headers: challenge === undefined ? {} : { [RELAY_CHALLENGE_HEADER]: challenge },
      signal,
    });
    const proof = response.headers.get(RELAY_CHALLENGE_PROOF_HEADER);
    const body: unknown = await response.json().catch(() => undefined);
    // The deadline passed while the body was read: no whole answer, not a wrong one.
    if (body === undefined && signal.aborted && isTimeout(signal.reason))
      return { answered: false, timedOut: true, relay: false, proven: false, failure: signal.reason };
    const relay = isRecord(body) && body.profile === RELAY_PROFILE;
    const proven = keys !== undefined && challenge !== undefined && relay && proofMatches(challengeProof(keys, challenge), proof);
    const asksCredentials = response.status === HTTP_STATUS.unauthorized || response.status === HTTP_STATUS.forbidden;
    return { answered: true, timedOut: false, relay, proven, foreign: !relay && !asksCredentials };
  } catch (error) {
    return { answered: false, timedOut: isTimeout(error), relay: false, proven: false, failure: error };
  }
}
