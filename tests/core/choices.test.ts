/**
 * Questions with choices (src/core/choices.ts) between two cores on the real relay: the choices
 * travel with the question; an answer must be exactly one of them, checked where it is written
 * (nothing is sent) — at the origin and at the worker; what a choice question may carry is checked.
 * The origin checks a worker's answer and question again where it makes them canonical (intake.ts):
 * a worker whose own check was bypassed (mail built below its TaskCore) is refused INVALID_INTENT.
 */
import { afterEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { raised } from "../../testkit/async.ts";
import { settle } from "../../testkit/drain.ts";
import { introduce } from "../../testkit/introduce.ts";
import { closeParties, createParty, type Party } from "../../testkit/party.ts";
import { sealedTo } from "../../testkit/sealed.ts";
import { encodeEnvelope, makeIntent } from "../../src/core/envelopes.ts";
import { coreInternals } from "../../src/core/task-core.ts";
import { processLocalTrust } from "../../src/core/trust.ts";
import type { ReceiverIntentType } from "../../src/protocol/schemas.ts";
import { useRelayFixture } from "../helpers/relay-fixture.ts";

setDefaultTimeout(15_000);

const fx = useRelayFixture({ proxy: false });
const opened: Party[] = [];
afterEach(() => closeParties(opened.splice(0)));

async function pair() {
  const origin = await createParty({ url: fx.relay.url });
  const worker = await createParty({ url: fx.relay.url });
  opened.push(origin, worker);
  await introduce(origin.core, worker.core);
  const { taskId } = await origin.core.createTask({ to: worker.core.endpoint()!, task: "paint the banner" });
  await settle([origin, worker]);
  return { origin, worker, taskId, round: () => settle([origin, worker]) };
}

const CHOICES = ["red", "forest green", "blue"];

/** A chain A → B → C on the relay: A's task "the banner" at B, and B's sub-task "its colour" at C. */
async function chainOfThree() {
  const [a, b, c] = [
    await createParty({ url: fx.relay.url }),
    await createParty({ url: fx.relay.url }),
    await createParty({ url: fx.relay.url }),
  ];
  opened.push(a, b, c);
  await introduce(a.core, b.core);
  await introduce(b.core, c.core);
  const all = () => settle([a, b, c]);
  const root = await a.core.createTask({ to: b.core.endpoint()!, task: "the banner" });
  await all();
  const child = await b.core.createTask({ to: c.core.endpoint()!, task: "its colour" });
  await all();
  return { a, b, c, root, child, all };
}

describe("questions with choices", () => {
  test("the worker's choices reach the origin; an answer outside them is refused there and nothing is sent; one of them is answered", async () => {
    const { origin, worker, taskId, round } = await pair();
    await worker.core.message({ taskId, type: "question", message: "Which colour?", choices: CHOICES, defaultChoice: "blue" });
    await round();
    const question = origin.core.getTask(taskId).events.find((event) => event.type === "task.question")!;
    expect(question.payload).toMatchObject({ choices: CHOICES, defaultChoice: "blue" });
    const before = origin.core.getTask(taskId).events.length;
    const { error } = await raised(() => origin.core.message({ taskId, type: "answer", message: "purple", inReplyTo: question.eventId }));
    expect(error.code).toBe("INVALID_REQUEST");
    expect(error.details).toMatchObject({ path: "/message", choices: CHOICES });
    expect(origin.core.getTask(taskId).events.length).toBe(before);
    await origin.core.message({ taskId, type: "answer", message: "forest green", inReplyTo: question.eventId });
    await round();
    const answer = worker.core.getTask(taskId).events.find((event) => event.type === "task.answer");
    expect(answer?.payload.message).toBe("forest green");
  });

  test("the origin's choices bind the worker's answer the same way", async () => {
    const { origin, worker, taskId, round } = await pair();
    await origin.core.message({ taskId, type: "question", message: "Ready?", choices: ["yes", "no"] });
    await round();
    const question = worker.core.getTask(taskId).events.find((event) => event.type === "task.question")!;
    const { error } = await raised(() => worker.core.message({ taskId, type: "answer", message: "maybe", inReplyTo: question.eventId }));
    expect(error.code).toBe("INVALID_REQUEST");
    await worker.core.message({ taskId, type: "answer", message: "yes", inReplyTo: question.eventId });
  });

  // Guards src/core/worker-operations.ts raisedChoices: a raised question offers its sub-task question's choices.
  test("a question raised up the chain offers the sub-task question's choices, and binds the answer to them", async () => {
    const { a, b, c, root, child, all } = await chainOfThree();
    await c.core.message({ taskId: child.taskId, type: "question", message: "Which colour?", choices: CHOICES, defaultChoice: "blue" });
    await all();
    const asked = b.core.getTask(child.taskId).events.find((event) => event.type === "task.question")!;
    await b.core.message({ taskId: root.taskId, type: "question", message: "C asks: which colour?", raisesQuestion: asked.eventId });
    await all();
    const upChain = a.core.getTask(root.taskId).events.find((event) => event.type === "task.question")!;
    expect(upChain.payload).toMatchObject({ choices: CHOICES, defaultChoice: "blue" });
    const { error } = await raised(() =>
      a.core.message({ taskId: root.taskId, type: "answer", message: "purple", inReplyTo: upChain.eventId }),
    );
    expect(error.code).toBe("INVALID_REQUEST");
  });

  // Guards src/core/intake.ts relayAnswerDown (fitsChoices): an answer goes down the chain only when the sub-task's question accepts it.
  test("an answer to a question raised with choices of its own goes down the chain only when the sub-task's question accepts it", async () => {
    const { a, b, c, root, child, all } = await chainOfThree();
    await c.core.message({ taskId: child.taskId, type: "question", message: "Which colour?", choices: CHOICES });
    await all();
    const asked = b.core.getTask(child.taskId).events.find((event) => event.type === "task.question")!;
    const raise = async (choices: string[]) => {
      await b.core.message({ taskId: root.taskId, type: "question", message: "C asks", raisesQuestion: asked.eventId, choices });
      await all();
      return a.core
        .getTask(root.taskId)
        .events.filter((event) => event.type === "task.question")
        .at(-1)!;
    };
    const answersAtC = () => c.core.getTask(child.taskId).events.filter((event) => event.type === "task.answer");
    // Outside the sub-task's choices: it reaches B (its model answers C), never C.
    await a.core.message({
      taskId: root.taskId,
      type: "answer",
      message: "ask the client",
      inReplyTo: (await raise(["ask the client", "red"])).eventId,
    });
    await all();
    expect(b.core.getTask(root.taskId).events.filter((event) => event.type === "task.answer").length).toBe(1);
    expect(answersAtC()).toEqual([]);
    // One of them: relayed down, bound to C's question.
    await a.core.message({
      taskId: root.taskId,
      type: "answer",
      message: "red",
      inReplyTo: (await raise(["ask the client", "red"])).eventId,
    });
    await all();
    expect(answersAtC().map((event) => event.payload.message)).toEqual(["red"]);
  });

  // Guards src/core/worker-operations.ts messagePayload and src/core/origin-operations.ts originMessage: choiceFields where written.
  test("only a question offers choices, without duplicates, its suggested one among them — at either side", async () => {
    const { origin, worker, taskId } = await pair();
    const cases = [
      { type: "information", message: "fyi", choices: ["a", "b"] },
      { type: "question", message: "?", defaultChoice: "a" },
      { type: "question", message: "?", choices: ["a", "a"] },
      { type: "question", message: "?", choices: ["a", "b"], defaultChoice: "c" },
    ];
    for (const side of [worker, origin]) {
      for (const params of cases) {
        const { error } = await raised(() => side.core.message({ taskId, ...params }));
        expect({ params, code: error.code }).toEqual({ params, code: "INVALID_REQUEST" });
      }
    }
    // The schema bounds them: one choice, or too many, is a validation error.
    const { error } = await raised(() => worker.core.message({ taskId, type: "question", message: "?", choices: ["only"] }));
    expect(error.code).toBe("INVALID_REQUEST");
  });
});

/**
 * The worker's intent as its own TaskCore would send it, but built here, below the core's checks:
 * signed with the key every party of this file holds (so the trust gate lets it in), sealed, sent
 * from the worker's endpoint. Returns the failure of the origin's intake pass, if any.
 */
async function sendBelowTheCore(worker: Party, origin: Party, taskId: string, type: ReceiverIntentType, payload: Record<string, unknown>) {
  const intent = makeIntent(taskId, type, payload);
  const from = worker.core.endpoint()!;
  const to = origin.core.endpoint()!;
  await coreInternals(worker.core).session.send(
    encodeEnvelope(from, to, taskId, "intent", intent, Date.now(), processLocalTrust(), undefined, sealedTo()),
  );
  const report = await origin.core.refresh();
  return report.failures.get("intake");
}

describe("the origin's own check where a worker's answer becomes canonical", () => {
  // Guards src/core/intake.ts canonicalOf: checkChoiceAnswer(…, "INVALID_INTENT") for a task.answer intent.
  test("an answer outside the choices that the worker's side never checked is refused INVALID_INTENT at the origin: no event, nothing sent back", async () => {
    const { origin, worker, taskId, round } = await pair();
    await origin.core.message({ taskId, type: "question", message: "Ready?", choices: ["yes", "no"] });
    await round();
    const question = origin.core.getTask(taskId).events.find((event) => event.type === "task.question")!;
    const answers = () => origin.core.getTask(taskId).events.filter((event) => event.type === "task.answer");

    const refused = await sendBelowTheCore(worker, origin, taskId, "task.answer", { message: "maybe", inReplyTo: question.eventId });
    expect(refused?.code).toBe("INVALID_INTENT");
    expect(refused?.details).toMatchObject({ path: "/message", inReplyTo: question.eventId, choices: ["yes", "no"] });
    expect(origin.core.rejections()).toEqual({ INVALID_INTENT: 1 });
    expect(answers()).toEqual([]);
    await round();
    expect(worker.core.getTask(taskId).events.filter((event) => event.type === "task.answer")).toEqual([]);

    // The same mail with one of the choices is canonical: what was refused was the answer, not the way it came.
    expect(await sendBelowTheCore(worker, origin, taskId, "task.answer", { message: "no", inReplyTo: question.eventId })).toBeUndefined();
    expect(answers().map((event) => event.payload.message)).toEqual(["no"]);
  });

  // Guards src/core/intake.ts canonicalOf: an answer intent's inReplyTo must name a task.question of this task.
  test("an answer intent that names no question of the task (its assignment, or a question of another task) is refused INVALID_INTENT", async () => {
    const { origin, worker, taskId, round } = await pair();
    const other = await origin.core.createTask({ to: worker.core.endpoint()!, task: "another task" });
    await round();
    await origin.core.message({ taskId: other.taskId, type: "question", message: "Elsewhere?", choices: ["yes", "no"] });
    const foreign = origin.core.getTask(other.taskId).events.find((event) => event.type === "task.question")!;
    const assignment = origin.core.getTask(taskId).events[0]!;
    for (const inReplyTo of [assignment.eventId, foreign.eventId]) {
      const refused = await sendBelowTheCore(worker, origin, taskId, "task.answer", { message: "yes", inReplyTo });
      expect(refused?.code).toBe("INVALID_INTENT");
      expect(refused?.details.problem).toBe("inReplyTo does not name a question of this task");
    }
    expect(origin.core.getTask(taskId).events.filter((event) => event.type === "task.answer")).toEqual([]);
  });

  // Guards src/core/intake.ts canonicalOf: choiceFields(…, "INVALID_INTENT") for a task.question intent.
  test("a worker's question whose choices repeat, or whose suggested one is not among them, is refused INVALID_INTENT at the origin", async () => {
    const { origin, worker, taskId } = await pair();
    const questions = () => origin.core.getTask(taskId).events.filter((event) => event.type === "task.question");
    const cases = [
      { payload: { message: "?", choices: ["a", "a"] }, path: "/choices" },
      { payload: { message: "?", choices: ["a", "b"], defaultChoice: "c" }, path: "/defaultChoice" },
      { payload: { message: "?", defaultChoice: "a" }, path: "/defaultChoice" },
    ];
    for (const { payload, path } of cases) {
      const refused = await sendBelowTheCore(worker, origin, taskId, "task.question", payload);
      expect({ payload, code: refused?.code, path: refused?.details.path }).toEqual({ payload, code: "INVALID_INTENT", path });
    }
    expect(questions()).toEqual([]);
    expect(origin.core.getTask(taskId).attention).toBeUndefined();
    // A valid one is taken.
    expect(
      await sendBelowTheCore(worker, origin, taskId, "task.question", { message: "?", choices: ["a", "b"], defaultChoice: "b" }),
    ).toBeUndefined();
    expect(questions().map((event) => event.payload)).toEqual([expect.objectContaining({ choices: ["a", "b"], defaultChoice: "b" })]);
  });
});
