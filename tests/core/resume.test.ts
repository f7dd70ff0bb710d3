/**
 * Resume (src/core/resume.ts) between cores on the real relay: an origin's lifetime ends; a new one
 * of the same identity takes the task back from what its session showed (record, events, worker
 * key) and asks the worker, signed, whether it still holds it. A held task continues — the worker's
 * mail reaches the new endpoint, nothing is presented twice; a task nobody holds is orphaned at once.
 * Then each check of resume.ts on its own function (the relay fake, virtual time), one edge each.
 */
import { afterEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { raised, thrown } from "../../testkit/async.ts";
import { settle } from "../../testkit/drain.ts";
import { introduce } from "../../testkit/introduce.ts";
import { closeParties, createParty, type Party } from "../../testkit/party.ts";
import { coreInternals, createCoreContext, createTaskCore, type TaskCore } from "../../src/core/task-core.ts";
import { answerResume, askResumes, restoreTasks, takeResumeAnswer, taskRecordOf } from "../../src/core/resume.ts";
import { OPERATION, type CoreBook } from "../../src/core/bookkeeping.ts";
import { createTaskWorkScope } from "../../src/core/scope.ts";
import type { Signer, TrustOptions } from "../../src/core/trust.ts";
import { helloRetryMs, maxHellosPerPass, maxResumeTasks } from "../../src/protocol/limits.ts";
import { createTaskStore } from "../../src/store/task-store.ts";
import { createJumpTimers } from "../../testkit/jump-timers.ts";
import { createVirtualTimers } from "../../testkit/virtual-timers.ts";
import { createMemoryHost } from "../../testkit/memory-host.ts";
import { generateIdentity, type Identity } from "../../src/trust/keys.ts";
import { encodeHello } from "../../src/core/envelopes.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import type { ProxyRequest } from "../../testkit/fault-proxy.ts";
import { eventsOf } from "../helpers/core-kit.ts";
import { createFakeRelay } from "../helpers/fake-relay.ts";
import { settleVirtually } from "../helpers/virtual-pair.ts";
import { endpoint, ORIGIN, OTHER, taskEvent, taskRecord, testId, WORKER } from "../helpers/fixtures.ts";
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

// -- each check of resume.ts on its own function (the in-memory relay fake, virtual time) ----------

// The parties' keys. Alice delegates (both lifetimes); Wendy works her tasks; Tara is another
// worker Alice pairs with (trusted, but bound to none of these tasks); nobody trusts the stranger.
const alice = generateIdentity().identity;
const wendy = generateIdentity().identity;
const tara = generateIdentity().identity;
const nobody = generateIdentity().identity;
/** Where a restarted origin asks from. */
const NEW_ORIGIN = endpoint();

/** `identity`, trusting `peers` by name. */
function trustOf(identity: Identity, peers: Record<string, Identity> = {}): TrustOptions {
  return { identity, peerName: (key) => Object.entries(peers).find(([, peer]) => peer.publicKey === key)?.[0] };
}

/** A signer as the hello gate hands it to resume.ts (src/core/trust.ts gateHello): the key, no peer lookup. */
function signer(identity: Identity, own: Identity = alice): Extract<Signer, { verified: true }> {
  return { verified: true, key: identity.publicKey, fingerprint: identity.fingerprint, self: identity.publicKey === own.publicKey };
}

/** One side's core context on the relay fake, with a wall clock the test moves. */
async function sideOn(name: string, trust: TrustOptions) {
  const timers = createVirtualTimers(1_000_000);
  const relay = createFakeRelay(timers);
  const session = relay.session(name);
  await session.connect();
  let wall = Date.UTC(2026, 10, 30, 12);
  const context = createCoreContext({ store: createTaskStore<CoreBook>(), session, timers, clock: () => wall, trust });
  const scope = createTaskWorkScope({ timers, mode: "foreground" });
  return { context, store: context.store, scope, relay, timers, now: () => wall, advance: (ms: number) => void (wall += ms) };
}

/** A restarted origin (Alice) that took back one task per entry, each waiting for its worker's word. */
async function resumedOrigin(entries: { target: TaskEndpoint; workerKey?: string }[]) {
  const side = await sideOn("origin", trustOf(alice, { wendy, tara }));
  const records = entries.map(({ target }) => taskRecord({ target, createdAt: side.now() - 60_000 }));
  const history = records.map((record, index) => ({
    record,
    events: [taskEvent(record, 1, "task.created")],
    workerKey: entries[index]!.workerKey,
  }));
  expect(restoreTasks(side.context, history)).toEqual(records.map((record) => record.taskId));
  const meta = (taskId: string) => side.store.getTaskMeta(taskId);
  return {
    ...side,
    ids: records.map((record) => record.taskId),
    /** `from`'s answer, signed by `by` now: it names `tasks` and holds `held`. */
    answer: (from: TaskEndpoint, by: Identity, tasks: string[], held: string[]) =>
      takeResumeAnswer(side.context, side.scope, from, signer(by), { tasks, held }, side.now()),
    resuming: (taskId: string) => meta(taskId)?.resuming === true,
    orphaned: (taskId: string) => meta(taskId)?.orphanedAt !== undefined,
    workerKey: (taskId: string) => meta(taskId)?.workerKey,
    target: (taskId: string) => side.store.getStoredTask(taskId)!.record.target,
  };
}

describe("resume: who may confirm or lose a resumed task (takeResumeAnswer)", () => {
  test("only the bound worker key decides: another key Alice trusts neither confirms nor loses the task; the bound key confirms it", async () => {
    // Guards src/core/resume.ts confirms(): `bound === signer.key` for a task with a bound worker key.
    const origin = await resumedOrigin([{ target: WORKER, workerKey: wendy.publicKey }]);
    const [taskId] = origin.ids as [string];
    origin.answer(WORKER, tara, [taskId], [taskId]);
    origin.answer(WORKER, tara, [taskId], []);
    origin.answer(WORKER, nobody, [taskId], []);
    expect(origin.resuming(taskId)).toBe(true);
    expect(origin.orphaned(taskId)).toBe(false);
    expect(origin.workerKey(taskId)).toBe(wendy.publicKey);
    origin.answer(WORKER, wendy, [taskId], [taskId]);
    expect(origin.resuming(taskId)).toBe(false);
    expect(origin.orphaned(taskId)).toBe(false);
    expect(origin.workerKey(taskId)).toBe(wendy.publicKey);
  });

  test("an answer from one worker naming another worker's task changes nothing of it, under the same key too", async () => {
    // Guards src/core/resume.ts takeResumeAnswer(): `sameEndpoint(stored.record.target, source)`. Both
    // tasks are bound to Wendy's key (two Pis of hers), so only the endpoint tells them apart.
    const origin = await resumedOrigin([
      { target: WORKER, workerKey: wendy.publicKey },
      { target: OTHER, workerKey: wendy.publicKey },
    ]);
    const [mine, theirs] = origin.ids as [string, string];
    origin.answer(WORKER, wendy, [mine, theirs], [mine, theirs]);
    expect(origin.resuming(mine)).toBe(false);
    expect(origin.resuming(theirs)).toBe(true);
    expect(origin.target(theirs)).toEqual(OTHER);
    origin.answer(WORKER, wendy, [theirs], []);
    expect(origin.resuming(theirs)).toBe(true);
    expect(origin.orphaned(theirs)).toBe(false);
    // Its own worker's word decides it.
    origin.answer(OTHER, wendy, [theirs], []);
    expect(origin.orphaned(theirs)).toBe(true);
  });

  test("a task its worker does not hold is orphaned at once, lost since it began waiting", async () => {
    // Guards src/core/resume.ts takeResumeAnswer() `held.has` → lose(), and lose()'s `reconnectingSince`.
    const origin = await resumedOrigin([{ target: WORKER, workerKey: wendy.publicKey }]);
    const [taskId] = origin.ids as [string];
    const waitingSince = origin.store.getTaskMeta(taskId)!.reconnectingSince!;
    origin.advance(5_000);
    origin.answer(WORKER, wendy, [taskId], []);
    expect(origin.orphaned(taskId)).toBe(true);
    expect(origin.resuming(taskId)).toBe(false);
    const orphaned = origin.store.getEvents(taskId).filter((event) => event.type === "task.orphaned");
    expect(orphaned.map((event) => event.payload.since)).toEqual([waitingSince]);
  });

  test("a task no longer waiting for its worker's word is not lost by a later 'not held' (an earlier answer replayed)", async () => {
    // Guards src/core/resume.ts takeResumeAnswer(): `resuming !== true` → the answer is ignored.
    const origin = await resumedOrigin([{ target: WORKER, workerKey: wendy.publicKey }]);
    const [taskId] = origin.ids as [string];
    origin.answer(WORKER, wendy, [taskId], [taskId]);
    expect(origin.resuming(taskId)).toBe(false);
    origin.answer(WORKER, wendy, [taskId], []);
    expect(origin.orphaned(taskId)).toBe(false);
  });

  test("with no worker key bound yet, a key Alice trusts confirms and is bound; an unknown key decides nothing", async () => {
    // Guards src/core/resume.ts confirms() for an unbound task (a trusted key: own or paired), and
    // confirm() binding the confirming key.
    const origin = await resumedOrigin([{ target: WORKER }, { target: OTHER }]);
    const [paired, own] = origin.ids as [string, string];
    origin.answer(WORKER, nobody, [paired], [paired]);
    origin.answer(WORKER, nobody, [paired], []);
    expect(origin.resuming(paired)).toBe(true);
    expect(origin.orphaned(paired)).toBe(false);
    origin.answer(WORKER, tara, [paired], [paired]);
    expect(origin.resuming(paired)).toBe(false);
    expect(origin.workerKey(paired)).toBe(tara.publicKey);
    origin.answer(OTHER, alice, [own], [own]);
    expect(origin.resuming(own)).toBe(false);
    expect(origin.workerKey(own)).toBe(alice.publicKey);
  });
});

/** Wendy's side, working on one task per entry for Alice (`peerSince`: when the fact that placed its origin was signed). */
async function workingFor(entries: { peerSince?: number }[]) {
  const side = await sideOn("worker", trustOf(wendy, { alice, tara }));
  const self = side.context.session.binding()!.endpoint;
  const ids = entries.map(({ peerSince }) => {
    const record = taskRecord({ origin: ORIGIN, target: self, createdAt: side.now() - 60_000 });
    side.store.putTask(record, "worker");
    side.store.setTaskMeta(record.taskId, { originKey: alice.publicKey, ...(peerSince === undefined ? {} : { peerSince }) });
    return record.taskId;
  });
  return {
    ...side,
    ids,
    /** A resume question from `from`, signed by `by` at `signedAt`, naming `tasks`. */
    asked: (from: TaskEndpoint, by: Identity, tasks: string[], signedAt = side.now()) =>
      answerResume(side.context, side.scope, from, signer(by, wendy), { tasks }, signedAt),
    origin: (taskId: string) => side.store.getStoredTask(taskId)!.record.origin,
  };
}

describe("resume: what a worker holds for a question (answerResume)", () => {
  test("a question signed exactly when its task's origin was placed is a replay: STALE_EVENT, nothing moves; one ms later it holds", async () => {
    // Guards src/core/reconnect.ts newerPlacement() (`signedAt > peerSince`, strictly) as answerResume uses it.
    const placed = Date.UTC(2026, 10, 30, 11);
    const worker = await workingFor([{ peerSince: placed }]);
    const [taskId] = worker.ids as [string];
    expect(thrown(() => worker.asked(NEW_ORIGIN, alice, [taskId], placed)).code).toBe("STALE_EVENT");
    expect(worker.origin(taskId)).toEqual(ORIGIN);
    expect(worker.asked(NEW_ORIGIN, alice, [taskId], placed + 1)).toEqual({ tasks: [taskId], held: [taskId] });
    expect(worker.origin(taskId)).toEqual(NEW_ORIGIN);
    expect(worker.store.getTaskMeta(taskId)?.peerSince).toBe(placed + 1);
  });

  test("a question fresh for one task and replayed for another holds, and moves, only the fresh one", async () => {
    // Guards src/core/resume.ts answerResume(): only `held` tasks move and are answered held.
    const placed = Date.UTC(2026, 10, 30, 11);
    const worker = await workingFor([{ peerSince: placed }, { peerSince: placed - 10 }]);
    const [stale, fresh] = worker.ids as [string, string];
    expect(worker.asked(NEW_ORIGIN, alice, [stale, fresh], placed)).toEqual({ tasks: [stale, fresh], held: [fresh] });
    expect(worker.origin(stale)).toEqual(ORIGIN);
    expect(worker.origin(fresh)).toEqual(NEW_ORIGIN);
  });

  test("only the origin key bound at assignment is answered: another key the worker trusts holds nothing and moves nothing", async () => {
    // Guards src/core/resume.ts answerResume(): `originKey === signer.key`.
    const worker = await workingFor([{}]);
    const [taskId] = worker.ids as [string];
    expect(worker.asked(NEW_ORIGIN, tara, [taskId])).toEqual({ tasks: [taskId], held: [] });
    expect(worker.origin(taskId)).toEqual(ORIGIN);
  });
});

describe("resume: what a history may put back (restoreTasks)", () => {
  test(`exactly ${maxResumeTasks} tasks are taken back`, async () => {
    // Guards src/core/resume.ts restoreTasks(): `tasks.length > maxResumeTasks` (one more is RESUME_LIMIT, tested above).
    const side = await sideOn("origin", trustOf(alice));
    const history = Array.from({ length: maxResumeTasks }, () => ({ record: taskRecord(), events: [] }));
    expect(restoreTasks(side.context, history)).toHaveLength(maxResumeTasks);
  });

  test("a malformed entry is INVALID_REQUEST at its path, and the entries before it are not restored either", async () => {
    // Guards src/core/resume.ts checked(): events a list, every event of the entry's task, workerKey a text.
    const side = await sideOn("origin", trustOf(alice));
    const good = taskRecord();
    const other = taskRecord();
    const cases: [unknown, string][] = [
      [{ record: taskRecord(), events: "none" }, "/tasks/1"],
      [{ record: taskRecord(), events: [taskEvent(other, 1, "task.created")] }, "/tasks/1/events"],
      [{ record: taskRecord(), events: [], workerKey: 42 }, "/tasks/1/workerKey"],
    ];
    for (const [bad, path] of cases) {
      const error = thrown(() => restoreTasks(side.context, [{ record: good, events: [] }, bad]));
      expect(error.code).toBe("INVALID_REQUEST");
      expect(error.details.path).toBe(path);
    }
    expect(side.store.listTasks()).toEqual([]);
  });

  test("a task this lifetime holds is left as it is: a second history neither puts it back to waiting nor rebinds its worker key", async () => {
    // Guards src/core/resume.ts restoreTasks(): `known` tasks are skipped.
    const origin = await resumedOrigin([{ target: WORKER, workerKey: wendy.publicKey }]);
    const [taskId] = origin.ids as [string];
    origin.answer(WORKER, wendy, [taskId], [taskId]);
    const record = origin.store.getStoredTask(taskId)!.record;
    expect(restoreTasks(origin.context, [{ record: { ...record, target: OTHER }, events: [], workerKey: tara.publicKey }])).toEqual([]);
    expect(origin.resuming(taskId)).toBe(false);
    expect(origin.workerKey(taskId)).toBe(wendy.publicKey);
    expect(origin.target(taskId)).toEqual(WORKER);
  });

  test("a task the session acknowledged stays closed: not taken back", async () => {
    // Guards src/core/resume.ts restoreTasks(): a history with `task.parent_acknowledged` is skipped.
    const side = await sideOn("origin", trustOf(alice));
    const record = taskRecord();
    const completed = taskEvent(record, 2, "task.completed", { summary: "done" });
    const events = [
      taskEvent(record, 1, "task.created"),
      completed,
      taskEvent(record, 3, "task.parent_acknowledged", { acknowledgedEventId: completed.eventId }),
    ];
    expect(restoreTasks(side.context, [{ record, events }])).toEqual([]);
    expect(side.store.getStoredTask(record.taskId)).toBeUndefined();
  });

  test("a worker intent the session showed stays canonicalized: its intent id names the shown event, so it is not shown again", async () => {
    // Guards src/core/resume.ts restoreOne(): the reservation of OPERATION.intent(intentId) for each shown intent.
    const side = await sideOn("origin", trustOf(alice));
    const record = taskRecord();
    const question = taskEvent(record, 2, "task.question", { message: "Which colour?", intentId: testId(4) });
    restoreTasks(side.context, [{ record, events: [taskEvent(record, 1, "task.created"), question] }]);
    const operation = side.store.getOperation(record.taskId, OPERATION.intent(String(question.payload.intentId)));
    expect(operation?.logicalId).toBe(question.eventId);
  });
});

describe("resume: asking the workers (askResumes)", () => {
  test(`one pass asks at most ${maxHellosPerPass} workers; the next pass asks the rest`, async () => {
    // Guards src/core/resume.ts askResumes(): `asked >= maxHellosPerPass`.
    const origin = await resumedOrigin([]);
    const workers = Array.from({ length: maxHellosPerPass + 1 }, (_, index) => origin.relay.session(`worker-${index}`));
    const endpoints = await Promise.all(workers.map(async (session) => (await session.connect()).endpoint));
    restoreTasks(
      origin.context,
      endpoints.map((target) => ({ record: taskRecord({ target }), events: [], workerKey: wendy.publicKey })),
    );
    const questions = () => endpoints.filter((endpoint) => origin.relay.mailbox(endpoint.id).length > 0).length;
    await askResumes(origin.context, origin.scope);
    expect(questions()).toBe(maxHellosPerPass);
    await askResumes(origin.context, origin.scope);
    expect(questions()).toBe(maxHellosPerPass + 1);
  });

  test("a question that fails for another reason than an unknown worker endpoint loses nothing: the tasks keep waiting, the failure is reported", async () => {
    // Guards src/core/resume.ts askResumes(): only TARGET_NOT_REGISTERED loses the asked tasks at once.
    // The failure here: an identity without seal keys cannot say hello (SEAL_INVALID).
    const sealless: Identity = { publicKey: alice.publicKey, fingerprint: alice.fingerprint, sign: (bytes) => alice.sign(bytes) };
    const side = await sideOn("origin", trustOf(sealless, { wendy }));
    const target = (await side.relay.session("worker").connect()).endpoint;
    const record = taskRecord({ target });
    restoreTasks(side.context, [{ record, events: [], workerKey: wendy.publicKey }]);
    await askResumes(side.context, side.scope);
    expect(side.scope.failures.get("peers")?.code).toBe("SEAL_INVALID");
    expect(side.store.getTaskMeta(record.taskId)?.resuming).toBe(true);
    expect(side.store.getTaskMeta(record.taskId)?.orphanedAt).toBeUndefined();
  });
});

describe("resume: a worker Alice paired with, through intake (relay fake)", () => {
  test("confirms a resumed task its session never bound a worker key to (the worker had said nothing yet)", async () => {
    // Guards src/core/resume.ts confirms(), unbound: the key is looked up in Alice's trust — the
    // hello gate (src/core/trust.ts gateHello) hands intake a signer without a peer name.
    const timers = createVirtualTimers(1_000_000);
    const relay = createFakeRelay(timers);
    let wall = Date.UTC(2026, 10, 30, 12);
    const clock = () => (wall += 1);
    const core = (name: string, trust: TrustOptions) =>
      createTaskCore({ store: createTaskStore(), session: relay.session(name), timers, clock, host: createMemoryHost(), trust });
    const pass = (of: TaskCore) => settleVirtually(timers, of.refresh());
    const first = core("origin", trustOf(alice, { wendy }));
    const worker = core("worker", trustOf(wendy, { alice }));
    await first.connect();
    await worker.connect();
    await introduce(first, worker, pass);
    const { taskId } = await settleVirtually(timers, first.createTask({ to: worker.endpoint()!, task: "paint the banner" }));
    await pass(worker);
    await pass(first);
    expect(worker.getTask(taskId).status).toBe("active");
    // What the session kept: the record as sent, the events it showed — none with the worker's key.
    const kept = { record: taskRecordOf(first.getTask(taskId)), events: first.getTask(taskId).events };
    await first.close();
    const second = core("origin-2", trustOf(alice, { wendy }));
    await second.connect();
    expect(await second.resume([kept])).toEqual([taskId]);
    for (const party of [second, worker, second]) await pass(party);
    const meta = coreInternals(second).store.getTaskMeta(taskId);
    expect(meta?.resuming).toBeUndefined();
    expect(meta?.workerKey).toBe(wendy.publicKey);
    expect(second.getTask(taskId).attention).toBeUndefined();
    expect(worker.getTask(taskId).origin).toEqual(second.endpoint()!);
    await Promise.all([second.close(), worker.close()]);
  });
});
