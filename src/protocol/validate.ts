/**
 * Schema validation with typed errors.
 *
 * `checkValue` answers `{ok, value}` or `{ok:false, error}` where the error is a `TaskError`
 * (default code `INVALID_REQUEST`) whose `details.path` is an RFC 6901 JSON Pointer to the first
 * offending field and `details.problem` says what is wrong with it.
 *
 * Works with `@sinclair/typebox` 0.34 (tests, CLI, relay) and typebox 1.x (what the Pi CLI serves
 * under the same import name); their error records differ and are normalised here.
 */
import type { Static, TSchema } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { type ErrorCode, TaskError } from "./errors.ts";

/** The part of a typebox `Value` module this helper needs. */
export interface ValueModule {
  Check(schema: TSchema, value: unknown): boolean;
  Errors(schema: TSchema, value: unknown): Iterable<unknown>;
}

interface RawError {
  /** typebox 0.34: an escaped JSON Pointer. */
  readonly path?: string;
  /** typebox 1.x: an AJV-style instance path (keys not escaped). */
  readonly instancePath?: string;
  readonly keyword?: string;
  readonly params?: Record<string, unknown>;
  readonly message?: string;
}

/** A JSON object (not null, not an array). */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export interface FirstError {
  readonly path: string;
  readonly problem: string;
}

function escapeToken(token: string): string {
  return token.replaceAll("~", "~0").replaceAll("/", "~1");
}

function firstName(list: unknown): string | undefined {
  return Array.isArray(list) && typeof list[0] === "string" ? list[0] : undefined;
}

/** Normalises one typebox error record of either major version. */
export function normaliseError(raw: unknown): FirstError {
  const error = (raw ?? {}) as RawError;
  const problem = typeof error.message === "string" ? error.message : "invalid value";
  if (typeof error.path === "string") return { path: error.path, problem };
  const base = typeof error.instancePath === "string" ? error.instancePath : "";
  // typebox 1.x reports missing and unexpected members on the parent object.
  if (error.keyword === "required") {
    const name = firstName(error.params?.requiredProperties);
    if (name !== undefined) return { path: `${base}/${escapeToken(name)}`, problem: "missing required property" };
  }
  if (error.keyword === "additionalProperties") {
    const name = firstName(error.params?.additionalProperties);
    if (name !== undefined) return { path: `${base}/${escapeToken(name)}`, problem: "unexpected property" };
  }
  if (error.keyword === "boolean") return { path: base, problem: "unexpected property" };
  return { path: base, problem };
}

export function firstError(schema: TSchema, value: unknown, values: ValueModule = Value): FirstError | undefined {
  for (const raw of values.Errors(schema, value)) return normaliseError(raw);
  return undefined;
}

export type CheckResult<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: TaskError };

export interface CheckOptions {
  /** Error code to raise (default `INVALID_REQUEST`). */
  readonly code?: ErrorCode;
  /** What was validated, for the message and `details.subject` (e.g. `agent_task_send`). */
  readonly subject?: string;
  /** Prefix for `details.path` when the value sits inside a larger document. */
  readonly pathPrefix?: string;
  readonly values?: ValueModule;
}

export function checkValue<S extends TSchema>(schema: S, value: unknown, options: CheckOptions = {}): CheckResult<Static<S>> {
  const values = options.values ?? Value;
  if (values.Check(schema, value)) return { ok: true, value: value as Static<S> };
  const first = firstError(schema, value, values) ?? { path: "", problem: "invalid value" };
  const path = `${options.pathPrefix ?? ""}${first.path}`;
  const where = path === "" ? "the value" : path;
  const subject = options.subject === undefined ? "" : `${options.subject}: `;
  return {
    ok: false,
    error: new TaskError(options.code ?? "INVALID_REQUEST", {
      message: `${subject}${where}: ${first.problem}`,
      details: { path, problem: first.problem, ...(options.subject === undefined ? {} : { subject: options.subject }) },
    }),
  };
}

/** Returns the value typed by the schema, or throws the typed error of `checkValue`. */
export function assertValid<S extends TSchema>(schema: S, value: unknown, options: CheckOptions = {}): Static<S> {
  const result = checkValue(schema, value, options);
  if (!result.ok) throw result.error;
  return result.value;
}
