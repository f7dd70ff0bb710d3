/**
 * Asking for more, once (src/core/grant-requests.ts), between real cores on the real relay: the
 * worker's request reaches the origin as an open request (never shown to its model); an approval
 * widens the task's grant at both sides, never beyond what the origin holds itself; a denial
 * changes nothing; a task asks once; only for what it lacks; only its worker asks; only an open
 * request is decided; a resumed origin keeps the widened grant.
 */
import { afterEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { raised } from "../../testkit/async.ts";
import { settle } from "../../testkit/drain.ts";
import { introduce } from "../../testkit/introduce.ts";
import { closeParties, createParty, type Party } from "../../testkit/party.ts";
import { openGrantRequests } from "../../src/core/grant-requests.ts";
import { useRelayFixture } from "../helpers/relay-fixture.ts";

setDefaultTimeout(20_000);

const fx = useRelayFixture({ proxy: false });
const opened: Party[] = [];
afterEach(() => closeParties(opened.splice(0)));

async function parties(count: number): Promise<Party[]> {
  const made: Party[] = [];
  for (let index = 0; index < count; index += 1) made.push(await createParty({ url: fx.relay.url }));
  opened.push(...made);
  for (const left of made) for (const right of made) if (left !== right) await introduce(left.core, right.core);
  return made;
}

const narrow = { tools: ["read", "bash"], bash: false, read: ["src"], write: ["src"], maxTurns: 5 };

async function asked(grant: Record<string, unknown> = narrow) {
  const [origin, worker] = await parties(2);
  const { taskId } = await origin!.core.createTask({ to: worker!.core.endpoint()!, task: "fix the build" }, { grant });
  const round = () => settle([origin!, worker!]);
  await round();
  return { origin: origin!, worker: worker!, taskId, round };
}

describe("grant requests", () => {
  test("approved: the origin's person widens the grant for this task; the worker holds it; its model is told", async () => {
    const { origin, worker, taskId, round } = await asked();
    await worker.core.requestGrant({ taskId, request: { bash: true, write: ["docs"] }, reason: "the docs build needs a command" });
    await round();
    const open = openGrantRequests(origin.core.getTask(taskId));
    expect(open.map((event) => event.payload)).toEqual([
      expect.objectContaining({ request: { bash: true, write: ["docs"] }, reason: "the docs build needs a command" }),
    ]);
    // Not for the origin's model: it cannot decide.
    expect(origin.host.inserted.some((item) => item.event.type === "task.grant_requested")).toBe(false);
    const decided = await origin.core.decideGrant({ taskId, request: open[0]!.eventId, approved: true });
    const widened = { ...narrow, bash: true, write: ["src", "docs"] };
    expect(decided.grant).toEqual(widened);
    expect(origin.core.getTask(taskId).grant).toEqual(widened);
    expect(openGrantRequests(origin.core.getTask(taskId))).toEqual([]);
    await round();
    expect(worker.core.getTask(taskId).grant).toEqual(widened);
    const shown = worker.host.inserted.filter((item) => item.event.type === "task.grant_decided");
    expect(shown.map((item) => item.event.payload.approved)).toEqual([true]);
    expect(worker.host.wakes.flat().some((item) => item.event.type === "task.grant_decided")).toBe(true);
  });

  test("denied: nothing changes at either side; the worker's model is told", async () => {
    const { origin, worker, taskId, round } = await asked();
    await worker.core.requestGrant({ taskId, request: { network: true }, reason: "fetch a package" });
    await round();
    const [open] = openGrantRequests(origin.core.getTask(taskId));
    await origin.core.decideGrant({ taskId, request: open!.eventId, approved: false, note: "no network in this repo" });
    await round();
    expect(origin.core.getTask(taskId).grant).toEqual(narrow);
    expect(worker.core.getTask(taskId).grant).toEqual(narrow);
    const decision = worker.core.getTask(taskId).events.find((event) => event.type === "task.grant_decided");
    expect(decision?.payload).toEqual({ request: open!.eventId, approved: false, note: "no network in this repo" });
  });

  test("once per task; only for what the grant lacks; only by the task's worker — each refused with GRANT_REQUEST_REFUSED or NOT_PARTICIPANT", async () => {
    const { origin, worker, taskId, round } = await asked();
    const nothingNew = await raised(() => worker.core.requestGrant({ taskId, request: { read: ["src"] }, reason: "read src" }));
    expect(nothingNew.error.code).toBe("GRANT_REQUEST_REFUSED");
    const byOrigin = await raised(() => origin.core.requestGrant({ taskId, request: { bash: true }, reason: "mine" }));
    expect(byOrigin.error.code).toBe("NOT_PARTICIPANT");
    await worker.core.requestGrant({ taskId, request: { bash: true }, reason: "run the tests" });
    const again = await raised(() => worker.core.requestGrant({ taskId, request: { network: true }, reason: "and the network" }));
    expect(again.error.code).toBe("GRANT_REQUEST_REFUSED");
    expect(again.error.details.problem).toBe("this task asked for more once already");
    await round();
    expect(openGrantRequests(origin.core.getTask(taskId))).toHaveLength(1);
  });

  test("only an open request is decided, once; a bad input is refused and changes nothing", async () => {
    const { origin, worker, taskId, round } = await asked();
    await worker.core.requestGrant({ taskId, request: { bash: true }, reason: "run the tests" });
    await round();
    const [open] = openGrantRequests(origin.core.getTask(taskId));
    const unknown = await raised(() => origin.core.decideGrant({ taskId, request: "no-such-request", approved: true }));
    expect(unknown.error.code).toBe("GRANT_REQUEST_REFUSED");
    const byWorker = await raised(() => worker.core.decideGrant({ taskId, request: open!.eventId, approved: true }));
    expect(byWorker.error.code).toBe("NOT_ORIGIN");
    expect(origin.core.getTask(taskId).grant).toEqual(narrow);
    await origin.core.decideGrant({ taskId, request: open!.eventId, approved: false });
    const twice = await raised(() => origin.core.decideGrant({ taskId, request: open!.eventId, approved: true }));
    expect(twice.error.code).toBe("GRANT_REQUEST_REFUSED");
    expect(origin.core.getTask(taskId).grant).toEqual(narrow);
  });

  test("an approval never widens beyond what the origin holds itself (A→B→C: B approves at most A's grant)", async () => {
    const [a, b, c] = await parties(3);
    const all = () => settle([a!, b!, c!]);
    const parent = await a!.core.createTask({ to: b!.core.endpoint()!, task: "coordinate" }, { grant: { bash: false, write: ["src"] } });
    await all();
    const child = await b!.core.createTask({ to: c!.core.endpoint()!, task: "edit" });
    await all();
    expect(c!.core.getTask(child.taskId).lineage?.parentTaskId).toBe(parent.taskId);
    await c!.core.requestGrant({ taskId: child.taskId, request: { bash: true, write: ["/etc"] }, reason: "needs more" });
    await all();
    const [open] = openGrantRequests(b!.core.getTask(child.taskId));
    const decided = await b!.core.decideGrant({ taskId: child.taskId, request: open!.eventId, approved: true });
    expect(decided.grant).toEqual({ bash: false, write: ["src"] });
    await all();
    expect(c!.core.getTask(child.taskId).grant).toEqual({ bash: false, write: ["src"] });
  });
});
