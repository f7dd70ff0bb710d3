/**
 * Who may use the relay, and how it proves itself (docs/wire.md, "Request rules" and "Our
 * additions"; docs/security.md, "The relay secret"). The handler asks `authorize` for every request on
 * a known route, before the client gate.
 *
 * - Without a relay secret or `WOLFPACK_JWT_SECRET`: everyone (Wolfpack's wire as it is).
 * - `WOLFPACK_JWT_SECRET`: a valid HS256 bearer token of that secret, as on Wolfpack (60 s, usable
 *   more than once, every route).
 * - A relay secret (`pi-tasks relay --secret-file`; the embedded relay always has one): a bearer
 *   relay token (10 s, each `jti` accepted once), or, when also configured, a Wolfpack JWT. The
 *   profile and the instance route stay open, so a client can make the relay prove itself before
 *   it sends any token: the profile answers a challenge with `x-pi-tasks-relay-proof`. Every reply
 *   to a request whose token carries the secret's signature — refused or not — carries
 *   `x-pi-tasks-reply-proof`, so the client knows the answer came from the secret's holder.
 * - An instance nonce (the embedded relay): `GET /api/pi-tasks/relay-instance` answers a challenge
 *   with the relay's pid and a proof keyed with the nonce, so `pi-tasks relay stop` signals a pid only
 *   when the process on the port is the very relay its record names.
 */
import { TaskError } from "../protocol/errors.ts";
import { HTTP_STATUS } from "../protocol/http.ts";
import {
  challengeProof,
  deriveRelayKeys,
  instanceProof,
  isChallenge,
  type JwtClaimsOptions,
  jwtClaimsFromEnv,
  type RelayKeys,
  readJwtSecret,
  replyProof,
  verifyJwt,
  verifyRelayToken,
} from "../protocol/jwt.ts";
import {
  RELAY_CHALLENGE_HEADER,
  RELAY_CHALLENGE_PROOF_HEADER,
  RELAY_INSTANCE_PATH,
  RELAY_PROFILE,
  RELAY_PROFILE_PATH,
  RELAY_REPLY_PROOF_HEADER,
} from "../protocol/names.ts";
import { createTokenReplayCache, type TokenReplayCache } from "./token-replay.ts";

export interface RelayAuthOptions {
  /** `WOLFPACK_JWT_SECRET`, `…_ISSUER`, `…_AUDIENCE`. */
  readonly env: Record<string, string | undefined>;
  /** The relay secret: clients must prove they hold it. */
  readonly relaySecret?: Uint8Array;
  /** The embedded relay's instance nonce (base64url), for the instance route. */
  readonly instance?: string;
  /** Wall clock for token times (tests). */
  readonly now?: () => number;
}

/** The verdict on one request; `proof` is the reply proof to send with whatever is answered. */
export type AuthVerdict =
  | { readonly ok: true; readonly proof?: string }
  | { readonly ok: false; readonly error: TaskError; readonly proof?: string };

export interface RelayAuth {
  /** The instance route, when this relay has an instance nonce. */
  readonly instancePath?: string;
  authorize(request: { readonly headers: { get(name: string): string | null } }, pathname: string): AuthVerdict | Promise<AuthVerdict>;
  /** Headers answering a profile request's challenge (none without a relay secret or a challenge). */
  challengeHeaders(headers: { get(name: string): string | null }): Record<string, string>;
  /** The instance route's answer body; throws `INVALID_REQUEST` (400) without a well-formed challenge. */
  instance(headers: { get(name: string): string | null }, epoch: string): unknown;
}

const AUTHORIZED: AuthVerdict = { ok: true };
const BEARER = /^bearer\s+(\S+)$/i;

function refused(problem: string, proof?: string): AuthVerdict {
  const error = new TaskError("RELAY_AUTH_REQUIRED", { details: { httpStatus: HTTP_STATUS.unauthorized, problem } });
  return { ok: false, error, ...(proof === undefined ? {} : { proof }) };
}

