/**
 * Canonical JSON, shared by the relay server (envelope dedupe digests) and the client
 * (byte-identical retries, payload size checks).
 *
 * Rules (docs/wire.md, "Request rules"): object keys sorted in default JS (UTF-16 code unit) order,
 * `undefined` members dropped, array holes and `undefined` array items written as `null`,
 * non-finite numbers rejected, primitives serialized as `JSON.stringify` writes them.
 *
 * The writer is on every send and receive path (the relay's included), so it does no more than the
 * text needs: keys already in order are not sorted, a string or number that `JSON.stringify` would
 * write as is is not handed to it, and the JSON Pointer of a rejected value is built only when
 * rejecting. The text is the same either way (tests/unit/canonical-json.property.test.ts).
 */
import { createHash } from "node:crypto";
import { TaskError } from "./errors.ts";
import { maxCanonicalScanChars } from "./limits.ts";

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

const QUOTATION_MARK = 0x22;
const REVERSE_SOLIDUS = 0x5c;
const FIRST_PRINTABLE = 0x20;
const FIRST_SURROGATE = 0xd800;
const LAST_SURROGATE = 0xdfff;

/**
 * Whether `JSON.stringify` may write this UTF-16 code unit otherwise than as itself: it escapes the
 * quotation mark, the reverse solidus, control characters and lone surrogates, nothing else.
 */
function mayEscape(unit: number): boolean {
  return (
    unit < FIRST_PRINTABLE || unit === QUOTATION_MARK || unit === REVERSE_SOLIDUS || (unit >= FIRST_SURROGATE && unit <= LAST_SURROGATE)
  );
}

/** A string as `JSON.stringify` writes it: between quotes as is when nothing in it may be escaped. */
function quote(text: string): string {
  if (text.length > maxCanonicalScanChars) return JSON.stringify(text);
  for (let index = 0; index < text.length; index += 1) if (mayEscape(text.charCodeAt(index))) return JSON.stringify(text);
  return `"${text}"`;
}

/** Whether keys are already in default sort order (UTF-16 code units, what `<` compares). */
function inOrder(keys: readonly string[]): boolean {
  for (let index = 1; index < keys.length; index += 1) if (keys[index - 1]! > keys[index]!) return false;
  return true;
}

/** The text written so far, and the keys and indices down to the value being written. */
class Writer {
  text = "";
  readonly at: (string | number)[] = [];

  /** Rejects the value being written; its JSON Pointer is built only now. */
  reject(problem: string): never {
    return reject(this.at.map((step) => `/${typeof step === "number" ? step : escapePointer(step)}`).join(""), problem);
  }
}

function writeArray(items: readonly unknown[], writer: Writer): void {
  writer.text += "[";
  for (let index = 0; index < items.length; index += 1) {
    if (index > 0) writer.text += ",";
    const item: unknown = items[index];
    if (item === undefined) {
      writer.text += "null";
      continue;
    }
    writer.at.push(index);
    write(item, writer);
    writer.at.pop();
  }
  writer.text += "]";
}

function writeObject(value: object, writer: Writer): void {
  const prototype = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) writer.reject("not a plain object");
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  if (!inOrder(keys)) keys.sort();
  writer.text += "{";
  let first = true;
  for (const key of keys) {
    const member = record[key];
    if (member === undefined) continue;
    writer.text += first ? `${quote(key)}:` : `,${quote(key)}:`;
    first = false;
    writer.at.push(key);
    write(member, writer);
    writer.at.pop();
  }
  writer.text += "}";
}

/** Numbers: a finite number's `JSON.stringify` text is its `String` text (`-0` included: `0`). */
function write(value: unknown, writer: Writer): void {
  switch (typeof value) {
    case "string":
      writer.text += quote(value);
      return;
    case "boolean":
      writer.text += value ? "true" : "false";
      return;
    case "number":
      if (!Number.isFinite(value)) writer.reject("non-finite number");
      writer.text += String(value);
      return;
    case "object":
      if (value === null) writer.text += "null";
      else if (Array.isArray(value)) writeArray(value, writer);
      else if (value instanceof CanonicalText) writer.text += value.text;
      else writeObject(value, writer);
      return;
    default:
      writer.reject(`unsupported ${typeof value}`);
  }
}

/** The canonical JSON text of a value; throws `INVALID_REQUEST` (with `details.path`) otherwise. */
export function canonicalJson(value: unknown): string {
  if (value === undefined) reject("", "undefined has no JSON form");
  const writer = new Writer();
  write(value, writer);
  return writer.text;
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
