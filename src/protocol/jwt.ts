/**
 * HS256 JSON Web Tokens, and the proofs of a relay secret (docs/wire.md, "Request rules" and "Our
 * additions").
 *
 * - The optional Wolfpack JWT (`WOLFPACK_JWT_SECRET`), on WebCrypto: the client mints a fresh token
 *   per request (60 s), the relay verifies it; as on Wolfpack, a token may be used more than once.
 * - The relay secret (docs/security.md, "The relay secret"), on node:crypto: three keys derived
 *   from it with HKDF, one per purpose, so no answer made with one can stand for another —
 *   tokens (HS256, 10 s, one use: the relay remembers each `jti`), the relay's answer to a
 *   client's challenge, and the relay's proof on each reply to a token.
 */
import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from "node:crypto";
import { TaskError } from "./errors.ts";
import {
  jwtClockToleranceMs,
  jwtIdBytes,
  minJwtSecretChars,
  jwtTokenLifetimeMs,
  msPerSecond,
  relayChallengeBytes,
  relayTokenClockToleranceMs,
  relayTokenIdBytes,
  relayTokenLifetimeMs,
} from "./limits.ts";

const encoder = new TextEncoder();
const HEADER = { alg: "HS256", typ: "JWT" } as const;

function base64url(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString("base64url");
}

function decodeSegment(segment: string): unknown {
  if (!/^[A-Za-z0-9_-]*$/.test(segment)) throw new Error("not base64url");
  return JSON.parse(Buffer.from(segment, "base64url").toString("utf8"));
}

/** Reads `WOLFPACK_JWT_SECRET` (trimmed). Undefined when unset or empty; short secrets are errors. */
export function readJwtSecret(env: Record<string, string | undefined>): string | undefined {
  const secret = env.WOLFPACK_JWT_SECRET?.trim();
  if (secret === undefined || secret.length === 0) return undefined;
  if (secret.length < minJwtSecretChars) {
    throw new TaskError("RELAY_AUTH_REQUIRED", {
      message: `WOLFPACK_JWT_SECRET must have at least ${minJwtSecretChars} characters`,
      details: { minimumChars: minJwtSecretChars },
    });
  }
  return secret;
}

export interface JwtClaimsOptions {
  readonly issuer?: string;
  readonly audience?: string;
}

export function jwtClaimsFromEnv(env: Record<string, string | undefined>): JwtClaimsOptions {
  const issuer = env.WOLFPACK_JWT_ISSUER?.trim();
  const audience = env.WOLFPACK_JWT_AUDIENCE?.trim();
  return { ...(issuer ? { issuer } : {}), ...(audience ? { audience } : {}) };
}

async function hmacKey(secret: string, usage: "sign" | "verify"): Promise<CryptoKey> {
  return crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, [usage]);
}

/** A fresh token: `{iat, exp: iat + 60, jti: 16 hex, iss?, aud?}`. */
export async function signJwt(secret: string, options: JwtClaimsOptions & { nowMs?: number } = {}): Promise<string> {
  const iat = Math.floor((options.nowMs ?? Date.now()) / msPerSecond);
  const jti = Buffer.from(crypto.getRandomValues(new Uint8Array(jwtIdBytes))).toString("hex");
  const payload = {
    iat,
    exp: iat + jwtTokenLifetimeMs / msPerSecond,
    jti,
    ...(options.issuer ? { iss: options.issuer } : {}),
    ...(options.audience ? { aud: options.audience } : {}),
  };
  const signingInput = `${base64url(encoder.encode(JSON.stringify(HEADER)))}.${base64url(encoder.encode(JSON.stringify(payload)))}`;
  const signature = await crypto.subtle.sign("HMAC", await hmacKey(secret, "sign"), encoder.encode(signingInput));
  return `${signingInput}.${base64url(new Uint8Array(signature))}`;
}

export type JwtVerdict = { readonly ok: true } | { readonly ok: false; readonly reason: string };