/** A relay token, judged and (when good) remembered; undefined when its signature is not the secret's. */
function acceptedRelayToken(keys: RelayKeys, replays: TokenReplayCache, token: string, nowMs: number): AuthVerdict | undefined {
  const verdict = verifyRelayToken(keys, token, nowMs);
  if (!verdict.signed) return undefined;
  const proof = replyProof(keys, token);
  if (!verdict.ok) return refused(`relay token ${verdict.reason}`, proof);
  const seen = replays.remember(verdict.jti, verdict.expiresAtMs, nowMs);
  if (seen.fresh) return { ok: true, proof };
  if (seen.replayed) return refused("relay token already used (a replay)", proof);
  const error = new TaskError("RELAY_CAPACITY", { details: { budget: "token-ids", retryAfterMs: seen.retryAfterMs } });
  return { ok: false, error, proof };
}

export function createRelayAuth(options: RelayAuthOptions): RelayAuth {
  const jwtSecret = readJwtSecret(options.env);
  const claims: JwtClaimsOptions = jwtClaimsFromEnv(options.env);
  const keys = options.relaySecret === undefined ? undefined : deriveRelayKeys(options.relaySecret);
  const replays = createTokenReplayCache();
  const now = options.now ?? Date.now;
  const instanceNonce = options.instance;
  // The instance route tells only a pid, proved with a nonce no token can stand for: always open,
  // so `relay stop` needs no credential. The profile is open on a relay with a secret (the challenge).
  const open = new Set<string>(keys === undefined ? [RELAY_INSTANCE_PATH] : [RELAY_PROFILE_PATH, RELAY_INSTANCE_PATH]);

  // Synchronous unless a Wolfpack JWT must be verified (WebCrypto): an open relay's hot path awaits nothing.
  function authorize(
    request: { readonly headers: { get(name: string): string | null } },
    pathname: string,
  ): AuthVerdict | Promise<AuthVerdict> {
    if ((keys === undefined && jwtSecret === undefined) || open.has(pathname)) return AUTHORIZED;
    const token = BEARER.exec((request.headers.get("authorization") ?? "").trim())?.[1];
    if (token === undefined) return refused("unauthorized");
    if (keys !== undefined) {
      const verdict = acceptedRelayToken(keys, replays, token, now());
      if (verdict !== undefined) return verdict;
    }
    if (jwtSecret === undefined) return refused("unauthorized");
    return verifyJwt(jwtSecret, token, claims).then((verdict) => (verdict.ok ? AUTHORIZED : refused("unauthorized")));
  }

  return {
    ...(instanceNonce === undefined ? {} : { instancePath: RELAY_INSTANCE_PATH }),
    authorize,
    challengeHeaders(headers): Record<string, string> {
      const challenge = headers.get(RELAY_CHALLENGE_HEADER);
      if (keys === undefined || !isChallenge(challenge)) return {};
      return { [RELAY_CHALLENGE_PROOF_HEADER]: challengeProof(keys, challenge) };
    },
    instance(headers, epoch) {
      const challenge = headers.get(RELAY_CHALLENGE_HEADER);
      if (instanceNonce === undefined || !isChallenge(challenge)) {
        throw new TaskError("INVALID_REQUEST", {
          details: { httpStatus: HTTP_STATUS.badRequest, problem: `a ${RELAY_CHALLENGE_HEADER} header is required` },
        });
      }
      const pid = process.pid;
      return { ok: true, profile: RELAY_PROFILE, epoch, pid, proof: instanceProof(instanceNonce, challenge, pid) };
    },
  };
}

/** `reply` with the reply proof header, when there is one. */
export function withReplyProof<R extends { readonly headers: Readonly<Record<string, string>> }>(reply: R, proof: string | undefined): R {
  return proof === undefined ? reply : { ...reply, headers: { ...reply.headers, [RELAY_REPLY_PROOF_HEADER]: proof } };
}
