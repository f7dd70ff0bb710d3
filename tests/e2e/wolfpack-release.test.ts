/**
 * Beside the released Wolfpack (issue 38), in the real Pi 1.6 CLI (`--mode rpc`) on each host. The
 * registry's Wolfpack 1.6.22 (testkit/wolfpack-release.ts: a private HOME, loopback, no service)
 * serves only its older v2 task relay on `WOLFPACK_PORT` — the port a zero-config Pi uses. Before,
 * such a Pi showed `malformed (INVALID_RESPONSE) on profile` forever and could delegate nothing.
 *
 * - Zero config: two Pis of one user (no `PI_TASKS_RELAY_URL`) find the same relay of their own
 *   beside Wolfpack (the first of the fallback ports), and delegate a task end to end while Wolfpack
 *   keeps running; `/tasks` names what holds the default port, and where the relay runs instead.
 * - A Pi that may not run a relay (`PI_TASKS_EMBEDDED_RELAY=0`) names what answers on its footer:
 *   Wolfpack, its version, its v2 task relay — never `INVALID_RESPONSE`; so does `pi-tasks conformance`.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually } from "../../testkit/async.ts";
import { freePort, REPO_ROOT } from "../../testkit/relay-process.ts";
import { bunPath, CLI_ENTRY } from "../../src/host/pi-cli.ts";
import { startWolfpackRelease, WOLFPACK_RELEASE, type WolfpackRelease, wolfpackMissing } from "../../testkit/wolfpack-release.ts";
import { embeddedRelayRecord } from "../../src/host/embedded-relay.ts";
import { relayTransport } from "../../src/host/spawn.ts";
import { stopPids } from "../../src/host/stop.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import { fallbackPortsOf } from "../../src/relay-client/config.ts";
import { describeOnHosts } from "../helpers/host-kit.ts";
import { describeWithTmux, footerOf, type ScriptReply, type ScriptTurn, startInstalledTui, type Tui } from "../helpers/tui-kit.ts";
import { DEMO_GREETING } from "../../src/demo/scenarios/demo-origin.ts";
import { called, EVENT_MESSAGE, field, isCustom, lastSeen, nextBoard, sendThenAckBrain, statusTexts, stopAll } from "../helpers/pi-kit.ts";
import { type PiProcess, type RpcRecord, startPi } from "../helpers/pi-process.ts";

setDefaultTimeout(120_000);

const ORIGIN_SCRIPT = join(REPO_ROOT, "tests", "e2e", "scripts", "spawning-origin.ts");
const WORKER_SCRIPT = join(REPO_ROOT, "src", "demo", "scenarios", "demo-worker.ts");

const isEvent = (title: string) => (record: RpcRecord) =>
  isCustom(record, EVENT_MESSAGE) && String((record.message as { content?: unknown }).content).startsWith(title);

/** A worker that completes its assignment at once. */
function completingWorker(turn: ScriptTurn): ScriptReply {
  const taskId = field(lastSeen(turn, "## task assignment"), "taskId");
  if (taskId === undefined) return { text: "nothing assigned" };
  if (!called(turn, "agent_task_done"))
    return { tools: [{ name: "agent_task_done", arguments: { taskId, status: "completed", summary: "banner painted teal" } }] };
  return { text: "finished" };
}

function describeWithWolfpack(label: string, body: () => void): void {
  const missing = wolfpackMissing();
  if (missing === undefined) describe(label, body);
  else if (process.env.PI_TASKS_CI === "1")
    describe(label, () => {
      test("the released Wolfpack can run here (PI_TASKS_CI=1)", () => {
        throw new Error(missing);
      });
    });
  else {
    console.warn(`skip: ${label}: ${missing}`);
    describe.skip(label, body);
  }
}

