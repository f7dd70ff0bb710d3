/**
 * Worker activity in the real interactive Pi 1.6 TUI, on each host (Pi on Bun, and Pi on Node from
 * a production install): the origin's model spawns a worker whose model runs a real `bash sleep`;
 * while it runs, the workers widget above the editor shows the worker running bash with its
 * command, and the footer counts it as running; once the task is done the widget is gone.
 */
import { expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { embeddedRelayRecord } from "../../src/host/embedded-relay.ts";
import { stopPids } from "../../src/host/stop.ts";
import { freePort, REPO_ROOT } from "../../testkit/relay-process.ts";
import { describeOnHosts } from "../helpers/host-kit.ts";
import { describeWithTmux, footerOf, startInstalledTui, type Tui } from "../helpers/tui-kit.ts";
import { SLEEP_COMMAND } from "./scripts/sleepy-worker.ts";

setDefaultTimeout(60_000);

const ORIGIN_SCRIPT = join(REPO_ROOT, "tests", "e2e", "scripts", "spawning-origin.ts");
const WORKER_SCRIPT = join(REPO_ROOT, "tests", "e2e", "scripts", "sleepy-worker.ts");
const DONE = "Delegated, verified, acknowledged and cleaned up.";
/** The widget's line for the worker while its model runs the sleep. */
const WIDGET_LINE = new RegExp(
  `\`helper\` \\(unverified claim\\) · task [0-9a-f]{8}: running bash "${SLEEP_COMMAND}" for \\d+s · \\d+ turns? · [\\d,]+ tokens · heard \\d+s ago`,
);

describeWithTmux("the workers widget in the interactive TUI", () => {
  describeOnHosts("a spawned worker at work", (host) => {
    test("shows the worker running bash with its command while it runs, counts it on the footer, and goes when it is done", async () => {
      const port = freePort();
      let tui: Tui | undefined;
      let relayPid: number | undefined;
      try {
        tui = await startInstalledTui({ host, port, script: ORIGIN_SCRIPT, workerScript: WORKER_SCRIPT });
        await tui.waitForScreen((screen) => footerOf(screen).some((line) => / · idle$/.test(line)), 15_000);
        relayPid = embeddedRelayRecord({ PI_TASKS_HOME: join(tui.agentDir, "pi-tasks") }, port)?.pid;
        await tui.submit("Delegate the hello.txt task to a worker you start.");
        const working = await tui.waitForScreen((screen) => WIDGET_LINE.test(screen), 30_000);
        expect(working).toMatch(WIDGET_LINE);
        expect(footerOf(working).some((line) => / · 1 active · 1 running$/.test(line))).toBe(true);
        const done = await tui.waitForScreen((screen) => screen.includes(DONE), 30_000);
        await tui.waitForScreen((screen) => !/running bash/.test(screen.split(DONE).at(-1) ?? ""), 5_000);
        expect(done).toContain(DONE);
        expect(await tui.scrollback()).not.toMatch(/uncaught|unhandled|ENOENT/i);
        expect(await tui.stop()).toBe(0);
      } finally {
        await tui?.stop();
        if (relayPid !== undefined) await stopPids([relayPid]);
      }
    });
  });
});