/** Verifies an HS256 token: signature (constant time, WebCrypto), then optional claims with tolerance. */
export async function verifyJwt(secret: string, token: string, options: JwtClaimsOptions & { nowMs?: number } = {}): Promise<JwtVerdict> {
  const segments = token.split(".");
  if (segments.length !== 3) return { ok: false, reason: "malformed" };
  const [headerText, payloadText, signatureText] = segments as [string, string, string];
  let header: unknown;
  let payload: unknown;
  try {
    header = decodeSegment(headerText);
    payload = decodeSegment(payloadText);
    if (!/^[A-Za-z0-9_-]+$/.test(signatureText)) return { ok: false, reason: "malformed" };
  } catch {
    return { ok: false, reason: "malformed" };
  }
  if (typeof header !== "object" || header === null || (header as { alg?: unknown }).alg !== "HS256")
    return { ok: false, reason: "algorithm" };
  if (typeof payload !== "object" || payload === null || Array.isArray(payload)) return { ok: false, reason: "malformed" };
  const valid = await crypto.subtle.verify(
    "HMAC",
    await hmacKey(secret, "verify"),
    Buffer.from(signatureText, "base64url"),
    encoder.encode(`${headerText}.${payloadText}`),
  );
  if (!valid) return { ok: false, reason: "signature" };
  const claims = payload as Record<string, unknown>;
  const now = (options.nowMs ?? Date.now()) / msPerSecond;
  const tolerance = jwtClockToleranceMs / msPerSecond;
  const numeric = (name: string) => (typeof claims[name] === "number" ? (claims[name] as number) : undefined);
  const exp = numeric("exp");
  const nbf = numeric("nbf");
  const iat = numeric("iat");
  for (const name of ["exp", "nbf", "iat"]) {
    if (claims[name] !== undefined && numeric(name) === undefined) return { ok: false, reason: name };
  }
  if (exp !== undefined && now - tolerance >= exp) return { ok: false, reason: "expired" };
  if (nbf !== undefined && now + tolerance < nbf) return { ok: false, reason: "not-yet-valid" };
  if (iat !== undefined && now + tolerance < iat) return { ok: false, reason: "issued-in-future" };
  if (options.issuer !== undefined && claims.iss !== options.issuer) return { ok: false, reason: "issuer" };
  if (options.audience !== undefined) {
    const audience = claims.aud;
    const matches = Array.isArray(audience) ? audience.includes(options.audience) : audience === options.audience;
    if (!matches) return { ok: false, reason: "audience" };
  }
  return { ok: true };
}

// ---------------------------------------------------------------------------------------------
// The relay secret
// ---------------------------------------------------------------------------------------------

/** The `aud` of every relay token: a Wolfpack JWT verifier configured with an audience refuses it. */
export const RELAY_TOKEN_AUDIENCE = "pi-tasks-relay";
/** HKDF `info` of each derived key (the salt is empty: the secret is already uniformly random). */
const KEY_INFO = { token: "pi-tasks relay token v1", challenge: "pi-tasks relay challenge v1", reply: "pi-tasks relay reply v1" } as const;
const INSTANCE_LABEL = "pi-tasks relay instance v1";
/** SHA-256 output, the size of every derived key. */
const DERIVED_KEY_BYTES = 32;
const ENCODED_HEADER = base64url(encoder.encode(JSON.stringify(HEADER)));
const BASE64URL = /^[A-Za-z0-9_-]+$/;
/** base64url characters of `bytes` random bytes (no padding). */
const base64urlChars = (bytes: number) => Math.ceil((bytes * 4) / 3);

/** The keys of one relay secret. Held by the relay and by every client that proves the secret. */
export interface RelayKeys {
  readonly token: Buffer;
  readonly challenge: Buffer;
  readonly reply: Buffer;
}

export function deriveRelayKeys(secret: Uint8Array): RelayKeys {
  const derive = (info: string) => Buffer.from(hkdfSync("sha256", secret, new Uint8Array(0), info, DERIVED_KEY_BYTES));
  return { token: derive(KEY_INFO.token), challenge: derive(KEY_INFO.challenge), reply: derive(KEY_INFO.reply) };
}

function hmac(key: Uint8Array, text: string): string {
  return createHmac("sha256", key).update(text).digest("base64url");
}

/** Whether `actual` is `expected` (constant time; a missing or other-length value is not). */
export function proofMatches(expected: string, actual: string | null | undefined): boolean {
  if (typeof actual !== "string" || actual.length !== expected.length) return false;
  return timingSafeEqual(Buffer.from(expected), Buffer.from(actual));
}

/** A fresh random challenge (base64url of `relayChallengeBytes` bytes). */
export function newChallenge(): string {
  return randomBytes(relayChallengeBytes).toString("base64url");
}

