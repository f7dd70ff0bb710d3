/**
 * HS256 JWT for the optional Wolfpack auth (docs/wire.md): the client's fresh tokens
 * and the relay's verifier, checked against an independent HS256 signer written here. And the
 * relay secret's tokens and proofs (docs/security.md, "The relay secret").
 */
import { describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { TaskError } from "../../src/protocol/errors.ts";
import {
  challengeProof,
  deriveRelayKeys,
  instanceProof,
  isChallenge,
  jwtClaimsFromEnv,
  newChallenge,
  proofMatches,
  readJwtSecret,
  RELAY_TOKEN_AUDIENCE,
  replyProof,
  signJwt,
  signRelayToken,
  verifyJwt,
  verifyRelayToken,
} from "../../src/protocol/jwt.ts";
import {
  jwtClockToleranceMs,
  jwtIdBytes,
  minJwtSecretChars,
  jwtTokenLifetimeMs,
  msPerSecond,
  relaySecretBytes,
  relayTokenClockToleranceMs,
  relayTokenIdBytes,
  relayTokenLifetimeMs,
} from "../../src/protocol/limits.ts";

const SECRET = "0123456789abcdef0123456789abcdef-test";
const TOLERANCE_S = jwtClockToleranceMs / msPerSecond;
const LIFETIME_S = jwtTokenLifetimeMs / msPerSecond;
/** A fixed instant on a whole second. */
const T0_S = 1_790_000_000;

function b64url(value: string | Uint8Array): string {
  return Buffer.from(value).toString("base64url");
}

/** An independent HS256 signer (any header and payload). */
async function forge(payload: unknown, options: { secret?: string; header?: unknown } = {}): Promise<string> {
  const header = b64url(JSON.stringify(options.header ?? { alg: "HS256", typ: "JWT" }));
  const body = b64url(JSON.stringify(payload));
  const key = await crypto.subtle.importKey(
    "raw",
    new TextEncoder().encode(options.secret ?? SECRET),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const signature = new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(`${header}.${body}`)));
  return `${header}.${body}.${b64url(signature)}`;
}

function decode(segment: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(segment, "base64url").toString("utf8"));
}

const at = (seconds: number) => ({ nowMs: seconds * msPerSecond });

describe("signJwt", () => {
  test("mints {alg:HS256,typ:JWT} with iat, exp = iat + lifetime and a random jti, verifiable independently", async () => {
    const token = await signJwt(SECRET, { nowMs: T0_S * msPerSecond + 999 });
    const [header, payload, signature] = token.split(".");
    expect(decode(header!)).toEqual({ alg: "HS256", typ: "JWT" });
    const claims = decode(payload!);
    expect(claims.iat).toBe(T0_S);
    expect(claims.exp).toBe(T0_S + LIFETIME_S);
    expect(claims.jti).toMatch(new RegExp(`^[0-9a-f]{${jwtIdBytes * 2}}$`));
    expect(claims.iss).toBeUndefined();
    expect(claims.aud).toBeUndefined();
    // Unpadded base64url segments; the signature is HMAC-SHA256 over header.payload.
    expect(token).not.toContain("=");
    const forged = await forge(claims);
    expect(forged.split(".")[2]).toBe(signature!);
  });

  test("every token is fresh (a new jti per call)", async () => {
    const tokens = await Promise.all([1, 2, 3].map(() => signJwt(SECRET, { nowMs: T0_S * msPerSecond })));
    expect(new Set(tokens).size).toBe(tokens.length);
  });

  test("carries iss and aud when configured", async () => {
    const token = await signJwt(SECRET, { issuer: "wolfpack", audience: "relay" });
    const claims = decode(token.split(".")[1]!);
    expect({ iss: claims.iss, aud: claims.aud }).toEqual({ iss: "wolfpack", aud: "relay" });
  });
});

