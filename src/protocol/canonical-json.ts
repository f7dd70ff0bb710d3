/**
 * Canonical JSON, shared by the relay server (envelope dedupe digests) and the client
 * (byte-identical retries, payload size checks).
 *
 * Rules (docs/wire.md, "Request rules"): object keys sorted in default JS (UTF-16 code unit) order,
 * `undefined` members dropped, array holes and `undefined` array items written as `null`,
 * non-finite numbers rejected, primitives serialized with `JSON.stringify`.
 */
import { createHash } from "node:crypto";
import { TaskError } from "./errors.ts";

function reject(path: string, problem: string): never {
  throw new TaskError("INVALID_REQUEST", { details: { path, problem } });
}

function escapePointer(key: string): string {
  return key.replaceAll("~", "~0").replaceAll("/", "~1");
}

/** Canonical JSON text computed earlier, embedded as is (so a part is not canonicalized twice). */
export class CanonicalText {
  constructor(readonly text: string) {}
}

function write(value: unknown, path: string, out: string[]): void {
  if (value instanceof CanonicalText) {
    out.push(value.text);
    return;
  }
  switch (typeof value) {
    case "string":
    case "boolean":
      out.push(JSON.stringify(value));
      return;
    case "number":
      if (!Number.isFinite(value)) reject(path, "non-finite number");
      out.push(JSON.stringify(value));
      return;
    case "object": {
      if (value === null) {
        out.push("null");
        return;
      }
      if (Array.isArray(value)) {
        out.push("[");
        for (let index = 0; index < value.length; index += 1) {
          if (index > 0) out.push(",");
          const item: unknown = value[index];
          if (item === undefined) out.push("null");
          else write(item, `${path}/${index}`, out);
        }
        out.push("]");
        return;
      }
      const prototype = Object.getPrototypeOf(value);
      if (prototype !== Object.prototype && prototype !== null) reject(path, "not a plain object");
      const record = value as Record<string, unknown>;
      const keys = Object.keys(record).sort();
      out.push("{");
      let first = true;
      for (const key of keys) {
        const member = record[key];
        if (member === undefined) continue;
        if (!first) out.push(",");
        first = false;
        out.push(JSON.stringify(key), ":");
        write(member, `${path}/${escapePointer(key)}`, out);
      }
      out.push("}");
      return;
    }
    default:
      reject(path, `unsupported ${typeof value}`);
  }
}

/** The canonical JSON text of a value; throws `INVALID_REQUEST` (with `details.path`) otherwise. */
export function canonicalJson(value: unknown): string {
  if (value === undefined) reject("", "undefined has no JSON form");
  const out: string[] = [];
  write(value, "", out);
  return out.join("");
}

/** UTF-8 byte length of a string. */
export function utf8Bytes(text: string): number {
  return Buffer.byteLength(text, "utf8");
}

/** UTF-8 byte length of a value's canonical JSON. */
export function canonicalBytes(value: unknown): number {
  return utf8Bytes(canonicalJson(value));
}

/**
 * Lower-case hex SHA-256 of a string's UTF-8 bytes. Synchronous (node:crypto): on the relay's send
 * path WebCrypto's promise costs several times the hash of a 1.5 KB envelope (`npm run bench`).
 */
export function sha256Hex(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}

/** SHA-256 of a value's canonical JSON. */
export function canonicalDigest(value: unknown): string {
  return sha256Hex(canonicalJson(value));
}
