/**
 * `pi-tasks spawn` when the worker never registers: `TASK_WORKER_NOT_READY` with the session it
 * created and a confirmed cleanup, and nothing left running. `PI_TASKS_PI_CLI` swaps Pi for a
 * stand-in script (started by the holder exactly as Pi would be: `bun <script> --mode rpc …`).
 */
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { maxWorkerReadinessTimeoutMs, minWorkerReadinessTimeoutMs } from "../../src/protocol/limits.ts";
import { type CliSandbox, createCliSandbox, jsonOf, running } from "../helpers/cli-kit.ts";
import { relaySessions } from "../../testkit/session-control.ts";

let sandbox: CliSandbox | undefined;

afterEach(async () => {
  await sandbox?.cleanup();
  sandbox = undefined;
});

/** Writes a stand-in "Pi" that appends its pid to `STANDIN_PIDS`, then runs `body`. */
function standIn(box: CliSandbox, file: string, body: string): { cli: string; pids: string } {
  const cli = join(box.dir, file);
  writeFileSync(
    cli,
    `import { appendFileSync } from "node:fs";\nappendFileSync(process.env.STANDIN_PIDS!, \`\${process.pid}\\n\`);\n${body}\n`,
  );
  return { cli, pids: join(box.dir, `${file}.pids`) };
}

function pidsIn(path: string): number[] {
  return existsSync(path) ? readFileSync(path, "utf8").split("\n").filter(Boolean).map(Number) : [];
}

describe("spawn: a worker that never registers", () => {
  test("a stand-in that keeps running (and ignores its RPC stdin and SIGTERM) is stopped and confirmed gone", async () => {
    const box = createCliSandbox();
    sandbox = box;
    const relay = await box.withRelay();
    // Like a hung Pi: never registers, does not exit when its stdin closes, ignores SIGTERM.
    const { cli, pids } = standIn(box, "hung-pi.ts", `process.on("SIGTERM", () => {});\nsetInterval(() => {}, 1_000);`);
    const name = `worker-${crypto.randomUUID().slice(0, 8)}`;
    // The holder writes the stand-in's pid beside the log; cleanup removes it, so catch it meanwhile.
    let recordedPiPid: number | undefined;
    const logs = join(box.stateDir, "logs");
    const run = await box.run(
      [
        "spawn",
        "--task-worker",
        "--name",
        name,
        "--project-dir",
        box.projectDir,
        "--relay",
        relay.url,
        "--readiness-timeout-ms",
        String(minWorkerReadinessTimeoutMs),
        "--json",
      ],
      {
        env: { PI_TASKS_PI_CLI: cli, STANDIN_PIDS: pids },
        whileRunning() {
          if (recordedPiPid !== undefined || !existsSync(logs)) return;
          const file = readdirSync(logs).find((entry) => entry.endsWith(".pi-pid"));
          const text = file === undefined ? "" : readFileSync(join(logs, file), "utf8").trim();
          if (text !== "") recordedPiPid = Number(text);
        },
      },
    );
    const out = jsonOf(run);
    expect(out).toMatchObject({
      ok: false,
      error: {
        code: "TASK_WORKER_NOT_READY",
        details: { createdSession: name, exited: false, cleanup: { attempted: true, confirmed: true } },
      },
    });
    expect(run.code).toBe(1);
    // It waited for the whole readiness timeout before giving up.
    expect(run.elapsedMs).toBeGreaterThanOrEqual(minWorkerReadinessTimeoutMs);

    const holderPid = out.error.details.pid as number;
    const [standInPid, ...others] = pidsIn(pids);
    expect(others).toEqual([]);
    expect(typeof standInPid).toBe("number");
    expect(recordedPiPid).toBe(standInPid!);
    expect(holderPid).not.toBe(standInPid!);
    // Everything it started is gone: holder, stand-in, any other process of this test.
    expect(running(holderPid)).toBe(false);
    expect(running(standInPid!)).toBe(false);
    expect(box.processes()).toEqual([]);
    expect(box.spawnedRecords()).toEqual([]);
    expect(existsSync(`${out.error.details.log}.pi-pid`)).toBe(false);
    expect((await relaySessions(relay.url)).map((entry) => entry.session)).toEqual([]);
    // The name is free again: the next spawn of it is not refused as "already running".
    const again = await box.run(
      [
        "spawn",
        "--task-worker",
        "--name",
        name,
        "--project-dir",
        box.projectDir,
        "--relay",
        relay.url,
        "--readiness-timeout-ms",
        String(minWorkerReadinessTimeoutMs),
        "--json",
      ],
      { env: { PI_TASKS_PI_CLI: standIn(box, "exits.ts", "process.exit(0);").cli, STANDIN_PIDS: pids } },
    );
    expect(jsonOf(again).error).toMatchObject({ code: "TASK_WORKER_NOT_READY", details: { createdSession: name, exited: true } });
    expect(box.processes()).toEqual([]);
  }, 30_000);

  test("a stand-in that exits at once is reported as exited, without waiting out the readiness timeout", async () => {
    const box = createCliSandbox();
    sandbox = box;
    const relay = await box.withRelay();
    const { cli, pids } = standIn(box, "crashing-pi.ts", `console.error("stand-in: no model configured");\nprocess.exit(3);`);
    const name = `worker-${crypto.randomUUID().slice(0, 8)}`;
    const run = await box.run(
      [
        "spawn",
        "--task-worker",
        "--name",
        name,
        "--project-dir",
        box.projectDir,
        "--relay",
        relay.url,
        // Ten minutes: far longer than the run may take (it is killed first), so only noticing the
        // exit can end it.
        "--readiness-timeout-ms",
        String(maxWorkerReadinessTimeoutMs),
        "--json",
      ],
      { env: { PI_TASKS_PI_CLI: cli, STANDIN_PIDS: pids } },
    );
    const out = jsonOf(run);
    expect(out).toMatchObject({
      ok: false,
      error: {
        code: "TASK_WORKER_NOT_READY",
        details: { createdSession: name, exited: true, cleanup: { attempted: true, confirmed: true } },
      },
    });
    expect(run.code).toBe(1);
    // The log kept what the stand-in said before it died, and the error quotes its end: the cause
    // is where the person sees the failure, not only in the log.
    expect(readFileSync(out.error.details.log, "utf8")).toContain("stand-in: no model configured");
    expect(out.error.message).toStartWith(
      `The worker exited before it registered its endpoint. Its log (${out.error.details.log}) ends:\n`,
    );
    expect(out.error.message).toContain("stand-in: no model configured");
    const [standInPid] = pidsIn(pids);
    expect(typeof standInPid).toBe("number");
    expect(running(standInPid!)).toBe(false);
    expect(running(out.error.details.pid)).toBe(false);
    expect(box.processes()).toEqual([]);
    expect(box.spawnedRecords()).toEqual([]);
    expect((await relaySessions(relay.url)).map((entry) => entry.session)).toEqual([]);
  }, 60_000);
});