describe("verifyJwt", () => {
  test("round trip", async () => {
    const token = await signJwt(SECRET);
    expect(await verifyJwt(SECRET, token)).toEqual({ ok: true });
    expect(await verifyJwt(SECRET, await forge({ sub: "anyone" }))).toEqual({ ok: true });
  });

  test("a tampered signature, payload or header, or another secret, is rejected", async () => {
    const token = await signJwt(SECRET, at(T0_S));
    const [header, payload, signature] = token.split(".") as [string, string, string];
    const flipped = `${signature.slice(0, -2)}${signature.at(-2) === "A" ? "B" : "A"}${signature.at(-1)}`;
    expect(await verifyJwt(SECRET, `${header}.${payload}.${flipped}`, at(T0_S))).toEqual({ ok: false, reason: "signature" });
    const otherPayload = b64url(JSON.stringify({ ...decode(payload), exp: T0_S + 10_000 }));
    expect(await verifyJwt(SECRET, `${header}.${otherPayload}.${signature}`, at(T0_S))).toEqual({ ok: false, reason: "signature" });
    const otherHeader = b64url(JSON.stringify({ alg: "HS256", typ: "JWT", kid: "x" }));
    expect(await verifyJwt(SECRET, `${otherHeader}.${payload}.${signature}`, at(T0_S))).toEqual({ ok: false, reason: "signature" });
    expect((await verifyJwt(`${SECRET}-other`, token, at(T0_S))).ok).toBe(false);
    const truncated = `${header}.${payload}.${signature.slice(0, 10)}`;
    expect((await verifyJwt(SECRET, truncated, at(T0_S))).ok).toBe(false);
  });

  test("alg none (unsigned or signed) and other algorithms are rejected", async () => {
    const payload = b64url(JSON.stringify({ iat: T0_S }));
    const none = b64url(JSON.stringify({ alg: "none", typ: "JWT" }));
    expect((await verifyJwt(SECRET, `${none}.${payload}.`, at(T0_S))).ok).toBe(false);
    expect(await verifyJwt(SECRET, await forge({ iat: T0_S }, { header: { alg: "none", typ: "JWT" } }), at(T0_S))).toEqual({
      ok: false,
      reason: "algorithm",
    });
    expect(await verifyJwt(SECRET, await forge({ iat: T0_S }, { header: { alg: "HS512", typ: "JWT" } }), at(T0_S))).toEqual({
      ok: false,
      reason: "algorithm",
    });
    expect(await verifyJwt(SECRET, await forge({ iat: T0_S }, { header: { typ: "JWT" } }), at(T0_S))).toEqual({
      ok: false,
      reason: "algorithm",
    });
  });

  test("malformed tokens are rejected", async () => {
    const valid = await signJwt(SECRET);
    const [header, payload, signature] = valid.split(".") as [string, string, string];
    for (const token of [
      "",
      "a.b",
      `${valid}.extra`,
      `${header}.${payload}`,
      `${header}.${payload}.sig+with/padding=`,
      `${header}!.${payload}.${signature}`,
      `${b64url("not json")}.${payload}.${signature}`,
      `${header}.${b64url("[1,2]")}.${signature}`,
    ]) {
      expect({ token, ok: (await verifyJwt(SECRET, token)).ok }).toEqual({ token, ok: false });
    }
    expect((await verifyJwt(SECRET, await forge([1, 2]))).ok).toBe(false);
    expect((await verifyJwt(SECRET, await forge("text"))).ok).toBe(false);
  });

  test("exp: valid until now − tolerance reaches exp", async () => {
    const token = await signJwt(SECRET, at(T0_S));
    const exp = T0_S + LIFETIME_S;
    expect(await verifyJwt(SECRET, token, { nowMs: (exp + TOLERANCE_S) * msPerSecond - 1 })).toEqual({ ok: true });
    expect(await verifyJwt(SECRET, token, at(exp + TOLERANCE_S))).toEqual({ ok: false, reason: "expired" });
    expect(await verifyJwt(SECRET, token, at(exp + TOLERANCE_S + 3_600))).toEqual({ ok: false, reason: "expired" });
  });

  test("nbf: rejected while now + tolerance is before nbf", async () => {
    const nbf = T0_S + 600;
    const token = await forge({ nbf });
    expect(await verifyJwt(SECRET, token, at(nbf - TOLERANCE_S))).toEqual({ ok: true });
    expect(await verifyJwt(SECRET, token, { nowMs: (nbf - TOLERANCE_S) * msPerSecond - 1 })).toEqual({
      ok: false,
      reason: "not-yet-valid",
    });
  });

  test("iat: rejected while now + tolerance is before iat", async () => {
    const token = await signJwt(SECRET, at(T0_S));
    expect(await verifyJwt(SECRET, token, at(T0_S - TOLERANCE_S))).toEqual({ ok: true });
    expect(await verifyJwt(SECRET, token, { nowMs: (T0_S - TOLERANCE_S) * msPerSecond - 1 })).toEqual({
      ok: false,
      reason: "issued-in-future",
    });
  });

  test("time claims are optional, but must be numbers when present", async () => {
    expect(await verifyJwt(SECRET, await forge({}), at(T0_S))).toEqual({ ok: true });
    expect(await verifyJwt(SECRET, await forge({ exp: String(T0_S + 60) }), at(T0_S))).toEqual({ ok: false, reason: "exp" });
    expect(await verifyJwt(SECRET, await forge({ nbf: null }), at(T0_S))).toEqual({ ok: false, reason: "nbf" });
    expect(await verifyJwt(SECRET, await forge({ iat: "now" }), at(T0_S))).toEqual({ ok: false, reason: "iat" });
  });

  test("iss must equal the configured issuer when one is configured", async () => {
    const token = await signJwt(SECRET, { issuer: "wolfpack" });
    expect(await verifyJwt(SECRET, token, { issuer: "wolfpack" })).toEqual({ ok: true });
    expect(await verifyJwt(SECRET, token, { issuer: "other" })).toEqual({ ok: false, reason: "issuer" });
    expect(await verifyJwt(SECRET, await signJwt(SECRET), { issuer: "wolfpack" })).toEqual({ ok: false, reason: "issuer" });
    // Not configured: any iss is fine.
    expect(await verifyJwt(SECRET, token)).toEqual({ ok: true });
  });

  test("aud (string or array) must contain the configured audience when one is configured", async () => {
    expect(await verifyJwt(SECRET, await signJwt(SECRET, { audience: "relay" }), { audience: "relay" })).toEqual({ ok: true });
    expect(await verifyJwt(SECRET, await forge({ aud: ["other", "relay"] }), { audience: "relay" })).toEqual({ ok: true });
    expect(await verifyJwt(SECRET, await forge({ aud: ["other", "more"] }), { audience: "relay" })).toEqual({
      ok: false,
      reason: "audience",
    });
    expect(await verifyJwt(SECRET, await forge({ aud: "relay-2" }), { audience: "relay" })).toEqual({ ok: false, reason: "audience" });
    expect(await verifyJwt(SECRET, await forge({}), { audience: "relay" })).toEqual({ ok: false, reason: "audience" });
    expect(await verifyJwt(SECRET, await forge({ aud: ["x"] }))).toEqual({ ok: true });
  });
});

