/**
 * Mail an operation recorded but the relay did not take at once: how long to wait for it, and what
 * it waits for (src/protocol/errors.ts `DeferralCause`) — for the tools and for `/tasks answer`.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { TaskCore } from "../../src/core/task-core.ts";
import { type DeferralCause, deferralCause, type TaskError } from "../../src/protocol/errors.ts";
import { sendProofPollMs, sendProofWaitMs } from "../../src/protocol/limits.ts";

/** What a wait needs of the lifecycle. */
export interface WaitDeps {
  current(): TaskCore;
  run<T>(operation: (core: TaskCore) => Promise<T>): Promise<T>;
}

/** Where the mail stands after the wait. */
export type Leaving =
  | { readonly state: "accepted" }
  | { readonly state: "blocked" }
  | { readonly state: "pending"; readonly cause?: DeferralCause };

/** Waits that usually end within seconds on their own (a peer's proof, a peer found again): worth a short wait. */
const SHORT_WAITS: ReadonlySet<DeferralCause | undefined> = new Set<DeferralCause | undefined>(["proof", "reconnect", "order"]);

/**
 * What became of mail an operation recorded but the relay did not take at once (its error a
 * `TASK_DELIVERY_DEFERRED` naming its envelope): for a short wait (a peer proving its key after a
 * relay restart, a peer found again, older mail ahead) passes run — as for a send, up to
 * `sendProofWaitMs` — until it left; then `accepted`, else `pending` with what it waits for now, or
 * `blocked` (the relay refused it). Any other error is not a wait: undefined.
 */
export async function awaitLeaving(deps: WaitDeps, error: TaskError, signal: AbortSignal | undefined): Promise<Leaving | undefined> {
  const envelopeId = error.details.envelopeId;
  const taskId = error.details.taskId;
  if (error.code !== "TASK_DELIVERY_DEFERRED" || typeof envelopeId !== "string" || typeof taskId !== "string") return undefined;
  const deadline = Date.now() + (SHORT_WAITS.has(deferralCause(error.details)) ? sendProofWaitMs : 0);
  for (;;) {
    const state = deps.current().envelopeDelivery(envelopeId);
    if (state === "accepted") return { state: "accepted" };
    if (state === "blocked") return { state: "blocked" };
    if (state === "not_applicable") return undefined;
    if (Date.now() + sendProofPollMs > deadline) {
      const cause = deps
        .current()
        .waitingMail(taskId)
        .find((mail) => mail.envelopeId === envelopeId)?.cause;
      return { state: "pending", ...(cause === undefined ? {} : { cause }) };
    }
    await sleep(sendProofPollMs, undefined, signal === undefined ? {} : { signal });
    await deps.run((core) => core.refresh()).catch(() => undefined);
  }
}
