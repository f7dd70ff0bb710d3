/**
 * Binding secrets (`binding-secret-v1`, docs/wire.md): a client that connects with a secret of its
 * own choosing makes its registration protected; every bound operation on it, and every connect
 * that renews, replaces or revives it, must carry that same secret. The engine hashes what
 * requests carry; the store keeps and compares only digests, so no secret is ever stored, and a
 * comparison takes the same time wherever two digests differ.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { SecretMatch } from "./store/store.ts";

/** The digest the store keeps of a secret: SHA-256 of its UTF-8 text, lowercase hex. */
export function secretDigest(secret: string): string {
  return createHash("sha256").update(secret, "utf8").digest("hex");
}

/** Whether two digests are equal, compared in constant time (digests of another length never are). */
export function sameDigest(a: string, b: string): boolean {
  const left = Buffer.from(a, "utf8");
  const right = Buffer.from(b, "utf8");
  return left.length === right.length && timingSafeEqual(left, right);
}

/** A bound request's secret digest (`presented`) against its registration's (`held`): see `SecretMatch`. */
export function matchSecret(held: string | undefined, presented: string | undefined): SecretMatch {
  if (held === undefined) return presented === undefined ? "ok" : "mismatch";
  if (presented === undefined) return "missing";
  return sameDigest(held, presented) ? "ok" : "mismatch";
}
