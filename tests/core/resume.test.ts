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
import { helloRetryMs, maxResumeTasks } from "../../src/protocol/limits.ts";
import { createJumpTimers } from "../../kit/jump-timers.ts";
import { generateIdentity } from "../../src/trust/keys.ts";
import { encodeHello } from "../../src/core/envelopes.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import type { ProxyRequest } from "../../kit/fault-proxy.ts";
import { eventsOf } from "../helpers/core-kit.ts";
import { useRelayFixture } from "../helpers/relay-fixture.ts";

setDefaultTimeout(20_000);

const fx = useRelayFixture({ proxy: true });
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
async function delegatedThenGone(workerOptions: Partial<Parameters<typeof createParty>[0]> = {}) {
  const first = await party();
  const worker = await party(workerOptions);
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

  test("a relay replaying an earlier restart's genuine resume question moves nothing: refused, and the worker's result reaches the current origin", async () => {
    // The worker reads its mail through the relay's proxy, which records what it delivers.
    const { worker, taskId, kept } = await delegatedThenGone({ url: fx.proxy.url });
    const delivered: WireDelivery[] = [];
    fx.proxy.push({ operation: "receive", kind: "rewrite", times: Number.POSITIVE_INFINITY, rewrite: recordInto(delivered) });
    const second = await party();
    await second.core.resume([kept]);
    await answered([second, worker], second, [taskId]);
    expect(worker.core.getTask(taskId).origin).toEqual(second.core.endpoint()!);
    const earlierQuestion = delivered.find(
      (item) => item.envelope.payload?.kind === "hello" && item.envelope.payload.payload?.resume !== undefined,
    );
    expect(earlierQuestion).toBeDefined();
    await closeParties([opened.splice(opened.indexOf(second), 1)[0]!]);
    const third = await party();
    await third.core.resume([kept]);
    await answered([third, worker], third, [taskId]);
    expect(worker.core.getTask(taskId).origin).toEqual(third.core.endpoint()!);
    // The relay serves the second lifetime's question again in place of the next mail to the worker.
    fx.proxy.clear();
    fx.proxy.push({ operation: "receive", kind: "rewrite", rewrite: substituteFirst(earlierQuestion!.envelope), when: receivesOf(worker) });
    const question = kept.events.find((event) => event.type === "task.question")!;
    await third.core.message({ taskId, type: "answer", message: "Blue.", inReplyTo: question.eventId });
    await settle([third, worker]);
    expect(worker.core.rejections().STALE_EVENT).toBe(1);
    expect(worker.core.getTask(taskId).origin).toEqual(third.core.endpoint()!);
    await worker.core.done({ taskId, status: "completed", summary: "painted blue" });
    await settle([third, worker]);
    expect(third.core.getTask(taskId).status).toBe("completed");
  });

  test("an answer signed by a key that is neither the bound worker's nor trusted decides nothing; the worker's own answer does", async () => {
    const { worker, taskId, kept } = await delegatedThenGone();
    const timers = createJumpTimers();
    const origin = await party({ url: fx.proxy.url, timers });
    const stranger = { identity: generateIdentity().identity, peerName: () => undefined };
    // The relay answers the origin's resume question itself, "not held", under a key of its own.
    let forgedOnce = false;
    fx.proxy.push({
      operation: "receive",
      kind: "rewrite",
      times: Number.POSITIVE_INFINITY,
      when: receivesOf(origin),
      rewrite: (reply: ReceiveReply) => {
        const genuine = reply.value?.deliveries?.find((item) => item.envelope.payload?.payload?.inReplyTo !== undefined);
        if (genuine === undefined || forgedOnce) return reply;
        forgedOnce = true;
        const answer = genuine.envelope.payload!.payload!;
        const forged = encodeHello(genuine.envelope.source, genuine.envelope.target, stranger, Date.now(), {
          inReplyTo: answer.inReplyTo,
          resume: { tasks: [taskId], held: [] },
        });
        genuine.envelope = JSON.parse(forged.encoded.text);
        return reply;
      },
    });
    await origin.core.resume([kept]);
    await answered([origin, worker], origin, [taskId]);
    expect(forgedOnce).toBe(true);
    // The forgery took the place of the worker's answer: the origin asks again, as it does every helloRetryMs.
    expect(origin.core.getTask(taskId).attention).not.toBe("orphaned");
    timers.jump(helloRetryMs);
    await answered([origin, worker], origin, [taskId]);
    expect(resuming(origin, taskId)).toBe(false);
    expect(origin.core.getTask(taskId).attention).not.toBe("orphaned");
    expect(eventsOf(origin.core.getTask(taskId), "task.orphaned")).toEqual([]);
    expect(worker.core.getTask(taskId).origin).toEqual(origin.core.endpoint()!);
  });

  test("a loss the session already reported stays reported: resumed and lost again, nothing new is shown", async () => {
    const { worker, taskId, kept } = await delegatedThenGone();
    await coreInternals(worker.core).session.disconnect();
    await closeParties([opened.splice(opened.indexOf(worker), 1)[0]!]);
    const second = await party();
    await second.core.resume([kept]);
    await settle([second]);
    const orphaned = eventsOf(second.core.getTask(taskId), "task.orphaned");
    expect(orphaned).toHaveLength(1);
    await closeParties([opened.splice(opened.indexOf(second), 1)[0]!]);
    // The next restart's history holds that report.
    const third = await party();
    await third.core.resume([{ ...kept, events: [...kept.events, ...orphaned] }]);
    await settle([third]);
    expect(third.core.getTask(taskId).attention).toBe("orphaned");
    expect(third.host.inserted.filter((item) => item.event.type === "task.orphaned")).toEqual([]);
  });
});

// -- the relay's view of a worker's mail (a hostile relay's tools) ---------------------------------

interface WireEnvelope {
  envelopeId: string;
  source: TaskEndpoint;
  target: TaskEndpoint;
  payload?: { kind?: string; payload?: { resume?: unknown; inReplyTo?: string } };
}
interface WireDelivery {
  cursor: string;
  envelope: WireEnvelope;
}
interface ReceiveReply {
  value?: { deliveries?: WireDelivery[] };
}

/** A rewrite that changes nothing and keeps a copy of every delivery. */
function recordInto(delivered: WireDelivery[]) {
  return (reply: ReceiveReply) => {
    for (const item of reply.value?.deliveries ?? []) delivered.push(structuredClone(item));
    return reply;
  };
}

/** A rewrite that serves `envelope` in place of the page's first delivery. */
function substituteFirst(envelope: WireEnvelope) {
  return (reply: ReceiveReply) => {
    const first = reply.value?.deliveries?.[0];
    if (first !== undefined) first.envelope = structuredClone(envelope);
    return reply;
  };
}

/** Matches the receive requests of one party (the proxy sees them all). */
function receivesOf(of: Party) {
  const id = of.core.endpoint()?.id;
  return (request: ProxyRequest) => (request.body as { endpoint?: { id?: string } } | undefined)?.endpoint?.id === id;
}
