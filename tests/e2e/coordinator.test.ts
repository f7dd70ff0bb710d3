/**
 * A coordinator in the real Pi CLI reaches workers through its own tools, as the delegation skill
 * says: agent_task_spawn starts a worker Pi and returns its taskEndpoint, agent_task_send
 * delegates, the question is answered, the completion acknowledged, and agent_task_stop stops the
 * worker and confirms it is gone. No endpoint or shell command is handed to the model.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { listSpawned } from "../../src/host/spawned.ts";
import { isAlive } from "../../src/platform/processes.ts";
import { stopProcess } from "../../src/host/stop.ts";
import { DEMO_GREETING } from "../../src/demo/scenarios/demo-origin.ts";
import { expectNoProblems, field, toolCalls } from "../helpers/pi-kit.ts";
import { sessionEndpoint } from "../../testkit/session-control.ts";
import { type PiProcess, startPi } from "../helpers/pi-process.ts";
import { REPO_ROOT, type RelayProcess, startRelayProcess } from "../../testkit/relay-process.ts";
import { WORKER_NAME } from "./scripts/spawning-origin.ts";

setDefaultTimeout(60_000);

const ORIGIN_SCRIPT = join(REPO_ROOT, "tests", "e2e", "scripts", "spawning-origin.ts");
const WORKER_SCRIPT = join(REPO_ROOT, "src", "demo", "scenarios", "demo-worker.ts");

let relay: RelayProcess;
let home: string;
let origin: PiProcess;
let run: Promise<{ code: number; hello: string | undefined; workerGone: boolean; registeredAfterStop: boolean; spawnedRecords: number }>;

beforeAll(async () => {
  relay = await startRelayProcess();
  home = mkdtempSync(join(tmpdir(), "pi-tasks-home-"));
  origin = startPi({
    session: "coordinator",
    relayUrl: relay.url,
    script: ORIGIN_SCRIPT,
    env: { PI_TASKS_HOME: home, PI_TASKS_WORKER_SCRIPT: WORKER_SCRIPT },
  });
  run = (async () => {
    origin.prompt("Delegate the hello.txt task to a worker you start.");
    await origin.waitFor((record) => record.type === "tool_execution_end" && record.toolName === "agent_task_stop", 45_000);
    await origin.waitFor((record) => record.type === "agent_settled", 15_000, origin.records.length - 1).catch(() => undefined);
    const spawned = toolCalls(origin, "agent_task_spawn")[0]?.details as { pid?: number } | undefined;
    const hello = existsSync(join(origin.cwd, "hello.txt")) ? readFileSync(join(origin.cwd, "hello.txt"), "utf8") : undefined;
    const registeredAfterStop = (await sessionEndpoint(relay.url, WORKER_NAME)) !== undefined;
    const result = {
      hello,
      workerGone: spawned?.pid !== undefined && !isAlive(spawned.pid),
      registeredAfterStop,
      spawnedRecords: listSpawned({ PI_TASKS_HOME: home }).length,
    };
    return { ...result, code: await origin.stop() };
  })();
  run.catch(() => undefined);
});

afterAll(async () => {
  await origin?.stop();
  rmSync(home, { recursive: true, force: true });
  await relay?.stop();
});

describe("a coordinator reaches its worker through agent_task_spawn / agent_task_stop", () => {
  test("agent_task_spawn starts a task worker on this session's relay and returns its taskEndpoint", async () => {
    await run;
    const [spawn] = toolCalls(origin, "agent_task_spawn");
    expect(spawn!.isError).toBe(false);
    const endpoint = JSON.parse(field(spawn!.text, "taskEndpoint")!);
    expect(endpoint).toEqual(spawn!.details.taskEndpoint);
    expect(spawn!.details).toMatchObject({ ok: true, session: WORKER_NAME, relay: relay.url });
    const [send] = toolCalls(origin, "agent_task_send");
    expect(send!.isError).toBe(false);
    expect(send!.details.target).toEqual(endpoint);
  });

  test("the task runs end to end: question answered, completed, applied, acknowledged; the file is written", async () => {
    const { hello } = await run;
    expect(toolCalls(origin, "agent_task_message").map((call) => call.isError)).toEqual([false]);
    expect(toolCalls(origin, "agent_task_ack").map((call) => call.isError)).toEqual([false]);
    expect(hello?.trim()).toBe(DEMO_GREETING);
  });

  test("agent_task_stop stops the worker it spawned and confirms it: processes gone, unregistered, record removed", async () => {
    const { workerGone, registeredAfterStop, spawnedRecords, code } = await run;
    const [stop] = toolCalls(origin, "agent_task_stop");
    expect(stop!.isError).toBe(false);
    expect(stop!.text).toContain("confirmed gone: yes");
    // The worker wrote hello.txt in its own scratch copy (the project is not a git repository): kept, with how to discard it.
    expect(stop!.text).toContain("Its scratch copy");
    expect(stop!.text).toContain("is kept: it holds changes");
    expect(workerGone).toBe(true);
    expect(registeredAfterStop).toBe(false);
    expect(spawnedRecords).toBe(0);
    expect(code).toBe(0);
    expectNoProblems(origin, "coordinator");
  });
});

describe("workers stop with the Pi that spawned them, unless kept", () => {
  test("on quit the origin stops the workers it spawned; the one spawned with keep: true runs on; /tasks lists both with their lifetimes", async () => {
    const stopsWithPi = `stays-${crypto.randomUUID().slice(0, 6)}`;
    const kept = `kept-${crypto.randomUUID().slice(0, 6)}`;
    const lifetimeHome = mkdtempSync(join(tmpdir(), "pi-tasks-home-"));
    const env = { PI_TASKS_HOME: lifetimeHome };
    const pi = startPi({
      session: "spawner",
      relayUrl: relay.url,
      brain: (turn) =>
        turn.call === 1
          ? {
              tools: [
                { name: "agent_task_spawn", arguments: { name: stopsWithPi } },
                { name: "agent_task_spawn", arguments: { name: kept, keep: true } },
              ],
            }
          : { text: "spawned" },
      env: { ...env, PI_TASKS_WORKER_SCRIPT: WORKER_SCRIPT },
    });
    try {
      pi.prompt("Start two workers.");
      await pi.waitFor((record) => record.type === "agent_settled", 45_000);
      const spawns = toolCalls(pi, "agent_task_spawn");
      expect(spawns.map((call) => call.isError)).toEqual([false, false]);
      // The two spawns run in parallel: read them by name.
      const stops = Object.fromEntries(spawns.map((call) => [call.details.session as string, field(call.text, "stops")]));
      expect(stops).toEqual({
        [stopsWithPi]: "when this Pi exits",
        [kept]: "only by agent_task_stop (kept: it outlives this Pi)",
      });
      const from = pi.records.length;
      pi.prompt("/tasks");
      const board = String(
        (
          await pi.waitFor(
            (record) =>
              record.type === "extension_ui_request" && record.method === "notify" && String(record.message).startsWith("pi-tasks\n"),
            10_000,
            from,
          )
        ).message,
      );
      expect(board).toContain("workers spawned by pi-tasks (2):");
      expect(board).toMatch(new RegExp(`${stopsWithPi} — pid \\d+, stops when this Pi exits`));
      expect(board).toMatch(new RegExp(`${kept} — pid \\d+, kept: runs until stopped`));
      const holders = Object.fromEntries(listSpawned(env).map((worker) => [worker.session, worker.pid]));
      expect(await pi.stop()).toBe(0);
      // Quitting stopped the first (confirmed gone before Pi exited) and left the kept one running.
      expect(isAlive(holders[stopsWithPi]!)).toBe(false);
      expect(isAlive(holders[kept]!)).toBe(true);
    } finally {
      await pi.stop();
      await stopProcess(env, kept);
      await stopProcess(env, stopsWithPi);
      rmSync(lifetimeHome, { recursive: true, force: true });
    }
  });
});
