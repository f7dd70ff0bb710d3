/**
 * A grant travels in the signed task record and only narrows down a chain: the worker holds exactly
 * the grant its origin sent, and a task it delegates onward carries at most that, whatever it asks.
 */
import { afterEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { raised } from "../../testkit/async.ts";
import { settle } from "../../testkit/drain.ts";
import { introduce } from "../../testkit/introduce.ts";
import { closeParties, createParty, type Party } from "../../testkit/party.ts";
import { useRelayFixture } from "../helpers/relay-fixture.ts";

setDefaultTimeout(15_000);

const fx = useRelayFixture({ proxy: false });
const opened: Party[] = [];
afterEach(() => closeParties(opened.splice(0)));

async function parties(count: number, clock?: () => number): Promise<Party[]> {
  const made: Party[] = [];
  for (let index = 0; index < count; index += 1)
    made.push(await createParty({ url: fx.relay.url, ...(clock === undefined ? {} : { clock }) }));
  opened.push(...made);
  for (const left of made) for (const right of made) if (left !== right) await introduce(left.core, right.core);
  return made;
}

describe("grants", () => {
  test("the worker holds exactly the grant its origin sent (signed with the record)", async () => {
    const [a, b] = await parties(2);
    const grant = { tools: ["read", "grep"], bash: false, read: ["src"], maxTurns: 5, maxCostUsd: 0.5, maxWallMs: 60_000 };
    const created = await a!.core.createTask({ to: b!.core.endpoint()!, task: "look around" }, { grant });
    await settle([a!, b!]);
    expect(a!.core.getTask(created.taskId).grant).toEqual(grant);
    expect(b!.core.getTask(created.taskId).grant).toEqual(grant);
  });

  test("a sub-delegation is narrowed to its parent's grant, whatever it asks for; asking nothing, it inherits the parent's", async () => {
    const [a, b, c] = await parties(3);
    const parent = await a!.core.createTask({ to: b!.core.endpoint()!, task: "coordinate" }, { grant: { tools: ["read"], maxTurns: 4 } });
    await settle([a!, b!, c!]);
    const child = await b!.core.createTask(
      { to: c!.core.endpoint()!, task: "do it" },
      { grant: { tools: ["read", "bash"], maxTurns: 40 } },
    );
    await settle([a!, b!, c!]);
    expect(b!.core.getTask(child.taskId).lineage?.parentTaskId).toBe(parent.taskId);
    expect(c!.core.getTask(child.taskId).grant).toEqual({ tools: ["read"], maxTurns: 4 });
    // Without asking, the child inherits the parent's grant.
    await b!.core.cancel({ taskId: child.taskId });
    const inherited = await b!.core.createTask({ to: c!.core.endpoint()!, task: "again" });
    expect(b!.core.getTask(inherited.taskId).grant).toEqual({ tools: ["read"], maxTurns: 4 });
  });

  // Issue 37: budgets restarted at every hop — A→B→C, C got the full wall time again, its clock started when B sent.
  test("a sub-task's wall time is what is left of its parent's, and it ends no later than its parent; a spent budget sends nothing", async () => {
    const [a, b, c] = await parties(3);
    const parent = await a!.core.createTask(
      { to: b!.core.endpoint()!, task: "coordinate", timeoutMs: 120_000 },
      { grant: { maxWallMs: 10_000 } },
    );
    await settle([a!, b!, c!]);
    await Bun.sleep(1_000);
    const child = await b!.core.createTask(
      { to: c!.core.endpoint()!, task: "do it", timeoutMs: 300_000 },
      { grant: { maxWallMs: 60_000 } },
    );
    const granted = b!.core.getTask(child.taskId).grant?.maxWallMs ?? Number.POSITIVE_INFINITY;
    expect(granted).toBeLessThanOrEqual(9_000);
    expect(granted).toBeGreaterThan(0);
    expect(b!.core.getTask(child.taskId).expiresAt).toBeLessThanOrEqual(b!.core.getTask(parent.taskId).expiresAt);
    await b!.core.cancel({ taskId: child.taskId });
    await a!.core.cancel({ taskId: parent.taskId });
    // A parent whose wall time is spent: its worker can delegate nothing more.
    await a!.core.createTask({ to: b!.core.endpoint()!, task: "quick", timeoutMs: 120_000 }, { grant: { maxWallMs: 1_000 } });
    await settle([a!, b!, c!]);
    await Bun.sleep(1_100);
    const before = b!.core.listTasks().length;
    const { error } = await raised(async () => b!.core.createTask({ to: c!.core.endpoint()!, task: "too late" }));
    expect(error.code).toBe("BUDGET_EXHAUSTED");
    expect(b!.core.listTasks().length).toBe(before);
  });

  // Issue 37: C got its own turns and cost on top of what B spent.
  test("a sub-task's turns and cost are what its parent's model left of them; spent, nothing is sent", async () => {
    const [a, b, c] = await parties(3);
    const parent = await a!.core.createTask({ to: b!.core.endpoint()!, task: "coordinate" }, { grant: { maxTurns: 5, maxCostUsd: 1 } });
    await settle([a!, b!, c!]);
    const spent = new Map([[parent.taskId, { turns: 3, costUsd: 0.25 }]]);
    const spentOn = (taskId: string) => spent.get(taskId);
    const child = await b!.core.createTask({ to: c!.core.endpoint()!, task: "do it" }, { grant: { maxTurns: 40, maxCostUsd: 5 }, spentOn });
    expect(b!.core.getTask(child.taskId).grant).toEqual({ maxTurns: 2, maxCostUsd: 0.75 });
    await b!.core.cancel({ taskId: child.taskId });
    spent.set(parent.taskId, { turns: 5, costUsd: 0.25 });
    const before = b!.core.listTasks().length;
    const { error } = await raised(async () => b!.core.createTask({ to: c!.core.endpoint()!, task: "more" }, { spentOn }));
    expect(error.code).toBe("BUDGET_EXHAUSTED");
    expect(error.details.budget).toBe("maxTurns");
    expect(b!.core.listTasks().length).toBe(before);
  });
});
