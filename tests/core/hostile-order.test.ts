/**
 * A relay that hands one page's mail in another order than it was sent (the simulator's hostile
 * relay, testkit/sim/hostile.ts, reordering every page it can): a worker is still shown one task's
 * events in the order its origin numbered them (src/core/presentation.ts, `inSequence`), and mail
 * that came ahead of its task's assignment in one page is taken after it (src/core/pass.ts,
 * `intakeInbox`), not refused as a task it does not know. Found by the simulator
 * (docs/simulator.md, "What it found").
 */
import { afterEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { generateIdentity } from "../../src/trust/keys.ts";
import { settle } from "../../testkit/drain.ts";
import { introduce } from "../../testkit/introduce.ts";
import { closeParties, createParty, type Party } from "../../testkit/party.ts";
import { createHostileRelay, NO_HOSTILITY } from "../../testkit/sim/hostile.ts";
import { createSimRandom } from "../../testkit/sim/random.ts";
import { useRelayFixture } from "../helpers/relay-fixture.ts";

setDefaultTimeout(15_000);

const fx = useRelayFixture({ proxy: false });
const opened: Party[] = [];
afterEach(() => closeParties(opened.splice(0)));

function reorderingRelay() {
  const hostile = createHostileRelay({
    random: createSimRandom(1),
    identity: generateIdentity().identity,
    recipients: () => [],
    rates: { ...NO_HOSTILITY, reorder: 1 },
    now: Date.now,
  });
  const fetchThrough = ((input: string | URL | Request, init?: RequestInit) =>
    hostile.handle(input instanceof Request ? input : new Request(input as string, init), fetch)) as typeof fetch;
  return { hostile, fetchThrough };
}

describe("a relay that reorders a page", () => {
  test("a cancel handed ahead of its task's assignment is taken after it: the worker's task ends cancelled, nothing refused (seed 689450029)", async () => {
    const { hostile, fetchThrough } = reorderingRelay();
    const origin = await createParty({ url: fx.relay.url });
    const worker = await createParty({ url: fx.relay.url, fetch: fetchThrough });
    opened.push(origin, worker);
    await introduce(origin.core, worker.core);
    await introduce(worker.core, origin.core);
    // Both wait in the worker's mailbox: its next page holds them, and the relay puts the cancel first.
    const { taskId } = await origin.core.createTask({ to: worker.core.endpoint()!, task: "cancelled at once" });
    await origin.core.cancel({ taskId, reason: "changed my mind" });
    await settle([origin, worker]);
    expect(hostile.acts().reorder).toBeGreaterThan(0);
    expect(worker.core.getTask(taskId).status).toBe("cancelled");
    expect(worker.core.rejections()).toEqual({});
    const shown = worker.host.inserted.filter((item) => item.taskId === taskId).map((item) => item.event.type);
    expect(shown).toEqual(["task.created", "task.cancelled"]);
  });

  test("the worker is shown the two answers of its task in the order the origin numbered them", async () => {
    const { hostile, fetchThrough: reordering } = reorderingRelay();
    const origin = await createParty({ url: fx.relay.url });
    const worker = await createParty({ url: fx.relay.url, fetch: reordering });
    opened.push(origin, worker);
    await introduce(origin.core, worker.core);
    await introduce(worker.core, origin.core);
    const { taskId } = await origin.core.createTask({ to: worker.core.endpoint()!, task: "two questions" });
    await settle([origin, worker]);
    await worker.core.message({ taskId, type: "question", message: "first?" });
    await worker.core.message({ taskId, type: "question", message: "second?" });
    await settle([origin, worker]);
    const questions = origin.core.getTask(taskId).events.filter((event) => event.type === "task.question");
    expect(questions.length).toBe(2);
    // Both answers wait in the worker's mailbox: its next page holds them, and the relay swaps them.
    for (const [index, question] of questions.entries())
      await origin.core.message({ taskId, type: "answer", inReplyTo: question.eventId, message: `answer ${index + 1}` });
    await settle([origin, worker]);
    expect(hostile.acts().reorder).toBeGreaterThan(0);
    const answers = worker.host.inserted.filter((item) => item.taskId === taskId && item.event.type === "task.answer");
    expect(answers.map((item) => item.event.payload.message)).toEqual(["answer 1", "answer 2"]);
  });
});
