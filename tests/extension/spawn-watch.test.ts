/**
 * A worker this Pi spawned is known gone when its process exits (extensions/pi-tasks/spawn-watch.ts):
 * its tasks are orphaned at once, not after heartbeats or a lease. Workers this Pi did not spawn,
 * or kept, are left to the heartbeat and registration checks.
 */
import { afterEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { saveSpawned } from "../../src/cli/spawned.ts";
import type { TaskCore } from "../../src/core/task-core.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import { workerOwnerPollMs } from "../../src/protocol/limits.ts";
import { createSpawnWatch } from "../../extensions/pi-tasks/spawn-watch.ts";

// Each test starts several processes.
setDefaultTimeout(15_000);
import { eventually } from "../../kit/async.ts";

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
    watch.start();
    try {
      await Bun.sleep(workerOwnerPollMs * 1.5);
      expect(gone).toEqual([]);
      mine.kill();
      kept.kill();
      theirs.kill();
      // A budget for a loaded machine (the watch polls every workerOwnerPollMs), not a bound.
      expect(await eventually(() => gone.length > 0, workerOwnerPollMs * 15)).toBe(true);
      await Bun.sleep(workerOwnerPollMs * 1.5);
      expect(gone).toEqual([mine.endpoint]);
    } finally {
      watch.stop();
    }
  });
});
