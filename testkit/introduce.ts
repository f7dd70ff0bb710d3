/**
 * Introducing an origin to a worker the way a first assignment does (src/core/proofs.ts): the
 * origin asks the worker's endpoint which key holds it, the worker's pass answers, the origin's
 * pass takes the proof. Afterwards a first assignment to that worker leaves at once — what tests
 * that count requests or check immediate acceptance start from.
 */
import type { TaskCore } from "../src/core/task-core.ts";

/** One pass of a core, as the test drives its time. */
export type PassRunner = (core: TaskCore) => Promise<unknown>;

export async function introduce(origin: TaskCore, worker: TaskCore, pass: PassRunner = (core) => core.refresh()): Promise<void> {
  const endpoint = worker.endpoint();
  if (endpoint === undefined) throw new Error("introduce: the worker has no endpoint yet (connect it first)");
  if ((await origin.prove(endpoint)) !== undefined) return;
  await pass(worker);
  await pass(origin);
  if ((await origin.prove(endpoint)) === undefined) throw new Error("introduce: the worker did not prove its endpoint");
}
