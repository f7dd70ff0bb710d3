/**
 * Cancelling a task whose worker is lost answers one way (issue 33): the cancel is the origin's
 * decision, canonical at once (`task.cancelled`); telling the lost worker is best effort and not
 * required. Whether the relay still holds the dead worker's registration (its Pi died, its lease
 * lives: the cancel is accepted into a mailbox no one reads), no longer does (refused
 * TARGET_NOT_REGISTERED), or the cancel waits behind older mail to that worker (deferred), the core
 * answers `cancelled` with `workerLost`, never an error, and `agent_task_cancel` says the same words.
 * TaskCores against the real relay behind the fault proxy.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { cancelTool } from "../../extensions/pi-tasks/tools/cancel.ts";
import { workflowRunnerOf } from "../../extensions/pi-tasks/tools/index.ts";
import { toolDepsOn } from "../helpers/extension-fakes.ts";
import { taskWords } from "../../extensions/pi-tasks/describe.ts";
import { coreInternals } from "../../src/core/task-core.ts";
import { RELAY_PROFILE } from "../../src/protocol/names.ts";
import { settle } from "../../testkit/drain.ts";
import { closeParties, createParty, type Party } from "../../testkit/party.ts";
import { failure } from "../../testkit/async.ts";
import { useRelayFixture } from "../helpers/relay-fixture.ts";

setDefaultTimeout(20_000);

const fx = useRelayFixture({ proxy: true });

async function party(): Promise<Party> {
  const created = await createParty({ url: fx.proxy.url, requestTimeoutMs: 4_000 });
  fx.defer(() => closeParties([created]));
  return created;
}

type Loss = "lease alive" | "unregistered" | "behind older mail";

/** The relay answers the next `times` sends of `origin` 503 RELAY_UNAVAILABLE (busy), forwarding none. */
function busySends(origin: Party, times: number): void {
  fx.proxy.push({
    operation: "send",
    kind: "reply",
    status: 503,
    times,
    body: {
      ok: false,
      profile: RELAY_PROFILE,
      epoch: fx.relay.epoch,
      error: { code: "RELAY_UNAVAILABLE", message: "busy", retryable: true },
    },
    when: (request) => (request.body as { callerSession?: string }).callerSession === origin.name,
  });
}

/** A task whose worker's Pi died, shown orphaned at the origin (as when the Pi it spawned exits). */
async function orphaned(loss: Loss) {
  const origin = await party();
  const worker = await party();
  const workerEndpoint = worker.core.endpoint()!;
  const created = await origin.core.createTask({ to: workerEndpoint, task: `lost worker (${loss})` });
  await settle([origin, worker]);
  await worker.core.close();
  if (loss === "unregistered") await coreInternals(worker.core).session.disconnect();
  if (loss === "behind older mail") {
    // An older message to the worker is not taken by the relay (and not in the retry either).
    busySends(origin, 2);
    expect((await failure(origin.core.message({ taskId: created.taskId, type: "information", message: "older" }))).code).toBe(
      "RELAY_UNAVAILABLE",
    );
  }
  expect(origin.core.workerGone(workerEndpoint)).toBe(1);
  expect(origin.core.getTask(created.taskId).attention).toBe("orphaned");
  return { origin, taskId: created.taskId };
}

describe("cancel of an orphaned task", () => {
  const cases: readonly [Loss, "accepted" | "blocked" | "pending"][] = [
    ["lease alive", "accepted"],
    ["unregistered", "blocked"],
    ["behind older mail", "pending"],
  ];

  for (const [loss, delivery] of cases) {
    test(`its worker ${loss}: cancelled at once, the delivery not required, no warning, never an error`, async () => {
      const { origin, taskId } = await orphaned(loss);
      const cancelled = await origin.core.cancel({ taskId });
      expect(cancelled).toMatchObject({ taskId, status: "cancelled", workerLost: true, delivery, warnings: [] });
      const view = origin.core.getTask(taskId);
      expect(view.status).toBe("cancelled");
      expect(view.events.filter((event) => event.type === "task.cancelled").map((event) => event.eventId)).toEqual([cancelled.eventId]);
      expect(taskWords(view)).toBe("cancelled");
      // A retry answers the same, with the same event.
      expect(await origin.core.cancel({ taskId })).toMatchObject({ eventId: cancelled.eventId, status: "cancelled", workerLost: true });
    });
  }

  test("agent_task_cancel says the same words whichever way the relay took the cancel to the lost worker", async () => {
    const texts: string[] = [];
    for (const [loss] of cases) {
      const { origin, taskId } = await orphaned(loss);
      const result = await cancelTool(toolDepsOn(origin.core), workflowRunnerOf(toolDepsOn(origin.core))).execute("call", { taskId });
      expect(result.isError ?? false).toBe(false);
      const text = result.content.map((part) => part.text).join("\n");
      expect(text).toContain(`- taskId: ${taskId}`);
      texts.push(text.replace(taskId, "<task>"));
    }
    expect(new Set(texts).size).toBe(1);
    expect(texts[0]).toBe(
      [
        "## task cancelled",
        "- taskId: <task>",
        "- delivery to the worker: not required — its worker is lost (orphaned or no longer registered); the task is cancelled here",
      ].join("\n"),
    );
  });
});

describe("cancel of a task whose worker is there", () => {
  test("a cancel the relay did not take yet is still cancelled: pending, with why, sent by a later pass", async () => {
    const origin = await party();
    const worker = await party();
    const created = await origin.core.createTask({ to: worker.core.endpoint()!, task: "cancelled while the relay is busy" });
    await settle([origin, worker]);
    busySends(origin, 1);
    const result = await cancelTool(toolDepsOn(origin.core), workflowRunnerOf(toolDepsOn(origin.core))).execute("call", {
      taskId: created.taskId,
    });
    expect(result.isError ?? false).toBe(false);
    expect(result.details).toMatchObject({
      status: "cancelled",
      workerLost: false,
      delivery: "pending",
      pending: { code: "RELAY_UNAVAILABLE" },
    });
    expect(result.content[0]!.text).toContain(
      "- delivery to the worker: pending — the relay did not answer moments ago; sent with the first pass that reaches it",
    );
    expect(origin.core.getTask(created.taskId).status).toBe("cancelled");
    await settle([origin, worker]);
    expect(worker.core.getTask(created.taskId).status).toBe("cancelled");
  });
});
