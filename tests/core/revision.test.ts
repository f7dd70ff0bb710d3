/**
 * Sending a result back for revision (src/core/revision.ts) between two cores on the real relay:
 * the task is active again at both sides for one more round, the worker reports again, the history
 * keeps every round; bounded rounds; never after the acknowledgement, never a failed task, never by
 * the worker. The expiry moves on with each round (at both sides), each revision names the latest
 * result, a revision for a round the worker already finished does not reopen it, and a revision the
 * relay does not take is reported, not taken for sent.
 */
import { afterEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { raised } from "../../testkit/async.ts";
import { settle } from "../../testkit/drain.ts";
import { introduce } from "../../testkit/introduce.ts";
import { closeParties, createParty, type Party } from "../../testkit/party.ts";
import { sealedTo } from "../../testkit/sealed.ts";
import { encodeEnvelope, makeEvent } from "../../src/core/envelopes.ts";
import { coreInternals } from "../../src/core/task-core.ts";
import { processLocalTrust } from "../../src/core/trust.ts";
import { maxRevisionRounds } from "../../src/protocol/limits.ts";
import { useRelayFixture } from "../helpers/relay-fixture.ts";

setDefaultTimeout(20_000);

const fx = useRelayFixture({ proxy: false });
const opened: Party[] = [];
afterEach(() => closeParties(opened.splice(0)));

async function completed(options: { clock?: () => number; timeoutMs?: number } = {}) {
  const clock = options.clock === undefined ? {} : { clock: options.clock };
  const origin = await createParty({ url: fx.relay.url, ...clock });
  const worker = await createParty({ url: fx.relay.url, ...clock });
  opened.push(origin, worker);
  await introduce(origin.core, worker.core);
  const { taskId } = await origin.core.createTask({
    to: worker.core.endpoint()!,
    task: "write the report",
    ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
  });
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

  // Guards src/core/revision.ts requestRevision (expiresAt = now + the task's duration, stored and sent)
  // and reopenForRevision (the worker takes the event's expiresAt).
  test("a revision moves the expiry on by the task's duration from the moment it is asked, at both sides: the old expiry no longer ends the task", async () => {
    // A clock the test sets (both sides read it); within the relay's freshness window for envelopes.
    let now = Date.now() - 60_000;
    const duration = 5_000;
    const { origin, worker, taskId, round } = await completed({ clock: () => now, timeoutMs: duration });
    const first = origin.core.getTask(taskId).expiresAt;
    expect(first).toBe(now + duration);
    // The result waited for review longer than the task's whole duration.
    now += 4 * duration;
    const askedAt = now;
    await origin.core.requestRevision({ taskId, reason: "one more pass" });
    const moved = askedAt + duration;
    expect(origin.core.getTask(taskId).expiresAt).toBe(moved);
    const revision = origin.core.getTask(taskId).events.find((event) => event.type === "task.revision_requested")!;
    expect(revision.payload.expiresAt).toBe(moved);
    await round();
    expect(worker.core.getTask(taskId)).toMatchObject({ status: "active", revision: 1, expiresAt: moved });
    // The old expiry is long past: the new round runs on, until its own expiry.
    await origin.core.refresh();
    expect(origin.core.getTask(taskId).status).toBe("active");
    now = moved - 1;
    await origin.core.refresh();
    expect(origin.core.getTask(taskId).status).toBe("active");
    now = moved;
    await origin.core.refresh();
    expect(origin.core.getTask(taskId).status).toBe("timed_out");
  });

  // Guards src/core/revision.ts revisable: the result sent back is the latest task.completed, not the first.
  test("each revision names the result it sends back: the latest one", async () => {
    const { origin, taskId, round, complete } = await completed();
    await origin.core.requestRevision({ taskId, reason: "round one" });
    await round();
    await complete("second draft");
    await origin.core.requestRevision({ taskId, reason: "round two" });
    const events = origin.core.getTask(taskId).events;
    const results = events.filter((event) => event.type === "task.completed").map((event) => event.eventId);
    const revisions = events.filter((event) => event.type === "task.revision_requested").map((event) => event.payload.result);
    expect(results).toHaveLength(2);
    expect(revisions).toEqual(results);
  });

  // Guards src/core/revision.ts reopenForRevision: a revision for a round the worker already has never reopens it.
  test("a revision for a round the worker already finished (another event of the origin, same round) does not reopen it", async () => {
    const { origin, worker, taskId, round, complete } = await completed();
    await origin.core.requestRevision({ taskId, reason: "the summary is missing" });
    await round();
    await complete("second draft");
    const finished = worker.core.getTask(taskId);
    expect(finished).toMatchObject({ status: "completed", revision: 1 });
    // The same event again is a replay the intake refuses before any of this (REPLAYED_EVENT): here
    // it is a new event of the origin, signed by the key the worker trusts, for round 1 again.
    const asked = origin.core.getTask(taskId);
    const first = asked.events.find((event) => event.type === "task.revision_requested")!;
    const stale = makeEvent(asked, "task.revision_requested", String(asked.events.length + 1), Date.now(), {
      ...first.payload,
      expiresAt: Number(first.payload.expiresAt) + 60_000,
    });
    const envelope = encodeEnvelope(
      origin.core.endpoint()!,
      worker.core.endpoint()!,
      taskId,
      "canonical_event",
      stale,
      Date.now(),
      processLocalTrust(),
      undefined,
      sealedTo(),
    );
    await coreInternals(origin.core).session.send(envelope);
    const report = await worker.core.refresh();
    expect(report.failures.get("intake")).toBeUndefined();
    expect(worker.core.getTask(taskId).events.map((event) => event.eventId)).toContain(stale.eventId);
    expect(worker.core.getTask(taskId)).toMatchObject({
      status: "completed",
      revision: 1,
      expiresAt: finished.expiresAt,
      terminalDelivery: { state: finished.terminalDelivery.state },
    });
  });

  // Guards src/core/revision.ts requestRevision: requireAccepted (a revision the relay refuses is an error).
  test("a revision the relay refuses (the worker's endpoint is gone) is reported with the relay's code, never as sent", async () => {
    const { origin, worker, taskId } = await completed();
    await worker.core.close();
    await coreInternals(worker.core).session.rebind();
    const { error } = await raised(() => origin.core.requestRevision({ taskId, reason: "are you there?" }));
    expect(error.code).toBe("TARGET_NOT_REGISTERED");
    expect(error.details).toMatchObject({ taskId });
  });
});
