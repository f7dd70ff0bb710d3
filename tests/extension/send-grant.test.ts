/**
 * The grant a spawned worker's profile gives follows the worker across rebinds
 * (extensions/pi-tasks/tools/send.ts): after a relay restart every session has a fresh endpoint, and
 * a task sent to the worker's new endpoint must carry its profile's grant just as one sent to the
 * endpoint it registered when spawned. Against the real relay: the worker's session is registered
 * there under its name at a new endpoint; the spawn record still names the old one.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { SessionInfo } from "../../extensions/pi-tasks/lifecycle.ts";
import { saveSpawned } from "../../src/host/spawned.ts";
import type { TaskCore } from "../../src/core/task-core.ts";
import type { Grant, TaskEndpoint } from "../../src/protocol/schemas.ts";
import { createVolatileTaskSession, type VolatileTaskSession } from "../../src/relay-client/session.ts";
import { type RelayProcess, startRelayProcess } from "../../testkit/relay-process.ts";
import { fakeCore, taskView, toolsOn } from "../helpers/extension-fakes.ts";

const GRANT: Grant = { bash: false };
let relay: RelayProcess;
let home: string;
const sessions: VolatileTaskSession[] = [];

beforeAll(async () => {
  relay = await startRelayProcess();
  home = mkdtempSync(join(tmpdir(), "pi-tasks-send-grant-"));
});
afterAll(async () => {
  for (const session of sessions) await session.close();
  await relay.stop();
  rmSync(home, { recursive: true, force: true });
});

/** A worker session registered on the relay under `name` (its current endpoint). */
async function registered(name: string): Promise<TaskEndpoint> {
  const session = createVolatileTaskSession({ url: relay.url, callerSession: name });
  sessions.push(session);
  return (await session.lease()).endpoint;
}

/** The send tool with a core that records the options each createTask was given. */
function sendTool(env: Record<string, string>) {
  const given: { grant?: Grant }[] = [];
  const fake = fakeCore();
  const core = new Proxy(fake.core, {
    get(target, property, receiver) {
      if (property !== "createTask") return Reflect.get(target, property, receiver);
      return async (params: { to: TaskEndpoint }, options: { grant?: Grant }) => {
        given.push(options);
        return { taskId: "t-1", envelopeId: "e-1", target: params.to, delivery: "accepted" };
      };
    },
  }) as TaskCore;
  const info = { env, relay: { url: relay.url, state: "configured" }, session: { name: "origin" } } as unknown as SessionInfo;
  return { tool: toolsOn(core, { info }).agent_task_send!, given };
}

/** The spawn record of a worker of profile "checker" holding `grant`, registered at `atSpawn` (this process stands in for its holder). */
function spawnedChecker(env: Record<string, string>, name: string, atSpawn: TaskEndpoint, grant: Grant): void {
  saveSpawned(env, {
    session: name,
    pid: process.pid,
    projectDir: home,
    relay: relay.url,
    log: join(home, "log"),
    createdAt: new Date().toISOString(),
    taskEndpoint: atSpawn,
    profile: "checker",
    grant,
  });
}

describe("a spawned worker's grant", () => {
  test("goes with a task sent to the worker's new endpoint after it rebound, as to the one it registered when spawned", async () => {
    const env = { PI_TASKS_HOME: home };
    const name = `checker-${crypto.randomUUID().slice(0, 8)}`;
    const atSpawn: TaskEndpoint = { relay: "wolfpack-volatile-v1", id: crypto.randomUUID() };
    spawnedChecker(env, name, atSpawn, GRANT);
    const now = await registered(name);
    const stranger = await registered(`stranger-${crypto.randomUUID().slice(0, 8)}`);
    const { tool, given } = sendTool(env);
    await tool.execute("c1", { to: atSpawn, task: "check" });
    await tool.execute("c2", { to: now, task: "check again" });
    await tool.execute("c3", { to: stranger, task: "not a spawned worker" });
    expect(given.map((options) => options.grant)).toEqual([GRANT, GRANT, undefined]);
  });

  // extensions/pi-tasks/tools/send.ts execute: `narrowGrant(spawned, defaultGrant(env))` — the person's default grant
  // goes with every send, and a profile's grant is narrowed to it, never put in its place.
  test("the person's default grant goes with a send to any worker, and narrows a spawned worker's profile grant", async () => {
    const env = { PI_TASKS_HOME: home, PI_TASKS_GRANT: JSON.stringify({ tools: ["read", "bash"], maxTurns: 3 }) };
    const name = `narrowed-${crypto.randomUUID().slice(0, 8)}`;
    const atSpawn: TaskEndpoint = { relay: "wolfpack-volatile-v1", id: crypto.randomUUID() };
    spawnedChecker(env, name, atSpawn, { tools: ["read"], bash: false, maxTurns: 10 });
    const stranger = await registered(`stranger-${crypto.randomUUID().slice(0, 8)}`);
    const { tool, given } = sendTool(env);
    await tool.execute("c1", { to: stranger, task: "anyone" });
    await tool.execute("c2", { to: atSpawn, task: "the checker" });
    expect(given.map((options) => options.grant)).toEqual([
      { tools: ["read", "bash"], maxTurns: 3 },
      { tools: ["read"], bash: false, maxTurns: 3 },
    ]);
  });
});

describe("a send whose worker had to prove its key first", () => {
  test("a quick worker that finished the task within the wait: the send left — reported sent, never 'ended unsent'", async () => {
    const base = taskView({ role: "origin", status: "completed" });
    const finished = { ...base, deliveryEvidence: { ...base.deliveryEvidence, relayAcceptance: "accepted" as const } };
    const fake = fakeCore([finished]);
    const presented: string[] = [];
    const core = new Proxy(fake.core, {
      get(target, property, receiver) {
        if (property === "createTask")
          return async () => ({ taskId: finished.taskId, envelopeId: "e-1", target: finished.target, delivery: "pending" });
        if (property === "refresh") return async () => undefined;
        if (property === "getTask") return () => finished;
        if (property === "completeLocalPresentation") return (eventId: string) => presented.push(eventId);
        return Reflect.get(target, property, receiver);
      },
    }) as TaskCore;
    const result = await toolsOn(core).agent_task_send!.execute("c1", { to: finished.target, task: "quick" });
    expect(result.isError).toBeUndefined();
    expect(result.content[0]!.text).toContain("delivery: relay acceptance only");
    // Its completion is still the model's to be shown: nothing was marked presented.
    expect(presented).toEqual([]);
  });
});
