/**
 * A worker this Pi spawned is known gone when its process exits (extensions/pi-tasks/spawn-watch.ts):
 * its tasks are orphaned at the next look (after each background pass), not after heartbeats or a
 * lease. Workers this Pi did not spawn, or kept, are left to the heartbeat and registration checks.
 */
import { afterEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { saveSpawned } from "../../src/host/spawned.ts";
import type { TaskCore } from "../../src/core/task-core.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import { createSpawnWatch } from "../../extensions/pi-tasks/spawn-watch.ts";

// Each test starts several processes.
setDefaultTimeout(15_000);
import { eventually } from "../../testkit/async.ts";
import { isAlive } from "../../src/platform/processes.ts";

const homes: string[] = [];
const children: ReturnType<typeof spawn>[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill("SIGKILL");
  for (const home of homes.splice(0)) rmSync(home, { recursive: true, force: true });
});

function worker(env: Record<string, string>, session: string, owner: number | undefined): { endpoint: TaskEndpoint; kill(): void } {
  const child = spawn("sleep", ["30"], { stdio: "ignore" });
  children.push(child);
  const endpoint = { relay: "wolfpack-pi-tasks-v2", id: crypto.randomUUID() };
  saveSpawned(env, {
    session,
    pid: child.pid!,
    projectDir: "/tmp",
    relay: "http://127.0.0.1:1",
    log: join(env.PI_TASKS_HOME!, `${session}.log`),
    createdAt: new Date().toISOString(),
    taskEndpoint: endpoint,
    ...(owner === undefined ? {} : { owner }),
  });
  return { endpoint, kill: () => child.kill("SIGKILL") };
}

describe("the spawn watch", () => {
  test("the worker this Pi spawned is reported gone once it exits; a kept one and another Pi's are not", async () => {
    const home = mkdtempSync(join(tmpdir(), "pi-tasks-spawn-watch-"));
    homes.push(home);
    const env = { PI_TASKS_HOME: home };
    const mine = worker(env, "mine", process.pid);
    const kept = worker(env, "kept", undefined);
    const theirs = worker(env, "theirs", process.pid + 1);
    const gone: TaskEndpoint[] = [];
    const core = { workerGone: (endpoint: TaskEndpoint) => gone.push(endpoint) } as unknown as TaskCore;
    const watch = createSpawnWatch(env, () => core);
    watch.check();
    watch.check();
    expect(gone).toEqual([]);
    const pids = children.map((child) => child.pid!);
    mine.kill();
    kept.kill();
    theirs.kill();
    // A budget for a loaded machine, not a bound: the processes are gone.
    expect(await eventually(() => pids.every((pid) => !isAlive(pid)), 10_000)).toBe(true);
    watch.check();
    expect(gone).toEqual([mine.endpoint]);
    watch.check();
    expect(gone).toEqual([mine.endpoint]);
  });
});

describe("the spawn watch with two spawned workers", () => {
  /** A pid no process holds (above any pid_max: Linux allows at most 2^22). */
  const NO_PROCESS = 2 ** 30;

  test("the one whose holder exits is reported gone, once; the other, still running, is not", () => {
    // Guards extensions/pi-tasks/spawn-watch.ts check(): only a known worker missing from the live
    // ones (by its session) is reported, with its own endpoint; ownLiveWorkers()' `isAlive(pid)`.
    const home = mkdtempSync(join(tmpdir(), "pi-tasks-spawn-watch-"));
    homes.push(home);
    const env = { PI_TASKS_HOME: home };
    // Two holders that run (this process and its parent), each with its own registered endpoint.
    const record = (session: string, pid: number) => ({
      session,
      pid,
      projectDir: "/tmp",
      relay: "http://127.0.0.1:1",
      log: join(home, `${session}.log`),
      createdAt: new Date(0).toISOString(),
      taskEndpoint: { relay: "wolfpack-pi-tasks-v2", id: crypto.randomUUID() },
      owner: process.pid,
    });
    const leaving = record("leaving", process.pid);
    const staying = record("staying", process.ppid);
    saveSpawned(env, leaving);
    saveSpawned(env, staying);
    const gone: TaskEndpoint[] = [];
    const core = { workerGone: (endpoint: TaskEndpoint) => gone.push(endpoint) } as unknown as TaskCore;
    const watch = createSpawnWatch(env, () => core);
    watch.check();
    watch.check();
    expect(gone).toEqual([]);
    // The first one's holder process exits.
    saveSpawned(env, { ...leaving, pid: NO_PROCESS });
    watch.check();
    expect(gone).toEqual([leaving.taskEndpoint]);
    watch.check();
    watch.check();
    expect(gone).toEqual([leaving.taskEndpoint]);
  });
});
