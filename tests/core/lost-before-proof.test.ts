/**
 * Why a footer could say `not-registered (TARGET_NOT_REGISTERED)` for ten minutes (issue 33): a
 * task's content waits (`awaiting`) for its worker to prove its key; the worker's Pi dies before it
 * does and its registration ends. Every `helloRetryMs` the origin asked the gone endpoint again, the
 * relay refused the hello TARGET_NOT_REGISTERED, and each refusal was that pass's failure — for as
 * long as the task lived, while the task itself said "sending to the worker". Now the refusal is a
 * fact about the task: what awaited the endpoint is quarantined (as a send refused for that reason
 * is), the failure is reported once, the task says it could not be delivered and may be reassigned.
 * TaskCores against the real relay, on jump time.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { taskWords } from "../../extensions/pi-tasks/describe.ts";
import { coreInternals, createTaskCore } from "../../src/core/task-core.ts";
import { activePollIntervalMs, helloRetryMs } from "../../src/protocol/limits.ts";
import { createVolatileTaskSession } from "../../src/relay-client/session.ts";
import { createTaskStore } from "../../src/store/task-store.ts";
import { createJumpClock, createJumpTimers } from "../../testkit/jump-timers.ts";
import { createMemoryHost } from "../../testkit/memory-host.ts";
import { closeParties, type Party } from "../../testkit/party.ts";
import { useRelayFixture } from "../helpers/relay-fixture.ts";

setDefaultTimeout(20_000);

const fx = useRelayFixture();

describe("content that waits for the proof of a worker that is gone", () => {
  test("is refused once — one pass failure, not one every helloRetryMs — and its task says it could not be delivered", async () => {
    const timers = createJumpTimers();
    const clock = createJumpClock();
    const party = async (): Promise<Party> => {
      const name = `lost-before-proof-${crypto.randomUUID().slice(0, 8)}`;
      const session = createVolatileTaskSession({ url: fx.relay.url, callerSession: name, requestTimeoutMs: 4_000 });
      const host = createMemoryHost();
      const core = createTaskCore({ store: createTaskStore(), session, host, timers, clock });
      fx.defer(() => closeParties([{ core }]));
      await core.connect();
      return { name, core, host };
    };
    const origin = await party();
    const worker = await party();
    const to = worker.core.endpoint()!;
    // The worker's Pi is gone before it proved its key: the assignment waits for that proof.
    await worker.core.close();
    const created = await origin.core.createTask({ to, task: "never proven" });
    expect(created.delivery).toBe("pending");
    await coreInternals(worker.core).session.disconnect();

    const refusals: number[] = [];
    const passes = (10 * helloRetryMs) / activePollIntervalMs;
    for (let pass = 0; pass < passes; pass += 1) {
      timers.jump(activePollIntervalMs);
      clock.jump(activePollIntervalMs);
      const report = await origin.core.refresh();
      if ([...report.failures.values()].some((failure) => failure.code === "TARGET_NOT_REGISTERED")) refusals.push(pass);
    }
    expect(refusals).toHaveLength(1);
    const view = origin.core.getTask(created.taskId);
    expect(view.deliveryEvidence.relayAcceptance).toBe("blocked");
    expect(taskWords(view)).toBe("could not be delivered to the worker");
    expect(origin.core.hasPendingWork()).toBe(false);
    // Its worker is known lost: the task may move to another worker.
    const successor = await party();
    const moved = await origin.core.reassignTask(created.taskId, { to: successor.core.endpoint()! });
    expect(moved.target).toEqual(successor.core.endpoint()!);
  });
});
