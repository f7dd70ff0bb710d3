/**
 * What every conformance check stands on: the shape of a check, the kit it runs with (the relay's
 * URL and epoch, the required features, fresh sessions), the wire assertions (`expectWireError`,
 * `expectWireValue`) and small assertion helpers. Assertions are `node:assert/strict`, so the suite
 * runs in-process on Node and on Bun alike; a failure says what was expected and what the relay
 * answered.
 */
import assert from "node:assert/strict";
import { inspect, isDeepStrictEqual } from "node:util";
import type { TSchema } from "@sinclair/typebox";
import { isUuid } from "../protocol/endpoint.ts";
import { ERROR_REGISTRY, type RegisteredErrorCode } from "../protocol/errors.ts";
import { HTTP_STATUS } from "../protocol/http.ts";
import { RELAY_PROFILE } from "../protocol/names.ts";
import { firstError } from "../protocol/validate.ts";
import { EPOCHLESS_CODES, RELAY_REPLIES, WireErrorBody, WireSuccessBody } from "../protocol/wire.ts";
import { type ConnectOptions, getProfile, WireSession } from "./wire-client.ts";

// ---------------------------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------------------------

/** `feature` of a check that holds the relay to our relay's rules: it runs when any addition is required. */
export const ANY_ADDITION = "*";

/** One conformance check: data, run by ./runner.ts (or registered as a bun test). */
export interface ConformanceCheck {
  readonly name: string;
  /** The group it belongs to (one file of ./groups/). */
  readonly group: string;
  /**
   * The addition it needs (`FEATURE_WATCH`, …, or `ANY_ADDITION`): skipped unless the run requires
   * it. Without one, every relay must pass the check.
   */
  readonly feature?: string;
  /**
   * Runs alone, with no other check in flight: it counts relay-wide state, measures time or fills
   * the admission slots. Otherwise it may run concurrently with the other non-serial checks.
   */
  readonly serial?: boolean;
  /** Its own deadline; default `CONFORMANCE_TEST_TIMEOUT_MS`. */
  readonly timeoutMs?: number;
  run(kit: ConformanceKit): Promise<void>;
}

/** Whether `check` runs when the relay must have `features` (otherwise it is skipped). */
export function isRequired(check: ConformanceCheck, features: readonly string[]): boolean {
  if (check.feature === undefined) return true;
  return check.feature === ANY_ADDITION ? features.length > 0 : features.includes(check.feature);
}

/** `group > name`, as a run reports the check. */
export function checkTitle(check: ConformanceCheck): string {
  return `${check.group} > ${check.name}`;
}

/** The checks of one group, each labelled with it. */
export function inGroup(group: string, checks: readonly Omit<ConformanceCheck, "group">[]): ConformanceCheck[] {
  return checks.map((check) => ({ ...check, group }));
}

// ---------------------------------------------------------------------------------------------
// Assertion helpers (node:assert/strict, with messages that show both sides)
// ---------------------------------------------------------------------------------------------

/** A value as a failure message shows it (short, on one line). */
export function show(value: unknown): string {
  return inspect(value, { depth: 6, breakLength: Number.POSITIVE_INFINITY, maxArrayLength: 20, maxStringLength: 400 });
}

function labelled(label: string | undefined, text: string): string {
  return label === undefined ? text : `${label}: ${text}`;
}

// These compare first and then `assert.fail` with their own message: Bun's `assert.equal` would
// append its diff to a given message, Node's would not.

/** `actual` is `expected` (`Object.is`, as `assert.equal` of node:assert/strict). */
export function equal(actual: unknown, expected: unknown, label?: string): void {
  if (!Object.is(actual, expected)) assert.fail(labelled(label, `expected ${show(expected)}, got ${show(actual)}`));
}

/** `actual` deeply equals `expected` (as `assert.deepEqual` of node:assert/strict). */
export function deepEqual(actual: unknown, expected: unknown, label?: string): void {
  if (!isDeepStrictEqual(actual, expected)) assert.fail(labelled(label, `expected ${show(expected)}, got ${show(actual)}`));
}

export function above(actual: number, bound: number, label?: string): void {
  assert.ok(actual > bound, labelled(label, `expected more than ${show(bound)}, got ${show(actual)}`));
}

export function atLeast(actual: number, bound: number, label?: string): void {
  assert.ok(actual >= bound, labelled(label, `expected at least ${show(bound)}, got ${show(actual)}`));
}

export function below(actual: number, bound: number, label?: string): void {
  assert.ok(actual < bound, labelled(label, `expected less than ${show(bound)}, got ${show(actual)}`));
}

