/**
 * The pool of specialists (extensions/pi-tasks/specialists.ts, issue 39): a specialist this Pi
 * started for a send by name is stopped once it has been idle — no active task of this session — for
 * `specialistIdleMs`, not a moment before; a busy one never is, and busy again restarts its idle time;
 * workers this Pi did not start for a name (spawned, or another Pi's) are left alone. The workers
 * widget names the specialists kept warm, from the last sweep.
 */
import { afterEach, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { age } from "../../extensions/pi-tasks/describe.ts";
import { forgetSpecialist } from "../../extensions/pi-tasks/pool.ts";
import { sweepIdleSpecialists } from "../../extensions/pi-tasks/specialists.ts";
import { workerWidgetLines } from "../../extensions/pi-tasks/widget.ts";
import type { ToolDeps } from "../../extensions/pi-tasks/tools/shared.ts";
import type { TaskCore, TaskView } from "../../src/core/task-core.ts";
import { saveSpawned, type SpawnedWorker } from "../../src/host/spawned.ts";
import { specialistIdleMs } from "../../src/protocol/limits.ts";

const homes: string[] = [];
afterEach(() => {
  for (const home of homes.splice(0)) rmSync(home, { recursive: true, force: true });
});

const endpoint = (id: string) => ({ relay: "wolfpack-pi-tasks-v2", id });

function pool(busyIds: string[]) {
  const home = mkdtempSync(join(tmpdir(), "pi-tasks-pool-"));
  homes.push(home);
  const env = { PI_TASKS_HOME: home };
  const worker = (session: string, extra: Partial<SpawnedWorker>): SpawnedWorker => ({
    session,
    pid: process.pid,
    projectDir: home,
    relay: "http://127.0.0.1:9",
    log: join(home, `${session}.log`),
    createdAt: new Date().toISOString(),
    taskEndpoint: endpoint(session),
    spawner: process.pid,
    owner: process.pid,
    pooled: true,
    ...extra,
  });
  saveSpawned(env, worker("reviewer-busy", {}));
  saveSpawned(env, worker("reviewer-idle", {}));
  saveSpawned(env, worker("spawned-by-hand", { pooled: undefined }));
  saveSpawned(env, worker("another-pis", { spawner: process.pid + 1 }));
  const tasks = busyIds.map((id) => ({ role: "origin", status: "active", target: endpoint(id) }) as unknown as TaskView);
  const deps = {
    info: () => ({ env, relay: { url: "http://127.0.0.1:9" } }),
    current: () => ({ listTasks: () => tasks }) as unknown as TaskCore,
  } as unknown as ToolDeps;
  return { deps, tasks };
}

test(`an idle specialist stops after specialistIdleMs (${specialistIdleMs} ms), not before; a busy one and other workers never`, async () => {
  const { deps } = pool(["reviewer-busy"]);
  const idleSince = new Map<string, number>();
  const stopped: string[] = [];
  const stop = async (session: string) => void stopped.push(session);
  expect(await sweepIdleSpecialists(deps, idleSince, 1_000, stop)).toEqual([]);
  expect(await sweepIdleSpecialists(deps, idleSince, 1_000 + specialistIdleMs - 1, stop)).toEqual([]);
  expect(await sweepIdleSpecialists(deps, idleSince, 1_000 + specialistIdleMs, stop)).toEqual(["reviewer-idle"]);
  expect(stopped).toEqual(["reviewer-idle"]);
});

test("busy again restarts a specialist's idle time", async () => {
  const { deps, tasks } = pool([]);
  const idleSince = new Map<string, number>();
  const stop = async () => undefined;
  await sweepIdleSpecialists(deps, idleSince, 0, stop);
  tasks.push({ role: "origin", status: "active", target: endpoint("reviewer-idle") } as unknown as TaskView);
  await sweepIdleSpecialists(deps, idleSince, specialistIdleMs / 2, stop);
  tasks.pop();
  // The one idle all along goes; the one busy at half time is idle only since now.
  expect(await sweepIdleSpecialists(deps, idleSince, specialistIdleMs, stop)).toEqual(["reviewer-busy"]);
  expect(await sweepIdleSpecialists(deps, idleSince, 2 * specialistIdleMs - 1, stop)).toEqual([]);
  expect(await sweepIdleSpecialists(deps, idleSince, 2 * specialistIdleMs, stop)).toEqual(["reviewer-idle"]);
});

test("the widget names each specialist kept warm, busy or idle, from the last sweep; one stopped is gone from it", async () => {
  const { deps, tasks } = pool(["reviewer-busy"]);
  const idleSince = new Map<string, number>();
  await sweepIdleSpecialists(deps, idleSince, 0, async () => undefined);
  const shown = workerWidgetLines(tasks, 0);
  expect(shown).toEqual([
    `kept warm: reviewer-busy busy · reviewer-idle idle (each stops after ${age(specialistIdleMs)} idle; /tasks stop <session>)`,
  ]);
  await sweepIdleSpecialists(deps, idleSince, specialistIdleMs, async () => undefined);
  expect(workerWidgetLines(tasks, 0)[0]).toStartWith("kept warm: reviewer-busy busy (");
  forgetSpecialist("reviewer-busy");
  expect(workerWidgetLines(tasks, 0)).toEqual([]);
});
