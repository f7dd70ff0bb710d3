/**
 * The real interactive Pi 1.6 TUI, as a new user gets it: `pi install <repo>` into a fresh agent
 * dir, then `pi` in a project with no pi-tasks environment at all — no `WOLFPACK_SESSION_NAME`, no
 * `PI_TASKS_RELAY_URL`, no relay started by the test (only `WOLFPACK_PORT` moves the default relay
 * port off 18790, so the test cannot meet a relay of the machine's). The scripted model starts its
 * own worker with `agent_task_spawn`, delegates, answers the worker's question, acknowledges the
 * completion and stops the worker; the test reads the screen like a person would.
 */
import { expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { embeddedRelayRecord } from "../../src/host/embedded-relay.ts";
import { isAlive } from "../../src/platform/processes.ts";
import { stopPids } from "../../src/host/stop.ts";
import { DEMO_GREETING } from "../../src/demo/scenarios/demo-origin.ts";
import { freePort, REPO_ROOT } from "../../testkit/relay-process.ts";
import { describeOnHosts } from "../helpers/host-kit.ts";
import { countMatches, describeWithTmux, footerOf, startInstalledTui, type Tui } from "../helpers/tui-kit.ts";

setDefaultTimeout(60_000);

const ORIGIN_SCRIPT = join(REPO_ROOT, "tests", "e2e", "scripts", "spawning-origin.ts");
const WORKER_SCRIPT = join(REPO_ROOT, "src", "demo", "scenarios", "demo-worker.ts");
const DONE = "Delegated, verified, acknowledged and cleaned up.";

describeWithTmux("the interactive TUI after pi install, with zero configuration", () => {
  describeOnHosts("a new user's first delegation", (host) => {
    test("starts by itself, delegates to a worker it spawned, and shows footer, events and /tasks as a person reads them", async () => {
      const port = freePort();
      let tui: Tui | undefined;
      let relayPid: number | undefined;
      try {
        tui = await startInstalledTui({ host, port, script: ORIGIN_SCRIPT, workerScript: WORKER_SCRIPT });
        const home = join(tui.agentDir, "pi-tasks");
        const running = () => embeddedRelayRecord({ PI_TASKS_HOME: home }, port);

        // Pi lists the installed package as pi-tasks; the footer names the generated session once the
        // embedded relay is up.
        // (Read from the scrollback: Pi's start-up warnings may have pushed the banner off the screen.)
        expect(await tui.scrollback()).toMatch(/\[Extensions\]\n\s+(?:\S+, )*pi-tasks(?:,|$)/m);
        const idle = await tui.waitForScreen(
          (screen) => footerOf(screen).some((line) => /^tasks: project-[0-9a-z]{6} · idle$/.test(line)),
          15_000,
        );
        const session = footerOf(idle)
          .find((line) => line.startsWith("tasks: "))!
          .slice("tasks: ".length)
          .split(" · ")[0]!;
        // The relay pi-tasks started (pi-tasks' default home is inside the agent dir).
        relayPid = running()?.pid;
        expect(relayPid).toBeGreaterThan(0);

        await tui.submit("Delegate the hello.txt task to a worker you start.");
        await tui.waitForScreen((screen) => screen.includes(DONE), 45_000);
        const transcript = await tui.scrollback();
        // The tool results and the task events, rendered (as markdown) in the transcript.
        expect(transcript).toContain("## worker started");
        expect(transcript).toMatch(/\[pi-tasks-event\]\n\n task question\n/);
        expect(transcript).toContain("Which greeting should hello.txt contain?");
        expect(transcript).toMatch(/\[pi-tasks-event\]\n\n task completed\n/);
        expect(transcript).toContain("## worker stopped");
        expect(countMatches(transcript, "[pi-tasks-event]")).toBe(2);
        expect(await Bun.file(join(tui.cwd, "hello.txt")).text()).toBe(`${DEMO_GREETING}\n`);
        // Healthy again, with the counts: nothing active after the acknowledgement.
        await tui.waitForScreen((screen) => footerOf(screen).includes(`tasks: ${session} · idle`));

        // /tasks prints the board once, with names and plain words.
        const before = countMatches(await tui.scrollback(), `session: ${session}`);
        await tui.submit("/tasks");
        const board = await tui.waitForScreen((screen) =>
          screen.includes(`session: ${session} (generated; set WOLFPACK_SESSION_NAME to choose one)`),
        );
        await Bun.sleep(300);
        const after = await tui.scrollback();
        expect(countMatches(after, `session: ${session}`) - before).toBe(1);
        expect(board).toMatch(new RegExp(`relay: http://127\\.0\\.0\\.1:${port} — started by this Pi \\(pid \\d+, log `));
        expect(board).toContain("1 task · 0 active");
        expect(board).toMatch(
          / {2}[0-9a-f]{8} {2}to `helper` \(your own session\) \[own identity ✓\] — done, acknowledged — "Create hello\.txt/,
        );
        // The worker's mail reads as peer mail from a verified signer (a spawned worker shares the identity).
        expect(after).toContain("Peer mail from a session of your own identity");
        expect(board).toMatch(/identity: [0-9a-f]{4}(:[0-9a-f]{4}){3} · \/tasks identity shows how to pair/);
        expect(board).not.toContain("terminal=");

        // The board stays readable: a later command's output does not replace it in the scrollback.
        await tui.submit("/tasks identity");
        await tui.waitForScreen((screen) => screen.includes("pi-tasks identity: "));
        const kept = await tui.scrollback();
        expect(countMatches(kept, `session: ${session}`) - before).toBe(1);
        expect(kept).toContain("1 task · 0 active");
        expect(kept).toMatch(/in their Pi: {2}\/tasks pair <a name for you> ed25519:/);

        // Nothing escaped into Pi on the way (Pi prints an uncaught exception before it exits).
        expect(await tui.scrollback()).not.toMatch(/uncaught|unhandled|ENOENT/i);
        expect(await tui.stop()).toBe(0);
        // The embedded relay outlives the Pi that started it: later Pis use it.
        expect(isAlive(relayPid!)).toBe(true);
      } finally {
        // The relay this Pi started, also when the test failed before it read its pid (read before
        // the TUI's teardown removes its agent directory).
        const started =
          relayPid ?? (tui === undefined ? undefined : embeddedRelayRecord({ PI_TASKS_HOME: join(tui.agentDir, "pi-tasks") }, port)?.pid);
        await tui?.stop();
        if (started !== undefined) expect(await stopPids([started])).toBe(true);
      }
    });
  });
});