export function atMost(actual: number, bound: number, label?: string): void {
  assert.ok(actual <= bound, labelled(label, `expected at most ${show(bound)}, got ${show(actual)}`));
}

/** `whole` (a list or a text) holds `part`. */
export function contains(whole: readonly unknown[] | string, part: unknown, label?: string): void {
  const found = typeof whole === "string" ? typeof part === "string" && whole.includes(part) : whole.includes(part);
  assert.ok(found, labelled(label, `expected ${show(whole)} to contain ${show(part)}`));
}

/** `whole` (a list or a text) does not hold `part`. */
export function lacks(whole: readonly unknown[] | string, part: unknown, label?: string): void {
  const found = typeof whole === "string" ? typeof part === "string" && whole.includes(part) : whole.includes(part);
  assert.ok(!found, labelled(label, `expected ${show(whole)} not to contain ${show(part)}`));
}

// ---------------------------------------------------------------------------------------------
// Wire assertions
// ---------------------------------------------------------------------------------------------

/** What the assertion helpers need of a reply (an HTTP `fetch` reply or a raw-socket one). */
export interface ReplyLike {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  readonly body: any;
}

export interface ErrorExpectation {
  /** The relay's current epoch; checked when the body carries one (or when `requireEpoch`). */
  readonly epoch?: string;
  /** HTTP status; default the registry's status of the code. */
  readonly status?: number;
  /** Every error body must carry the epoch (our relay); otherwise only non-epochless codes must. */
  readonly requireEpoch?: boolean;
}

export function describeReply(reply: ReplyLike): string {
  return `HTTP ${reply.status} ${reply.text.slice(0, 400)}`;
}

/** One field of a reply: `where` says what was expected of the whole reply and what it was. */
function field(where: string, name: string, actual: unknown, expected: unknown): void {
  equal(actual, expected, `${where}\n  ${name}`);
}

/**
 * Asserts a typed error reply: the status, `Cache-Control: no-store`, `ok:false`,
 * `profile:"volatile-v1"`, the code, `retryable` as the error table says (docs/wire.md), the
 * epoch, and the body's shape (`WireErrorBody`).
 * Returns `body.error`.
 */
export function expectWireError(reply: ReplyLike, code: RegisteredErrorCode, expectation: ErrorExpectation = {}): any {
  const row = ERROR_REGISTRY[code];
  const status = expectation.status ?? row.httpStatus;
  const where = `expected ${code} (HTTP ${status}), got ${describeReply(reply)}`;
  field(where, "status", reply.status, status ?? -1);
  field(where, "cache-control", reply.headers.get("cache-control"), "no-store");
  field(where, "ok", reply.body?.ok, false);
  field(where, "profile", reply.body.profile, RELAY_PROFILE);
  field(where, "error.code", reply.body.error?.code, code);
  field(where, "error.retryable", reply.body.error.retryable, row.retryable);
  field(where, "typeof error.message", typeof reply.body.error.message, "string");
  field(where, "WireErrorBody mismatch", firstError(WireErrorBody, reply.body), undefined);
  if (expectation.epoch !== undefined) {
    const mustCarry = expectation.requireEpoch === true || !EPOCHLESS_CODES.has(code);
    if (mustCarry || reply.body.epoch !== undefined) field(where, "epoch", reply.body.epoch, expectation.epoch);
  }
  return reply.body.error;
}

/** The reply value schema of each `kind`. */
const REPLY_OF_KIND: Readonly<Record<string, TSchema>> = Object.fromEntries(
  Object.values(RELAY_REPLIES)
    .flatMap((schema: TSchema): TSchema[] => ("anyOf" in schema ? (schema.anyOf as TSchema[]) : [schema]))
    .map((schema) => [schema.properties.kind.const, schema]),
);

/**
 * Asserts a success reply of `kind` carrying the epoch and `Cache-Control: no-store`, shaped as
 * `WireSuccessBody` with the reply value schema of its operation; returns `value`.
 */
export function expectWireValue(reply: ReplyLike, kind: string, epoch?: string): any {
  const where = `expected a ${kind} value, got ${describeReply(reply)}`;
  field(where, "status", reply.status, HTTP_STATUS.ok);
  field(where, "cache-control", reply.headers.get("cache-control"), "no-store");
  field(where, "ok", reply.body?.ok, true);
  field(where, "profile", reply.body.profile, RELAY_PROFILE);
  field(where, "epoch is a UUID", isUuid(reply.body.epoch), true);
  if (epoch !== undefined) field(where, "epoch", reply.body.epoch, epoch);
  field(where, "value.kind", reply.body.value?.kind, kind);
  field(where, "WireSuccessBody mismatch", firstError(WireSuccessBody, reply.body), undefined);
  field(where, `${kind} value mismatch`, firstError(REPLY_OF_KIND[kind]!, reply.body.value), undefined);
  return reply.body.value;
}