let wolfpack: WolfpackRelease;
const pis: PiProcess[] = [];
const homes: string[] = [];
/** One user: the relay secrets of every Pi of this file (its relay beside Wolfpack is one for all of them). */
const secrets = mkdtempSync(join(tmpdir(), "pi-tasks-beside-secrets-"));
beforeAll(async () => {
  if (wolfpackMissing() === undefined) wolfpack = await startWolfpackRelease(freePort());
});
afterAll(async () => {
  await stopAll(pis);
  for (const home of homes) {
    // The relays pi-tasks started beside Wolfpack (they outlive the Pis that started them).
    for (const port of fallbackPortsOf(wolfpack?.port ?? 0)) {
      const record = embeddedRelayRecord({ PI_TASKS_HOME: home, PI_TASKS_RELAY_SECRET_DIR: secrets }, port);
      if (record !== undefined) await stopPids([record.pid]);
    }
    rmSync(home, { recursive: true, force: true });
  }
  rmSync(secrets, { recursive: true, force: true });
  await wolfpack?.stop();
});

/** The worker's endpoint once it registered on the user's relay (asked with the user's relay token, as a Pi asks). */
async function registered(url: string, session: string): Promise<TaskEndpoint | undefined> {
  const transport = relayTransport(url, {
    WOLFPACK_PORT: String(wolfpack.port),
    PI_TASKS_RELAY_URL: url,
    PI_TASKS_RELAY_SECRET_DIR: secrets,
    WOLFPACK_JWT_SECRET: "",
  });
  try {
    return await eventually(async () => (await transport.sessionStatus(session).catch(() => undefined))?.taskEndpoint, 30_000, 100);
  } finally {
    transport.close();
  }
}

/** Where the user's relay runs beside Wolfpack: the fallback port whose record a Pi of `home` wrote. */
async function besideUrl(home: string): Promise<string | undefined> {
  return eventually(
    () => {
      const env = { PI_TASKS_HOME: home, PI_TASKS_RELAY_SECRET_DIR: secrets };
      const port = fallbackPortsOf(wolfpack.port).find(
        (next) => existsSync(join(secrets, `${next}.secret`)) && embeddedRelayRecord(env, next) !== undefined,
      );
      return port === undefined ? undefined : `http://127.0.0.1:${port}`;
    },
    30_000,
    100,
  );
}

