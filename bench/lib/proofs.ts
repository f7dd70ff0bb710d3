/**
 * Proving a worker to an origin before a measurement's timed part (src/core/proofs.ts): task
 * content goes only to an endpoint that proved which key holds it, so the first assignment to a
 * new worker waits for a hello round trip (`delivery: "pending"`). A measurement of what happens
 * once the parties know each other (acceptance, delivery at a steady rate, the real Pi's insertion)
 * makes that round trip first, untimed, and then checks that each timed `createTask` left at once.
 *
 * testkit/introduce.ts does it in one pass of each side, for cores a test drives itself; here the
 * parties may also run their own passes (the extension's scheduler and watch, a real Pi), so the
 * origin asks and the passes run until the proof is in or the deadline passes.
 */
import type { CreateResult, TaskCore } from "../../src/core/task-core.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import type { FakePi } from "./fake-pi.ts";

const PROVE_TIMEOUT_MS = 15_000;
const PROVE_POLL_MS = 5;

export interface ProveOptions {
  /** Passes to run between asks (e.g. the worker's, then the origin's); default none (the parties' own passes). */
  readonly pass?: () => Promise<unknown>;
  readonly timeoutMs?: number;
  readonly pollMs?: number;
}

/**
 * Asks `endpoint` to prove itself to the origin (`origin()`: its core now) and runs `pass` until the
 * origin holds the proof; resolves with the proven key, throws after the deadline.
 */
export async function proveEndpoint(origin: () => TaskCore, endpoint: TaskEndpoint, options: ProveOptions = {}): Promise<string> {
  const deadline = Date.now() + (options.timeoutMs ?? PROVE_TIMEOUT_MS);
  for (;;) {
    // `prove` re-asks at most every helloRetryMs; in between it only reports what is proven.
    const key = await origin().prove(endpoint);
    if (key !== undefined) return key;
    if (Date.now() > deadline)
      throw new Error(`the endpoint ${endpoint.id} did not prove itself to the origin within ${options.timeoutMs ?? PROVE_TIMEOUT_MS} ms`);
    await options.pass?.().catch(() => undefined);
    await Bun.sleep(options.pollMs ?? PROVE_POLL_MS);
  }
}

/** Two fake Pis (the real extension stack): the worker proves itself to the origin, each side's pass run between asks. */
export async function introduceFakePis(origin: FakePi, worker: FakePi, to: TaskEndpoint): Promise<string> {
  return proveEndpoint(() => origin.core(), to, {
    pass: async () => {
      await worker.core().refresh();
      await origin.core().refresh();
    },
  });
}

/** Throws unless a timed `createTask` left at once (its target proven): what a warm-up introduction guarantees. */
export function requireSentAtOnce(created: CreateResult, what: string): CreateResult {
  if (created.delivery !== "accepted")
    throw new Error(
      `${what}: createTask answered delivery "${created.delivery}", not "accepted" (the worker was not proven before the timed part)`,
    );
  return created;
}