// ---------------------------------------------------------------------------------------------
// Small tools of the checks
// ---------------------------------------------------------------------------------------------

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Runs `count` async jobs, at most `width` at a time, in index order. */
export async function inBatches<T>(count: number, width: number, job: (index: number) => Promise<T>): Promise<T[]> {
  const results: T[] = [];
  for (let start = 0; start < count; start += width) {
    const batch = Array.from({ length: Math.min(width, count - start) }, (_, offset) => job(start + offset));
    results.push(...(await Promise.all(batch)));
  }
  return results;
}

/** A string of exactly `length` characters that starts unique to this run. */
export function exactLength(length: number): string {
  const unique = crypto.randomUUID().replaceAll("-", "");
  return (unique + "n".repeat(length)).slice(0, length);
}

export function isoOffset(offsetMs: number): string {
  return new Date(Date.now() + offsetMs).toISOString();
}

export const cursorsOf = (deliveries: { cursor: string }[]) => deliveries.map((delivery) => delivery.cursor);
export const idsOf = (deliveries: { envelope: { envelopeId: string } }[]) => deliveries.map((delivery) => delivery.envelope.envelopeId);

// ---------------------------------------------------------------------------------------------
// The kit
// ---------------------------------------------------------------------------------------------

/** What a check runs with: one relay, its epoch, the required features, fresh sessions. */
export interface ConformanceKit {
  readonly baseUrl: string;
  /** The relay's epoch, read from its profile before any check runs. */
  readonly epoch: string;
  /** The additions the relay must have and advertise (`FEATURE_WATCH`, …); empty: Wolfpack's wire only. */
  readonly features: readonly string[];
  /**
   * Any addition required: the relay is held to our relay's rules too (every error body typed
   * with `profile` and the epoch, the session status route, no per-client request bucket, a new
   * generation frees the retired mailbox).
   */
  readonly additions: boolean;
  hasFeature(feature: string): boolean;
  /** `expectWireError` with this relay's epoch (required on every error body when `additions`). */
  expectError(reply: ReplyLike, code: RegisteredErrorCode, status?: number): any;
  /**
   * `expectError` for whichever of `codes` the reply carries: an input Wolfpack's relay answers
   * otherwise than ours, both allowed by its spec (ours is checked alone by group "strict answers").
   */
  expectErrorOf(reply: ReplyLike, codes: readonly RegisteredErrorCode[]): any;
  /** `expectWireValue` with this relay's epoch. */
  expectValue(reply: ReplyLike, kind: string): any;
  /** A freshly named session connected to the relay. */
  session(label: string, extra?: ConnectOptions): Promise<WireSession>;
  /** Two fresh sessions (`label-a`, `label-b`). */
  pair(label: string): Promise<[WireSession, WireSession]>;
}

/** Reads the relay's profile (its epoch) and returns the kit of a run; throws when no relay answers. */
export async function createKit(baseUrl: string, features: readonly string[]): Promise<ConformanceKit> {
  const reply = await getProfile(baseUrl);
  if (reply.status !== 200 || reply.body?.ok !== true) throw new Error(`profile discovery failed: ${describeReply(reply)}`);
  const epoch: string = reply.body.epoch;
  const additions = features.length > 0;
  const session = (label: string, extra: ConnectOptions = {}) => WireSession.connect(baseUrl, { label, ...extra });
  return {
    baseUrl,
    epoch,
    features,
    additions,
    hasFeature: (feature) => features.includes(feature),
    expectError: (reply, code, status) =>
      expectWireError(reply, code, { epoch, requireEpoch: additions, ...(status === undefined ? {} : { status }) }),
    expectErrorOf: (reply, codes) => {
      const code = reply.body?.error?.code;
      if (!codes.includes(code)) assert.fail(`expected one of ${codes.join(", ")}, got ${describeReply(reply)}`);
      return expectWireError(reply, code, { epoch, requireEpoch: additions });
    },
    expectValue: (reply, kind) => expectWireValue(reply, kind, epoch),
    session,
    pair: (label) => Promise.all([session(`${label}-a`), session(`${label}-b`)]),
  };
}
