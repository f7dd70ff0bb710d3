/**
 * HS256 JSON Web Tokens for the optional Wolfpack JWT (docs/wire.md, "Request rules"), on WebCrypto.
 * The client mints a fresh short-lived token per request; the relay verifies them.
 */
import { TaskError } from "./errors.ts";
import { jwtClockToleranceMs, jwtIdBytes, jwtMinSecretChars, jwtTokenLifetimeMs, msPerSecond } from "./limits.ts";

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
  if (secret.length < jwtMinSecretChars) {
    throw new TaskError("RELAY_AUTH_REQUIRED", {
      message: `WOLFPACK_JWT_SECRET must have at least ${jwtMinSecretChars} characters`,
      details: { minimumChars: jwtMinSecretChars },
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
  if (typeof header !== "object" || header === null || (header as { alg?: unknown }).alg !== "HS256") return { ok: false, reason: "algorithm" };
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