/** A challenge as the relay accepts it: base64url of exactly `relayChallengeBytes` bytes. */
export function isChallenge(value: unknown): value is string {
  return typeof value === "string" && value.length === base64urlChars(relayChallengeBytes) && BASE64URL.test(value);
}

/** The relay's answer to a client's challenge: only a holder of the secret can make it. */
export function challengeProof(keys: RelayKeys, challenge: string): string {
  return hmac(keys.challenge, challenge);
}

/** The relay's proof on its reply to a request that carried `token` (a reply only the secret's holder could make). */
export function replyProof(keys: RelayKeys, token: string): string {
  return hmac(keys.reply, token);
}

/**
 * An embedded relay's proof that it is the instance its record names: keyed with the instance
 * nonce, over the client's challenge and the pid it answers with.
 */
export function instanceProof(instance: string, challenge: string, pid: number): string {
  return hmac(Buffer.from(instance, "base64url"), `${INSTANCE_LABEL}\0${challenge}\0${pid}`);
}

/** A fresh relay token: HS256 `{iat, exp: iat + 10, jti, aud}` signed with the token key. */
export function signRelayToken(keys: RelayKeys, nowMs: number = Date.now()): string {
  const iat = Math.floor(nowMs / msPerSecond);
  const payload = {
    iat,
    exp: iat + relayTokenLifetimeMs / msPerSecond,
    jti: randomBytes(relayTokenIdBytes).toString("hex"),
    aud: RELAY_TOKEN_AUDIENCE,
  };
  const signingInput = `${ENCODED_HEADER}.${base64url(encoder.encode(JSON.stringify(payload)))}`;
  return `${signingInput}.${hmac(keys.token, signingInput)}`;
}

/**
 * The verdict on a relay token. `signed`: its signature is the secret's (so the relay proves its
 * reply even when it refuses the token, e.g. as a replay); `expiresAtMs`: until when the relay must
 * remember its `jti`.
 */
export type RelayTokenVerdict =
  | { readonly ok: true; readonly signed: true; readonly jti: string; readonly expiresAtMs: number }
  | { readonly ok: false; readonly signed: boolean; readonly reason: string };

function relayClaimsProblem(claims: Record<string, unknown>, nowMs: number): string | undefined {
  const { iat, exp, jti, aud } = claims;
  if (typeof iat !== "number" || typeof exp !== "number" || !Number.isFinite(iat) || !Number.isFinite(exp)) return "time claims";
  if (typeof jti !== "string" || !new RegExp(`^[0-9a-f]{${relayTokenIdBytes * 2}}$`).test(jti)) return "jti";
  if (aud !== RELAY_TOKEN_AUDIENCE) return "audience";
  // A token may not live longer than the lifetime: the relay remembers its id only that long.
  if (exp < iat || (exp - iat) * msPerSecond > relayTokenLifetimeMs) return "lifetime";
  if (nowMs - relayTokenClockToleranceMs >= exp * msPerSecond) return "expired";
  if (nowMs + relayTokenClockToleranceMs < iat * msPerSecond) return "issued-in-future";
  return undefined;
}

/** Verifies a relay token (signature in constant time, then its claims); remembering its `jti` is the relay's. */
export function verifyRelayToken(keys: RelayKeys, token: string, nowMs: number = Date.now()): RelayTokenVerdict {
  const segments = token.split(".");
  if (segments.length !== 3 || !segments.every((segment) => BASE64URL.test(segment)))
    return { ok: false, signed: false, reason: "malformed" };
  const [headerText, payloadText, signature] = segments as [string, string, string];
  if (!proofMatches(hmac(keys.token, `${headerText}.${payloadText}`), signature)) return { ok: false, signed: false, reason: "signature" };
  let claims: unknown;
  try {
    const header = decodeSegment(headerText) as { alg?: unknown } | null;
    if (header?.alg !== "HS256") return { ok: false, signed: true, reason: "algorithm" };
    claims = decodeSegment(payloadText);
  } catch {
    return { ok: false, signed: true, reason: "malformed" };
  }
  if (typeof claims !== "object" || claims === null || Array.isArray(claims)) return { ok: false, signed: true, reason: "malformed" };
  const problem = relayClaimsProblem(claims as Record<string, unknown>, nowMs);
  if (problem !== undefined) return { ok: false, signed: true, reason: problem };
  const { jti, exp } = claims as { jti: string; exp: number };
  return { ok: true, signed: true, jti, expiresAtMs: exp * msPerSecond + relayTokenClockToleranceMs };
}
