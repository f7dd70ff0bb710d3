/**
 * `pi-tasks spawn --task-worker`: a real scripted Pi worker becomes ready and outlives the
 * command; status/list show it; its log holds Pi's RPC output once it works on a task.
 */
import { homeTrust } from "../../src/core/home-trust.ts";
import { rpcLogFile } from "../../src/host/spawned.ts";
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { closeParties, createParty, type Party } from "../../testkit/party.ts";
import { type CliSandbox, createCliSandbox, DEMO_WORKER_SCRIPT, jsonOf, markedProcesses, running } from "../helpers/cli-kit.ts";
import { eventually } from "../../testkit/async.ts";
import { relaySessionStatus } from "../../testkit/session-control.ts";
import { RELAY_ID } from "../../src/protocol/names.ts";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

let sandbox: CliSandbox | undefined;
let origin: Party | undefined;

afterEach(async () => {
  if (origin !== undefined) await closeParties([origin]);
  origin = undefined;
  await sandbox?.cleanup();
  sandbox = undefined;
});

type LogRecord = { type?: string; message?: { role?: string; customType?: string; content?: unknown } };

function logRecords(path: string): LogRecord[] {
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((line) => line.trim().startsWith("{"))
    .flatMap((line) => {
      try {
        return [JSON.parse(line) as LogRecord];
      } catch {
        return [];
      }
    });
}

function calledTool(record: LogRecord, tool: string): boolean {
  const content = record.message?.role === "assistant" ? record.message.content : undefined;
  return (
    Array.isArray(content) && content.some((part: { type?: string; name?: string }) => part?.type === "toolCall" && part.name === tool)
  );
}

describe("pi-tasks spawn --task-worker", () => {
  test("a scripted worker becomes ready, outlives the command, is listed, and logs a readable transcript beside Pi's RPC output", async () => {
    sandbox = createCliSandbox();
    const relay = await sandbox.withRelay();
    const name = `worker-${crypto.randomUUID().slice(0, 8)}`;
    const spawned = await sandbox.run([
      "spawn",
      "--task-worker",
      "--name",
      name,
      "--project-dir",
      sandbox.projectDir,
      "--relay",
      relay.url,
      "--script",
      DEMO_WORKER_SCRIPT,
      "--json",
    ]);
    expect(spawned.stderr).toBe("");
    expect(spawned.code).toBe(0);
    const out = jsonOf(spawned);
    expect(out).toEqual({
      ok: true,
      session: name,
      pid: expect.any(Number),
      taskEndpoint: { relay: RELAY_ID, id: expect.stringMatching(UUID) },
      log: expect.any(String),
      relay: relay.url,
      projectDir: sandbox.projectDir,
    });

    // The command has exited; the holder and its Pi live on, both started by this test.
    expect(running(out.pid)).toBe(true);
    const piPid = Number(readFileSync(`${out.log}.pi-pid`, "utf8").trim());
    expect(running(piPid)).toBe(true);
    const processes = markedProcesses(sandbox.marker);
    const holderArgs = processes.find((entry) => entry.pid === out.pid)?.args ?? "";
    expect(holderArgs).toContain("dist/worker-host.js");
    // The holder's command line (visible to every local user) carries no environment: no marker, no secret.
    expect(holderArgs).not.toContain(sandbox.marker);
    expect(holderArgs).not.toContain("PI_TASKS_RELAY_URL");
    const pi = processes.find((entry) => entry.pid === piPid);
    expect(pi?.args).toContain("pi-coding-agent");
    expect(pi?.args).toContain("--mode rpc");
    expect(pi?.cwd).toBe(sandbox.projectDir);
    // Its session is kept apart from the person's (who works in the same folder): under the pi-tasks home.
    const sessions = join(sandbox.stateDir, "sessions", name);
    expect(pi?.args).toContain(`--session-dir ${sessions}`);
    expect(pi?.args).not.toContain("--no-session");
    expect(processes.map((entry) => entry.pid).sort()).toEqual([out.pid, piPid].sort());

    // The relay knows the same endpoint; the record and the log live under the state dir.
    const status = await relaySessionStatus(relay.url, name);
    expect(status.status).toBe(200);
    expect(status.body.taskEndpoint).toEqual(out.taskEndpoint);
    expect(dirname(out.log)).toBe(`${sandbox.stateDir}/logs`);
    expect(existsSync(out.log)).toBe(true);
    expect(sandbox.spawnedRecords()).toEqual([`${name}.json`]);

    const statusRun = await sandbox.run(["status", name, "--relay", relay.url, "--json"]);
    expect(statusRun.code).toBe(0);
    expect(jsonOf(statusRun)).toMatchObject({
      ok: true,
      session: name,
      taskEndpoint: out.taskEndpoint,
      taskTransport: { profile: "volatile-v1", epoch: relay.epoch, endpoint: out.taskEndpoint },
      spawned: { pid: out.pid, alive: true, log: out.log },
    });

    // `list` finds the relay through PI_TASKS_RELAY_URL.
    const listRun = await sandbox.run(["list", "--json"], { env: { PI_TASKS_RELAY_URL: relay.url } });
    expect(listRun.code).toBe(0);
    const list = jsonOf(listRun);
    expect(list.ok).toBe(true);
    expect(list.sessions).toEqual([expect.objectContaining({ session: name, taskEndpoint: out.taskEndpoint })]);
    expect(list.spawned).toEqual([{ session: name, pid: out.pid, alive: true, log: out.log }]);

    // Give the worker a task: its Pi wakes, records the assignment and asks its question; all of
    // that is Pi's RPC output, which only the log file carries.
    // The same user: the origin signs with the identity of the worker's PI_TASKS_HOME.
    origin = await createParty({ url: relay.url, trust: homeTrust(sandbox.stateDir) });
    const created = await origin.core.createTask({ to: out.taskEndpoint, task: "Create hello.txt with the greeting I give you." });
    expect(created.target).toEqual(out.taskEndpoint);
    // The worker proves its key (it answers the origin's hello); the origin's next pass sends the task.
    const sent = await eventually(
      async () => {
        await origin!.core.refresh();
        return origin!.core.getTask(created.taskId).deliveryEvidence.relayAcceptance === "accepted";
      },
      15_000,
      50,
    );
    expect(sent).toBe(true);
    const logged = await eventually(
      () => {
        const records = logRecords(rpcLogFile(out.log));
        return (
          records.some(
            (record) =>
              record.type === "message_end" && record.message?.role === "custom" && record.message.customType === "pi-tasks-event",
          ) && records.some((record) => record.type === "message_end" && calledTool(record, "agent_task_message"))
        );
      },
      15_000,
      50,
    );
    if (!logged)
      throw new Error(
        `the worker's RPC log never showed the task and the question:\n${readFileSync(rpcLogFile(out.log), "utf8").slice(-4_000)}`,
      );
    // The log a person reads is a transcript: what arrived, which tool the model called, no JSON.
    const transcript = readFileSync(out.log, "utf8");
    expect(transcript).toMatch(/^\d\d:\d\d:\d\d \[pi-tasks-event\] ## task assignment/m);
    expect(transcript).toMatch(/^\d\d:\d\d:\d\d → agent_task_message \{"taskId":/m);
    expect(transcript.split("\n").filter((line) => line.startsWith("{"))).toEqual([]);
    // What the worker did is in its own session file, never in the project's sessions.
    expect(readdirSync(sessions).filter((file) => file.endsWith(".jsonl"))).toHaveLength(1);
    // The worker is still the same process pair.
    expect(running(out.pid)).toBe(true);
    expect(running(piPid)).toBe(true);
  }, 40_000);
});