describe("configuration from the environment", () => {
  test("WOLFPACK_JWT_SECRET is trimmed; unset or blank disables; shorter than minJwtSecretChars is RELAY_AUTH_REQUIRED", () => {
    expect(readJwtSecret({})).toBeUndefined();
    expect(readJwtSecret({ WOLFPACK_JWT_SECRET: "  \t " })).toBeUndefined();
    const exact = "k".repeat(minJwtSecretChars);
    expect(readJwtSecret({ WOLFPACK_JWT_SECRET: `  ${exact}\n` })).toBe(exact);
    let thrown: unknown;
    try {
      readJwtSecret({ WOLFPACK_JWT_SECRET: ` ${"k".repeat(minJwtSecretChars - 1)}     ` });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(TaskError);
    expect((thrown as TaskError).code).toBe("RELAY_AUTH_REQUIRED");
  });

  test("WOLFPACK_JWT_ISSUER and WOLFPACK_JWT_AUDIENCE are trimmed and optional", () => {
    expect(jwtClaimsFromEnv({})).toEqual({});
    expect(jwtClaimsFromEnv({ WOLFPACK_JWT_ISSUER: " wolfpack ", WOLFPACK_JWT_AUDIENCE: " relay " })).toEqual({
      issuer: "wolfpack",
      audience: "relay",
    });
    expect(jwtClaimsFromEnv({ WOLFPACK_JWT_ISSUER: "  ", WOLFPACK_JWT_AUDIENCE: "" })).toEqual({});
  });
});

describe("relay tokens and proofs (the relay secret)", () => {
  const keys = deriveRelayKeys(Buffer.alloc(relaySecretBytes, 7));
  const other = deriveRelayKeys(Buffer.alloc(relaySecretBytes, 8));
  const T0_MS = T0_S * msPerSecond;
  const LIFETIME_MS = relayTokenLifetimeMs;

  test("a relay token is HS256 {iat, exp: iat + 10 s, jti of 16 random bytes, aud}, verified with its expiry for the replay memory", () => {
    const token = signRelayToken(keys, T0_MS + 999);
    const [header, payload] = token.split(".");
    expect(decode(header!)).toEqual({ alg: "HS256", typ: "JWT" });
    const claims = decode(payload!);
    expect(claims).toEqual({
      iat: T0_S,
      exp: T0_S + LIFETIME_MS / msPerSecond,
      jti: expect.stringMatching(new RegExp(`^[0-9a-f]{${relayTokenIdBytes * 2}}$`)),
      aud: RELAY_TOKEN_AUDIENCE,
    });
    expect(verifyRelayToken(keys, token, T0_MS)).toEqual({
      ok: true,
      signed: true,
      jti: claims.jti as string,
      expiresAtMs: T0_MS + LIFETIME_MS + relayTokenClockToleranceMs,
    });
    expect(signRelayToken(keys, T0_MS)).not.toBe(signRelayToken(keys, T0_MS));
  });

  test("it lives seconds, not a minute: refused once its lifetime and the tolerance passed, and before its iat", () => {
    const token = signRelayToken(keys, T0_MS);
    const end = T0_MS + LIFETIME_MS + relayTokenClockToleranceMs;
    expect(verifyRelayToken(keys, token, end - 1).ok).toBe(true);
    expect(verifyRelayToken(keys, token, end)).toEqual({ ok: false, signed: true, reason: "expired" });
    expect(verifyRelayToken(keys, token, T0_MS - relayTokenClockToleranceMs - 1)).toEqual({
      ok: false,
      signed: true,
      reason: "issued-in-future",
    });
    expect(LIFETIME_MS).toBeLessThan(jwtTokenLifetimeMs);
  });

  test("another secret, a tampered token, or one that claims a longer life or no audience is refused; only a good signature counts as signed", () => {
    const token = signRelayToken(keys, T0_MS);
    expect(verifyRelayToken(other, token, T0_MS)).toEqual({ ok: false, signed: false, reason: "signature" });
    const [header, payload, signature] = token.split(".") as [string, string, string];
    const longer = b64url(JSON.stringify({ ...decode(payload), exp: T0_S + 3_600 }));
    expect(verifyRelayToken(keys, `${header}.${longer}.${signature}`, T0_MS).signed).toBe(false);
    const sign = (claims: unknown) => {
      const input = `${header}.${b64url(JSON.stringify(claims))}`;
      return `${input}.${createHmac("sha256", keys.token).update(input).digest("base64url")}`;
    };
    const base = decode(payload);
    expect(verifyRelayToken(keys, sign(base), T0_MS).ok).toBe(true);
    expect(verifyRelayToken(keys, sign({ ...base, exp: T0_S + 3_600 }), T0_MS)).toEqual({ ok: false, signed: true, reason: "lifetime" });
    expect(verifyRelayToken(keys, sign({ ...base, aud: undefined }), T0_MS)).toEqual({ ok: false, signed: true, reason: "audience" });
    expect(verifyRelayToken(keys, sign({ ...base, jti: "short" }), T0_MS)).toEqual({ ok: false, signed: true, reason: "jti" });
    expect(verifyRelayToken(keys, sign({ ...base, iat: "now" }), T0_MS)).toEqual({ ok: false, signed: true, reason: "time claims" });
    expect(verifyRelayToken(keys, "a.b", T0_MS)).toEqual({ ok: false, signed: false, reason: "malformed" });
  });

  test("each purpose has its own derived key, so no answer the relay gives to chosen input signs a token", () => {
    const secret = Buffer.alloc(relaySecretBytes, 7);
    expect(keys.token.equals(keys.challenge) || keys.token.equals(keys.reply) || keys.challenge.equals(keys.reply)).toBe(false);
    expect(keys.token.equals(secret)).toBe(false);
    // The relay's answers to chosen input never sign a token: the challenge answer is keyed apart.
    const token = signRelayToken(keys, T0_MS);
    const input = token.split(".").slice(0, 2).join(".");
    expect(challengeProof(keys, input)).not.toBe(token.split(".")[2]);
    expect(replyProof(keys, input)).not.toBe(token.split(".")[2]);
  });

  test("challenges are 32 random bytes as base64url; only the secret's holder answers one", () => {
    const challenge = newChallenge();
    expect(isChallenge(challenge)).toBe(true);
    expect(isChallenge(`${challenge}x`)).toBe(false);
    expect(isChallenge("x".repeat(challenge.length - 1) + "+")).toBe(false);
    expect(isChallenge(undefined)).toBe(false);
    expect(proofMatches(challengeProof(keys, challenge), challengeProof(keys, challenge))).toBe(true);
    expect(proofMatches(challengeProof(keys, challenge), challengeProof(other, challenge))).toBe(false);
    expect(proofMatches(challengeProof(keys, challenge), null)).toBe(false);
    expect(proofMatches(challengeProof(keys, challenge), "short")).toBe(false);
  });

  test("an instance proof binds the nonce, the challenge and the pid", () => {
    const nonce = Buffer.alloc(relaySecretBytes, 1).toString("base64url");
    const challenge = newChallenge();
    const proof = instanceProof(nonce, challenge, 4242);
    expect(instanceProof(nonce, challenge, 4242)).toBe(proof);
    expect(instanceProof(nonce, challenge, 4243)).not.toBe(proof);
    expect(instanceProof(nonce, newChallenge(), 4242)).not.toBe(proof);
    expect(instanceProof(Buffer.alloc(relaySecretBytes, 2).toString("base64url"), challenge, 4242)).not.toBe(proof);
  });
});
