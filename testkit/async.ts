/**
 * Small async helpers shared by tests and bench: a deferred, error capture, waiting with a
 * deadline or polling until something holds, and collecting unhandled rejections. Deadlines reuse
 * `within` (src/platform/waits.ts), whose timer never outlives the wait.
 *
 * Error capture goes through `.then(…, …)`, never Bun's eager rejects-matcher, which starves
 * same-process HTTP (docs/failure-history.md #24).
 */
import { within } from "../src/platform/waits.ts";
import { TaskError } from "../src/protocol/errors.ts";

export interface Deferred<T> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

/** A promise with its resolve and reject (for work that waits on the test, or parts on each other). */
export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

function expectTaskError(error: unknown): TaskError {
  if (error instanceof TaskError) return error;
  throw new Error(`expected a TaskError, got ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`, {
    cause: error,
  });
}

/** The TaskError a promise rejects with (fails the test when it resolves or rejects otherwise). */
export async function failure(promise: Promise<unknown>): Promise<TaskError> {
  const outcome = await promise.then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );
  if (outcome.ok) throw new Error(`expected a failure, got ${JSON.stringify(outcome.value)}`);
  return expectTaskError(outcome.error);
}

/** The TaskError a synchronous call throws (fails the test when it returns or throws otherwise). */
export function thrown(call: () => unknown): TaskError {
  try {
    call();
  } catch (error) {
    return expectTaskError(error);
  }
  throw new Error("expected a throw");
}

/** The TaskError a call throws synchronously, or its returned promise rejects with; and which it was. */
export async function raised(call: () => unknown): Promise<{ error: TaskError; synchronous: boolean }> {
  let result: unknown;
  try {
    result = call();
  } catch (error) {
    return { error: expectTaskError(error), synchronous: true };
  }
  return { error: await failure(Promise.resolve(result)), synchronous: false };
}

/** Lets pending promise callbacks run (fake timers do not advance microtasks by themselves). */
export async function flushMicrotasks(rounds = 20): Promise<void> {
  for (let index = 0; index < rounds; index += 1) await Promise.resolve();
}

/** Whether a promise has settled by now (after letting pending callbacks run for `waitMs`). */
export async function settledYet(promise: Promise<unknown>, waitMs = 20): Promise<boolean> {
  let settled = false;
  promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  await Bun.sleep(waitMs);
  return settled;
}

/** Resolves with the promise's value, or fails (naming `label`) when it has not settled within `ms`. */
export async function settlesWithin<T>(promise: Promise<T>, label: string, ms = 5_000): Promise<T> {
  const settled = await within(
    promise.then((value) => ({ value })),
    ms,
  );
  if (settled === undefined) throw new Error(`${label} hung for ${ms} ms`);
  return settled.value;
}

/**
 * Polls `probe` every `pollMs` until it answers something other than `undefined` or `false`, and
 * resolves with that; resolves `undefined` when it did not within `timeoutMs` (probed once more
 * at the deadline).
 */
export async function eventually<T>(
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs: number,
  pollMs = 20,
): Promise<T | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() >= deadline) return undefined;
    await Bun.sleep(Math.min(pollMs, Math.max(1, deadline - Date.now())));
  }
}

/** Collects unhandled rejections while `run` executes (and a short while after). */
export async function withUnhandledRejections(run: () => Promise<void>, settleMs = 50): Promise<unknown[]> {
  const seen: unknown[] = [];
  const listener = (reason: unknown) => {
    seen.push(reason);
  };
  process.on("unhandledRejection", listener);
  try {
    await run();
    await Bun.sleep(settleMs);
  } finally {
    process.off("unhandledRejection", listener);
  }
  return seen;
}