describeWithWolfpack(`beside the released Wolfpack ${WOLFPACK_RELEASE}`, () => {
  describeOnHosts("zero configuration", (host) => {
    test("two Pis find one relay of their own beside it and delegate end to end; /tasks says what holds the port", async () => {
      const home = mkdtempSync(join(tmpdir(), "pi-tasks-beside-wolfpack-"));
      homes.push(home);
      // Zero configuration as a user has it: pi-tasks may start the relay (test Pis may not, by default).
      const env = {
        WOLFPACK_PORT: String(wolfpack.port),
        PI_TASKS_EMBEDDED_RELAY: "1",
        PI_TASKS_RELAY_SECRET_DIR: secrets,
      };
      const worker = startPi({ host, home, env, session: `beside-worker-${host}`, worker: true, brain: completingWorker });
      pis.push(worker);
      // The first host's Pis started it; the second host's find it running (one user, one relay).
      const url = await besideUrl(host === "bun" ? home : homes[0]!);
      // The first fallback port that was free (another program may hold the very next one).
      expect(fallbackPortsOf(wolfpack.port).map((port) => `http://127.0.0.1:${port}`)).toContain(url!);
      const to = await registered(url!, `beside-worker-${host}`);
      const origin = startPi({ host, home, env, session: `beside-origin-${host}`, brain: sendThenAckBrain(to, "Paint the banner.") });
      pis.push(origin);
      origin.prompt("Delegate the banner.");
      const completed = await origin.waitFor(isEvent("## task completed"), 60_000);
      expect(String((completed.message as { content?: unknown }).content)).toContain("banner painted teal");
      // Wolfpack kept running all along.
      expect((await fetch(`${wolfpack.url}/api/health`)).ok).toBe(true);
      const from = origin.records.length;
      origin.prompt("/tasks");
      const board = await nextBoard(origin, from);
      expect(board).toContain(
        `  beside port ${wolfpack.port}: Wolfpack ${WOLFPACK_RELEASE} with only its older v2 task relay (not volatile-v1, which pi-tasks speaks) answers there: your own relay runs on ${url} instead (every Pi of yours finds it there)`,
      );
      expect(statusTexts(origin).some((text) => text?.includes("INVALID_RESPONSE"))).toBe(false);
    });
  });

  test("`pi-tasks conformance` against it says what answers (RELAY_NOT_VOLATILE), not INVALID_RESPONSE, and checks nothing", async () => {
    const run = Bun.spawn([bunPath(), CLI_ENTRY, "conformance", wolfpack.url], { cwd: REPO_ROOT, stdout: "pipe", stderr: "pipe" });
    const [stdout, stderr, status] = await Promise.all([new Response(run.stdout).text(), new Response(run.stderr).text(), run.exited]);
    expect(status).not.toBe(0);
    const said = `${stdout}${stderr}`;
    expect(said).toContain("RELAY_NOT_VOLATILE");
    expect(said).toContain(`Wolfpack ${WOLFPACK_RELEASE} with only its older v2 task relay`);
    expect(said).toContain("nothing was checked");
    expect(said).not.toContain("INVALID_RESPONSE");
  });

  describeWithTmux("in the interactive TUI, installed with pi install, zero configuration", () => {
    describeOnHosts("a new user beside Wolfpack", (host) => {
      test("the footer is healthy, a worker it spawns does the task, and /tasks says where the relay runs", async () => {
        let tui: Tui | undefined;
        let relayPid: number | undefined;
        try {
          tui = await startInstalledTui({ host, port: wolfpack.port, script: ORIGIN_SCRIPT, workerScript: WORKER_SCRIPT });
          const home = join(tui.agentDir, "pi-tasks");
          await tui.waitForScreen((screen) => footerOf(screen).some((line) => /^tasks: project-[0-9a-z]{6} · idle$/.test(line)), 30_000);
          relayPid = fallbackPortsOf(wolfpack.port)
            .map((port) => embeddedRelayRecord({ PI_TASKS_HOME: home }, port)?.pid)
            .find((pid) => pid !== undefined);
          await tui.submit("Delegate the hello.txt task to a worker you start.");
          await tui.waitForScreen((screen) => screen.includes("Delegated, verified, acknowledged and cleaned up."), 60_000);
          expect(await Bun.file(join(tui.cwd, "hello.txt")).text()).toBe(`${DEMO_GREETING}\n`);
          await tui.submit("/tasks");
          const board = await tui.waitForScreen(
            (screen) => screen.includes(`beside port ${wolfpack.port}: Wolfpack ${WOLFPACK_RELEASE}`),
            10_000,
          );
          expect(board.replace(/\s+/g, " ")).toMatch(/your own relay runs on http:\/\/127\.0\.0\.1:\d+ instead/);
          expect(await tui.scrollback()).not.toContain("INVALID_RESPONSE");
        } finally {
          await tui?.stop();
          if (relayPid !== undefined) await stopPids([relayPid]);
        }
      });
    });
  });

  describeOnHosts("a Pi that may not run a relay", (host) => {
    test("its footer names what answers: Wolfpack, its version, its v2 task relay — never INVALID_RESPONSE", async () => {
      const home = mkdtempSync(join(tmpdir(), "pi-tasks-beside-wolfpack-"));
      homes.push(home);
      const pi = startPi({
        host,
        home,
        env: { WOLFPACK_PORT: String(wolfpack.port), PI_TASKS_EMBEDDED_RELAY: "0" },
        session: `no-relay-${host}`,
        brain: () => ({ text: "ok" }),
      });
      pis.push(pi);
      const named = await eventually(
        () => statusTexts(pi).find((text) => text?.includes(`Wolfpack ${WOLFPACK_RELEASE} with only its older v2 task relay`)),
        30_000,
        100,
      );
      expect(named).toBe(
        `tasks: no-relay-${host} · no volatile-v1 relay at ${wolfpack.url}: Wolfpack ${WOLFPACK_RELEASE} with only its older v2 task relay (not volatile-v1, which pi-tasks speaks) answers there. Fix: allow pi-tasks to run your relay beside it (unset PI_TASKS_EMBEDDED_RELAY=0), or set PI_TASKS_RELAY_URL`,
      );
      expect(statusTexts(pi).some((text) => text?.includes("INVALID_RESPONSE"))).toBe(false);
    });
  });
});
