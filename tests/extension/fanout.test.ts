/**
 * The fan-out caps (issue: runaway delegation): a session holds at most `maxActiveOriginTasks`
 * active tasks as their origin, a Pi runs at most `maxSpawnedWorkers` spawned workers; the person
 * may lower either, never raise it. The N+1th is refused with a typed reason and nothing is created,
 * sent or started.
 */
import { afterEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MAX_WORKERS_VARIABLE } from "../../extensions/pi-tasks/pi-run.ts";
import { spawnTool } from "../../extensions/pi-tasks/tools/spawn.ts";
import { withErrorResult } from "../../extensions/pi-tasks/tools/shared.ts";
import { listSpawned, saveSpawned } from "../../src/host/spawned.ts";
import { createTaskCore } from "../../src/core/task-core.ts";
import { maxActiveOriginTasks, maxSpawnedWorkers } from "../../src/protocol/limits.ts";
import { createVolatileTaskSession } from "../../src/relay-client/session.ts";
import { createTaskStore } from "../../src/store/task-store.ts";
import { introduce } from "../../testkit/introduce.ts";
import { closeParties, createParty, type Party } from "../../testkit/party.ts";
import { raised } from "../../testkit/async.ts";

// Each test starts several processes.
setDefaultTimeout(15_000);
import { useRelayFixture } from "../helpers/relay-fixture.ts";

const fx = useRelayFixture({ proxy: false });
const opened: Party[] = [];
const homes: string[] = [];
const children: ReturnType<typeof spawn>[] = [];
afterEach(async () => {
  await closeParties(opened.splice(0));
  for (const child of children.splice(0)) child.kill("SIGKILL");
  for (const home of homes.splice(0)) rmSync(home, { recursive: true, force: true });
});

describe("the fan-out cap of a session", () => {
  test("the N+1th active task is FANOUT_LIMIT and nothing is created or sent; one ending makes room", async () => {
    const origin = await createParty({ url: fx.relay.url, maxActiveTasks: 2 });
    const worker = await createParty({ url: fx.relay.url });
    opened.push(origin, worker);
    await introduce(origin.core, worker.core);
    const to = worker.core.endpoint()!;
    const first = await origin.core.createTask({ to, task: "one" });
    await origin.core.createTask({ to, task: "two" });
    const { error: refused } = await raised(() => origin.core.createTask({ to, task: "three" }));
    expect(refused.code).toBe("FANOUT_LIMIT");
    expect(refused.details).toMatchObject({ active: 2, maxActiveTasks: 2 });
    expect(
      origin.core
        .listTasks()
        .map((task) => task.task)
        .sort(),
    ).toEqual(["one", "two"]);
    await origin.core.cancel({ taskId: first.taskId });
    expect((await origin.core.createTask({ to, task: "three" })).taskId).toBeString();
  });

  test("the cap may be lowered to 1, never raised past maxActiveOriginTasks; a non-number is INVALID_CONFIGURATION", () => {
    const core = (maxActiveTasks: number) => () =>
      createTaskCore({
        store: createTaskStore(),
        session: createVolatileTaskSession({ url: fx.relay.url, callerSession: "cap" }),
        maxActiveTasks,
      });
    expect(core(1)).not.toThrow();
    expect(core(maxActiveOriginTasks)).not.toThrow();
    for (const bad of [0, maxActiveOriginTasks + 1, 2.5, Number.NaN])
      expect(core(bad)).toThrow(expect.objectContaining({ code: "INVALID_CONFIGURATION" }));
  });
});

describe("the spawn cap of a Pi", () => {
  function homeWithWorkers(count: number, spawner: number): Record<string, string> {
    const home = mkdtempSync(join(tmpdir(), "pi-tasks-fanout-"));
    homes.push(home);
    const env = { PI_TASKS_HOME: home };
    for (let index = 0; index < count; index += 1) {
      const child = spawn("sleep", ["30"], { stdio: "ignore" });
      children.push(child);
      saveSpawned(env, {
        session: `w${index}`,
        pid: child.pid!,
        projectDir: home,
        relay: "http://127.0.0.1:1",
        log: join(home, `w${index}.log`),
        createdAt: new Date().toISOString(),
        spawner,
      });
    }
    return env;
  }

  function tool(env: Record<string, string>) {
    const info = { env, cwd: env.PI_TASKS_HOME!, relay: { url: "http://127.0.0.1:1" } };
    return withErrorResult(
      spawnTool({
        ready: async () => {},
        info: () => info as never,
        run: (() => {}) as never,
        current: (() => {}) as never,
        requestRefresh: () => {},
        rememberPeer: () => {},
        spentOn: () => undefined,
        wakeModel: () => undefined,
      }),
    );
  }

  test("with as many running workers as it may, the next spawn is SPAWN_LIMIT and nothing starts", async () => {
    const env = homeWithWorkers(maxSpawnedWorkers, process.pid);
    const result = await tool(env).execute("call", { name: "one-more" }, undefined, undefined, undefined);
    expect(result.isError).toBe(true);
    expect(result.details).toMatchObject({
      error: { code: "SPAWN_LIMIT", details: { running: maxSpawnedWorkers, maxWorkers: maxSpawnedWorkers } },
    });
    expect(listSpawned(env).map((worker) => worker.session)).not.toContain("one-more");
  });

  test("the person's lower cap holds; workers of another Pi do not count; a higher cap is INVALID_CONFIGURATION", async () => {
    const env = { ...homeWithWorkers(1, process.pid), [MAX_WORKERS_VARIABLE]: "1" };
    const lowered = await tool(env).execute("call", { name: "second" }, undefined, undefined, undefined);
    expect(lowered.details).toMatchObject({ error: { code: "SPAWN_LIMIT", details: { running: 1, maxWorkers: 1 } } });
    const raisedCap = await tool({ ...env, [MAX_WORKERS_VARIABLE]: String(maxSpawnedWorkers + 1) }).execute(
      "call",
      { name: "x" },
      undefined,
      undefined,
      undefined,
    );
    expect(raisedCap.details).toMatchObject({ error: { code: "INVALID_CONFIGURATION" } });
    const others = homeWithWorkers(maxSpawnedWorkers, process.pid + 1);
    const notCounted = await tool({ ...others, [MAX_WORKERS_VARIABLE]: "1" }).execute(
      "call",
      { name: "x" },
      undefined,
      undefined,
      undefined,
    );
    expect((notCounted.details as { error?: { code?: string } }).error?.code).not.toBe("SPAWN_LIMIT");
  });
});
