/**
 * Sending a result back for revision (src/core/revision.ts) between two cores on the real relay:
 * the task is active again at both sides for one more round, the worker reports again, the history
 * keeps every round; bounded rounds; never after the acknowledgement, never a failed task, never by
 * the worker.
 */
import { afterEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { raised } from "../../kit/async.ts";
import { settle } from "../../kit/drain.ts";
import { introduce } from "../../kit/introduce.ts";
import { closeParties, createParty, type Party } from "../../kit/party.ts";
import { maxRevisionRounds } from "../../src/protocol/limits.ts";
import { useRelayFixture } from "../helpers/relay-fixture.ts";

setDefaultTimeout(20_000);

const fx = useRelayFixture({ proxy: false });
const opened: Party[] = [];
afterEach(() => closeParties(opened.splice(0)));

async function completed() {
  const origin = await createParty({ url: fx.relay.url });
  const worker = await createParty({ url: fx.relay.url });
  opened.push(origin, worker);
  await introduce(origin.core, worker.core);
  const { taskId } = await origin.core.createTask({ to: worker.core.endpoint()!, task: "write the report" });
  const round = () => settle([origin, worker]);
  await round();
  const complete = async (summary: string) => {
    await worker.core.done({ taskId, status: "completed", summary });
    await round();
  };
  await complete("first draft");
  return { origin, worker, taskId, round, complete };
}

describe("revisions", () => {
  test("a revision makes the task active again at both sides; the worker reports again; every round stays in the history", async () => {
    const { origin, worker, taskId, round, complete } = await completed();
    const revised = await origin.core.requestRevision({ taskId, reason: "the summary is missing" });
    expect(revised.round).toBe(1);
    expect(origin.core.getTask(taskId)).toMatchObject({ status: "active", revision: 1 });
    await round();
    const atWorker = worker.core.getTask(taskId);
    expect(atWorker).toMatchObject({ status: "active", revision: 1 });
    expect(atWorker.terminalDelivery.state).toBe("not_submitted");
    expect(atWorker.events.at(-1)?.payload).toMatchObject({ reason: "the summary is missing", round: 1 });
    await complete("second draft, with the summary");
    const done = origin.core.getTask(taskId);
    expect(done.status).toBe("completed");
    expect(
      done.events.filter((event) => ["task.completed", "task.revision_requested"].includes(event.type)).map((event) => event.type),
    ).toEqual(["task.completed", "task.revision_requested", "task.completed"]);
    expect(done.events.filter((event) => event.type === "task.completed").map((event) => event.payload.summary)).toEqual([
      "first draft",
      "second draft, with the summary",
    ]);
    await origin.core.acknowledge({ taskId });
    const { error } = await raised(() => origin.core.requestRevision({ taskId, reason: "one more" }));
    expect(error.code).toBe("REVISION_REFUSED");
    expect(error.details.problem).toBe("the result was acknowledged");
  });

  test(`at most ${maxRevisionRounds} rounds; the next is REVISION_REFUSED and changes nothing`, async () => {
    const { origin, taskId, round, complete } = await completed();
    for (let index = 1; index <= maxRevisionRounds; index += 1) {
      await origin.core.requestRevision({ taskId, reason: `round ${index}` });
      await round();
      await complete(`draft ${index + 1}`);
    }
    const before = origin.core.getTask(taskId).events.length;
    const { error } = await raised(() => origin.core.requestRevision({ taskId, reason: "again" }));
    expect(error.code).toBe("REVISION_REFUSED");
    expect(origin.core.getTask(taskId)).toMatchObject({ status: "completed", revision: maxRevisionRounds });
    expect(origin.core.getTask(taskId).events.length).toBe(before);
  });

  test("an active or failed task cannot be revised, and a worker cannot ask for one", async () => {
    const origin = await createParty({ url: fx.relay.url });
    const worker = await createParty({ url: fx.relay.url });
    opened.push(origin, worker);
    await introduce(origin.core, worker.core);
    const { taskId } = await origin.core.createTask({ to: worker.core.endpoint()!, task: "try" });
    await settle([origin, worker]);
    expect((await raised(() => origin.core.requestRevision({ taskId, reason: "early" }))).error.code).toBe("REVISION_REFUSED");
    expect((await raised(() => worker.core.requestRevision({ taskId, reason: "mine" }))).error.code).toBe("NOT_ORIGIN");
    await worker.core.done({ taskId, status: "failed", summary: "could not", error: { code: "NOPE", message: "no", retryable: false } });
    await settle([origin, worker]);
    expect((await raised(() => origin.core.requestRevision({ taskId, reason: "again" }))).error.details.problem).toBe(
      "the task is failed, not completed",
    );
  });
});
