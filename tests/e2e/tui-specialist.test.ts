/**
 * A specialist at work, steered, then kept warm — in the real interactive Pi 1.6 TUI, on each host
 * (Pi on Bun, and Pi on Node from a production install; issue 39). The origin's model delegates to
 * the built-in `scout` by name (no spawn of its own); the scout's model runs a real `bash sleep`.
 * While it runs, the workers widget above the editor shows the scout running bash with its command,
 * the pool line shows it kept warm and busy, and the footer counts it as running. The person asks
 * the origin to steer it: the steer reaches the scout's model inside its running turn (its report
 * says it was steered). Once the task is done the activity line goes and the scout stays, idle,
 * on the pool line, until the person stops it with `/tasks stop`.
 */
import { expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { embeddedRelayRecord } from "../../src/host/embedded-relay.ts";
import { stopPids } from "../../src/host/stop.ts";
import { freePort, REPO_ROOT } from "../../testkit/relay-process.ts";
import { describeOnHosts } from "../helpers/host-kit.ts";
import { describeWithTmux, footerOf, startInstalledTui, type Tui } from "../helpers/tui-kit.ts";
import { SLEEP_COMMAND } from "./scripts/sleepy-worker.ts";
import { DONE } from "./scripts/specialist-origin.ts";

setDefaultTimeout(90_000);

const ORIGIN_SCRIPT = join(REPO_ROOT, "tests", "e2e", "scripts", "specialist-origin.ts");
const WORKER_SCRIPT = join(REPO_ROOT, "tests", "e2e", "scripts", "sleepy-worker.ts");
/** The widget's line for the scout while its model runs the sleep. */
const WIDGET_LINE = new RegExp(
  `\`scout-[0-9a-z]{4}\` \\(your own session\\) · task [0-9a-f]{8}: running bash "${SLEEP_COMMAND}" for \\d+s · \\d+ turns? · [\\d,]+ tokens · heard \\d+s ago`,
);
const pooled = (state: "busy" | "idle") => new RegExp(`kept warm: (scout-[0-9a-z]{4}) ${state} \\(each stops after 10m idle`);

describeWithTmux("a specialist in the interactive TUI", () => {
  describeOnHosts("delegated by name, steered, kept warm", (host) => {
    test("the widget shows the scout at work and kept warm; a steer reaches it mid-turn; /tasks stop ends the pool", async () => {
      const port = freePort();
      let tui: Tui | undefined;
      let relayPid: number | undefined;
      try {
        tui = await startInstalledTui({ host, port, script: ORIGIN_SCRIPT, workerScript: WORKER_SCRIPT });
        await tui.waitForScreen((screen) => footerOf(screen).some((line) => / · idle$/.test(line)), 15_000);
        relayPid = embeddedRelayRecord({ PI_TASKS_HOME: join(tui.agentDir, "pi-tasks") }, port)?.pid;
        await tui.submit("Delegate the sleep to the scout.");
        const working = await tui.waitForScreen((screen) => WIDGET_LINE.test(screen) && pooled("busy").test(screen), 30_000);
        expect(footerOf(working).some((line) => / · 1 active · 1 running$/.test(line))).toBe(true);
        const scout = working.match(pooled("busy"))![1]!;
        // While the scout's command runs: the person has the origin steer it.
        await tui.submit("Steer it: keep the output short.");
        const done = await tui.waitForScreen((screen) => screen.includes(DONE), 40_000);
        expect(await tui.scrollback()).toContain("slept as asked, steered");
        // Done: no activity line; the scout stays warm, idle.
        const idle = await tui.waitForScreen(
          (screen) => !/running bash/.test(screen.split(DONE).at(-1) ?? "") && pooled("idle").test(screen),
          10_000,
        );
        expect(idle.match(pooled("idle"))![1]).toBe(scout);
        expect(done).toContain(DONE);
        await tui.submit(`/tasks stop ${scout}`);
        await tui.waitForScreen((screen) => screen.includes(`pi-tasks: stopped ${scout}`) && !/kept warm:/.test(screen), 15_000);
        expect(await tui.scrollback()).not.toMatch(/uncaught|unhandled|ENOENT/i);
        expect(await tui.stop()).toBe(0);
      } finally {
        await tui?.stop();
        if (relayPid !== undefined) await stopPids([relayPid]);
      }
    });
  });
});
