/**
 * The embedded relay as two real Pis of one user share it (issue 40: "`/tasks relay stop` leaves
 * the other Pis retrying until a new Pi starts one"):
 *
 * 1. The relay a Pi started is killed (a crash): exactly one of the Pis starts it again and says
 *    so, and both footers are healthy again (extensions/pi-tasks/relay-revival.ts).
 * 2. `/tasks relay stop` in Pi A: both Pis leave it stopped, each footer naming the stop and
 *    `/tasks relay start` (`RELAY_STOPPED`) instead of "relay unreachable; retrying".
 * 3. `/tasks relay start` in Pi B starts it; both footers are healthy again.
 */
import { expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { embeddedRelayRecord, relayStopMark } from "../../src/host/embedded-relay.ts";
import { stopPids } from "../../src/host/stop.ts";
import { isAlive } from "../../src/platform/processes.ts";
import { eventually } from "../../testkit/async.ts";
import { freePort } from "../../testkit/relay-process.ts";
import { describeOnHosts } from "../helpers/host-kit.ts";
import { isHealthyStatus, statusTexts, usePiFixture } from "../helpers/pi-kit.ts";
import type { PiProcess } from "../helpers/pi-process.ts";

setDefaultTimeout(120_000);

/** How long a Pi may take to notice the relay went away and act (its passes back off; a loaded machine). */
const NOTICE_MS = 45_000;

const fx = usePiFixture();

/** Runs `/tasks …` in `pi` and answers what it showed. */
async function tasks(pi: PiProcess, line: string): Promise<string> {
  const from = pi.records.length;
  pi.prompt(line);
  const shown = await pi.waitFor((record) => record.type === "extension_ui_request" && record.method === "notify", 20_000, from);
  return String(shown.message);
}

const lastStatus = (pi: PiProcess) => statusTexts(pi).at(-1);
const restarted = (pi: PiProcess) =>
  pi.uiRequests("notify").filter((record) => String(record.message).includes("had gone away; this Pi started it again"));

describeOnHosts("the embedded relay shared by two Pis", (host) => {
  test("a killed relay is started again by one Pi; /tasks relay stop leaves it stopped in every Pi, saying so, until /tasks relay start", async () => {
    const port = freePort();
    const home = mkdtempSync(join(tmpdir(), "pi-tasks-revival-"));
    const env = {
      WOLFPACK_PORT: String(port),
      PI_TASKS_EMBEDDED_RELAY: "1",
      PI_TASKS_RELAY_SECRET_DIR: join(home, "relay-secrets"),
    };
    const record = () => embeddedRelayRecord({ PI_TASKS_HOME: home }, port);
    fx.defer(async () => {
      const pid = record()?.pid;
      if (pid !== undefined) await stopPids([pid]);
      rmSync(home, { recursive: true, force: true });
    });
    const [a, b] = ["a", "b"].map((name) =>
      fx.pi({ host, home, session: `revival-${name}-${host}`, relayUrl: undefined, env, brain: () => ({ text: "ok" }) }),
    ) as [PiProcess, PiProcess];
    for (const pi of [a, b]) expect(await eventually(() => isHealthyStatus(lastStatus(pi)), NOTICE_MS)).toBe(true);
    const first = record()!;
    expect(isAlive(first.pid)).toBe(true);

    // 1. A crash: one Pi starts it again (the start lock), and says so; both are healthy again.
    process.kill(first.pid, "SIGKILL");
    expect(await eventually(() => restarted(a).length + restarted(b).length > 0, NOTICE_MS)).toBe(true);
    const second = record()!;
    expect(second.pid).not.toBe(first.pid);
    for (const pi of [a, b]) expect(await eventually(() => isHealthyStatus(lastStatus(pi)), NOTICE_MS)).toBe(true);
    expect(restarted(a).length + restarted(b).length).toBe(1);

    // 2. The person stops it in Pi A: both Pis leave it stopped and say why, with the way back.
    expect(await tasks(a, "/tasks relay stop")).toContain(`stopped the relay on port ${port} (pid ${second.pid})`);
    expect(relayStopMark({ PI_TASKS_HOME: home }, port)).toBeDefined();
    const stoppedWords = `relay on port ${port} stopped by you (/tasks relay stop at `;
    for (const pi of [a, b]) {
      expect(await eventually(() => lastStatus(pi)?.includes(stoppedWords) === true, NOTICE_MS)).toBe(true);
      expect(lastStatus(pi)).toEndWith(") — /tasks relay start starts it again");
    }
    expect(record()).toBeUndefined();
    expect(await tasks(b, "/tasks relay")).toContain("/tasks relay start starts it again");

    // 3. Pi B starts it: the mark is gone and both footers are healthy again.
    expect(await tasks(b, "/tasks relay start")).toMatch(
      new RegExp(`^pi-tasks: started the relay at http://127\\.0\\.0\\.1:${port} \\(pid \\d+`),
    );
    expect(relayStopMark({ PI_TASKS_HOME: home }, port)).toBeUndefined();
    for (const pi of [a, b]) expect(await eventually(() => isHealthyStatus(lastStatus(pi)), NOTICE_MS)).toBe(true);
    expect(restarted(a).length + restarted(b).length).toBe(1);
  });
});
