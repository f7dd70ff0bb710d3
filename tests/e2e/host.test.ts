/**
 * Pi's users' host (tests/helpers/host-kit.ts): Pi on Node ≥ 22.19 with the packed package installed
 * as Pi's installer installs it and no bun on PATH. Nothing pi-tasks starts may take Pi down: when
 * the JavaScript runtime for its relay is missing, cannot be executed, or crashes at once, Pi keeps
 * running, answers, and the footer says why there is no relay and what fixes it.
 */
import { afterEach, expect, setDefaultTimeout, test } from "bun:test";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../../testkit/relay-process.ts";
import { describeOnHosts } from "../helpers/host-kit.ts";
import { type PiProcess, type RpcRecord, startPi } from "../helpers/pi-process.ts";

setDefaultTimeout(60_000);

const started: PiProcess[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const pi of started.splice(0)) await pi.stop();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function scratch(): string {
  const dir = mkdtempSync(join(tmpdir(), "pi-tasks-runtime-"));
  dirs.push(dir);
  return dir;
}

/** Runtimes that cannot run the relay, each as a user could meet it. */
const BROKEN_RUNTIMES: readonly (readonly [string, () => string])[] = [
  ["missing", () => join(scratch(), "no-such-node")],
  [
    "not executable",
    () => {
      const path = join(scratch(), "node");
      writeFileSync(path, "#!/bin/sh\nexit 0\n");
      chmodSync(path, 0o644);
      return path;
    },
  ],
  [
    "crashing at once",
    () => {
      const path = join(scratch(), "node");
      writeFileSync(path, "#!/bin/sh\necho 'relay runtime crashed' >&2\nexit 3\n");
      chmodSync(path, 0o755);
      return path;
    },
  ],
];

const isStatus = (record: RpcRecord) =>
  record.type === "extension_ui_request" && record.method === "setStatus" && typeof record.statusText === "string";

describeOnHosts("nothing pi-tasks starts escapes into Pi", (host) => {
  test.each(BROKEN_RUNTIMES)("the relay's runtime is %s: Pi keeps running, answers, and the footer says why", async (_kind, runtime) => {
    const pi = startPi({
      host,
      brain: () => ({ text: "still here" }),
      env: { PI_TASKS_EMBEDDED_RELAY: undefined, WOLFPACK_PORT: String(freePort()), PI_TASKS_RUNTIME: runtime() },
    });
    started.push(pi);
    const footer = await pi.waitFor((record) => isStatus(record) && /^tasks: \S+ · no relay — /.test(String(record.statusText)), 20_000);
    expect(String(footer.statusText)).toMatch(/could not be started|ended at once/);
    // Pi still runs a turn and answers RPC.
    pi.prompt("hello");
    await pi.waitFor((record) => record.type === "agent_settled", 15_000);
    expect((await pi.rpc({ type: "get_state" })).success).toBe(true);
    expect(pi.problems()).toEqual([]);
    expect(pi.stderr()).not.toMatch(/uncaught|unhandled/i);
    expect(await pi.stop()).toBe(0);
  });
});
