/**
 * Questions with choices (src/core/choices.ts) between two cores on the real relay: the choices
 * travel with the question; an answer must be exactly one of them, checked where it is written
 * (nothing is sent) — at the origin and at the worker; what a choice question may carry is checked.
 */
import { afterEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { raised } from "../../kit/async.ts";
import { settle } from "../../kit/drain.ts";
import { introduce } from "../../kit/introduce.ts";
import { closeParties, createParty, type Party } from "../../kit/party.ts";
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

  test("only a question offers choices, without duplicates, its suggested one among them", async () => {
    const { worker, taskId } = await pair();
    const cases = [
      { type: "information", message: "fyi", choices: ["a", "b"] },
      { type: "question", message: "?", defaultChoice: "a" },
      { type: "question", message: "?", choices: ["a", "a"] },
      { type: "question", message: "?", choices: ["a", "b"], defaultChoice: "c" },
    ];
    for (const params of cases) {
      const { error } = await raised(() => worker.core.message({ taskId, ...params }));
      expect(error.code).toBe("INVALID_REQUEST");
    }
    // The schema bounds them: one choice, or too many, is a validation error.
    const { error } = await raised(() => worker.core.message({ taskId, type: "question", message: "?", choices: ["only"] }));
    expect(error.code).toBe("INVALID_REQUEST");
  });
});
