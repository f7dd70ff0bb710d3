/**
 * Resume (src/core/resume.ts) between cores on the real relay: an origin's lifetime ends; a new one
 * of the same identity takes the task back from what its session showed (record, events, worker
 * key) and asks the worker, signed, whether it still holds it. A held task continues — the worker's
 * mail reaches the new endpoint, nothing is presented twice; a task nobody holds is orphaned at once.
 */
import { afterEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { raised } from "../../kit/async.ts";
import { settle } from "../../kit/drain.ts";
import { introduce } from "../../kit/introduce.ts";
import { closeParties, createParty, type Party } from "../../kit/party.ts";
import { coreInternals } from "../../src/core/task-core.ts";
import { taskRecordOf } from "../../src/core/resume.ts";
import { maxResumeTasks } from "../../src/protocol/limits.ts";
import { generateIdentity } from "../../src/trust/keys.ts";
import { useRelayFixture } from "../helpers/relay-fixture.ts";

setDefaultTimeout(20_000);

const fx = useRelayFixture({ proxy: false });
const opened: Party[] = [];
afterEach(() => closeParties(opened.splice(0)));

async function party(options: Partial<Parameters<typeof createParty>[0]> = {}): Promise<Party> {
  const created = await createParty({ url: fx.relay.url, ...options });
  opened.push(created);
  return created;
}

/** Whether an origin still waits for its worker's word on the task. */
const resuming = (origin: Party, taskId: string) => coreInternals(origin.core).store.getTaskMeta(taskId)?.resuming === true;

/** Drains until the origin's resumed tasks were answered (a resume question and its answer take two passes). */
async function answered(parties: Party[], origin: Party, taskIds: string[]): Promise<void> {
  for (let round = 0; round < 5 && taskIds.some((taskId) => resuming(origin, taskId)); round += 1) await settle(parties);
}

/** What a session keeps of a task it sent: the record as sent, the events it showed, the worker's key. */
function history(origin: Party, taskId: string, sent: ReturnType<typeof taskRecordOf>) {
  const view = origin.core.getTask(taskId);
  return { record: sent, events: view.events, workerKey: view.peer?.verified ? view.peer.key : undefined };
}

/** An origin whose worker asked a question, then the origin's lifetime ended (its history kept). */
async function delegatedThenGone() {
  const first = await party();
  const worker = await party();
  await introduce(first.core, worker.core);
  const { taskId } = await first.core.createTask({ to: worker.core.endpoint()!, task: "paint the banner" });
  const sent = taskRecordOf(first.core.getTask(taskId));
  await settle([first, worker]);
  await worker.core.message({ taskId, type: "question", message: "Which colour?" });
  await settle([first, worker]);
  const kept = history(first, taskId, sent);
  expect(kept.events.map((event) => event.type)).toContain("task.question");
  await closeParties([opened.splice(opened.indexOf(first), 1)[0]!]);
  return { worker, taskId, kept };
}

describe("resume", () => {
  test("the worker confirms under its key: the task continues at the new endpoint, nothing is presented twice", async () => {
    const { worker, taskId, kept } = await delegatedThenGone();
    const origin = await party();
    expect(await origin.core.resume([kept])).toEqual([taskId]);
    expect(resuming(origin, taskId)).toBe(true);
    await answered([origin, worker], origin, [taskId]);
    expect(resuming(origin, taskId)).toBe(false);
    expect(origin.core.getTask(taskId)).toMatchObject({ status: "active", origin: origin.core.endpoint() });
    expect(origin.core.getTask(taskId).attention).not.toBe("orphaned");
    expect(worker.core.getTask(taskId).origin).toEqual(origin.core.endpoint()!);
    const question = kept.events.find((event) => event.type === "task.question")!;
    await origin.core.message({ taskId, type: "answer", message: "Blue.", inReplyTo: question.eventId });
    await settle([origin, worker]);
    expect(worker.core.getTask(taskId).events.at(-1)).toMatchObject({ type: "task.answer", payload: { message: "Blue." } });
    await worker.core.done({ taskId, status: "completed", summary: "painted blue" });
    await settle([origin, worker]);
    expect(origin.core.getTask(taskId).status).toBe("completed");
    const shown = origin.host.inserted.map((item) => item.event.type);
    expect(shown.filter((type) => type === "task.question")).toEqual([]);
    expect(shown.filter((type) => type === "task.completed")).toEqual(["task.completed"]);
    await origin.core.acknowledge({ taskId });
    await settle([origin, worker]);
    expect(worker.core.getTask(taskId).events.at(-1)?.type).toBe("task.parent_acknowledged");
  });

  test("a worker that does not hold the task for this key: orphaned at once, and the worker keeps its origin", async () => {
    const { worker, taskId, kept } = await delegatedThenGone();
    const formerOrigin = worker.core.getTask(taskId).origin;
    const stranger = await party({ trust: { identity: generateIdentity().identity, peerName: () => undefined } });
    // A stranger's key asking about the task, and the own identity asking about a task the worker does
    // not know: both are answered "not held", and the worker's task stays with its origin.
    const unknown = { ...kept, record: { ...kept.record, taskId: "unknown-task-1" }, events: [] };
    const origin = await party();
    await origin.core.resume([unknown]);
    await stranger.core.resume([kept]);
    await answered([origin, worker, stranger], origin, ["unknown-task-1"]);
    await answered([origin, worker, stranger], stranger, [taskId]);
    expect(origin.core.getTask("unknown-task-1").attention).toBe("orphaned");
    expect(origin.host.inserted.map((item) => item.event.type)).toEqual(["task.orphaned"]);
    expect(worker.core.getTask(taskId).origin).toEqual(formerOrigin);
    expect(resuming(stranger, taskId)).toBe(false);
    expect(stranger.core.getTask(taskId).attention).toBe("orphaned");
  });

  test("a worker whose endpoint is gone: orphaned at once, reassignable", async () => {
    const { worker, taskId, kept } = await delegatedThenGone();
    await coreInternals(worker.core).session.disconnect();
    await closeParties([opened.splice(opened.indexOf(worker), 1)[0]!]);
    const origin = await party();
    await origin.core.resume([kept]);
    await settle([origin]);
    expect(origin.core.getTask(taskId).attention).toBe("orphaned");
    const successor = await party();
    await introduce(origin.core, successor.core);
    const reassigned = await origin.core.reassignTask(taskId, { to: successor.core.endpoint()! });
    expect(reassigned.taskId).toBe(taskId);
  });

  test(`at most ${maxResumeTasks} tasks: one more is RESUME_LIMIT and restores nothing; a malformed entry changes nothing`, async () => {
    const origin = await party();
    const { error } = await raised(() => origin.core.resume(Array.from({ length: maxResumeTasks + 1 }, () => ({}))));
    expect(error.code).toBe("RESUME_LIMIT");
    const bad = await raised(() => origin.core.resume([{ record: { taskId: "x" }, events: [] }]));
    expect(bad.error.code).toBe("INVALID_REQUEST");
    expect(origin.core.listTasks()).toEqual([]);
  });
});
