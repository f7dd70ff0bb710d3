/**
 * Quitting the interactive Pi with a task open and a question waiting (issue 40: "Pi quits with a
 * task and a question open, without a word"). The origin's model delegates to an RPC worker that
 * asks a question; the person quits with ctrl+d instead of answering. Pi stops its TUI first, then
 * pi-tasks says what stays open and what becomes of it (extensions/pi-tasks/quit-notice.ts), in the
 * shell, before Pi's own "To resume this session" line — nothing drawn over.
 */
import { expect, setDefaultTimeout, test } from "bun:test";
import { waitForEndpoint } from "../../testkit/session-control.ts";
import { describeOnHosts } from "../helpers/host-kit.ts";
import { bannerWorkerBrain, called, usePiFixture } from "../helpers/pi-kit.ts";
import { describeWithTmux, footerOf, type ScriptTurn, startTui } from "../helpers/tui-kit.ts";

setDefaultTimeout(120_000);

const fx = usePiFixture();
/** How long the worker Pi may take to register while the TUI Pi starts beside it. */
const WORKER_REGISTERED_MS = 45_000;

describeWithTmux("quitting Pi with work open", () => {
  describeOnHosts("the quit notice", (host) => {
    test("ctrl+d with a task open and a question waiting: the shell shows what stays open and what to do, before Pi's resume line", async () => {
      const workerSession = `quit-worker-${host}`;
      let to: unknown;
      const session = `quit-origin-${host}`;
      const tui = await startTui({
        host,
        session,
        relayUrl: fx.relay.url,
        settings: { tuiMode: "regular" },
        brain: (turn: ScriptTurn) =>
          called(turn, "agent_task_send")
            ? { text: "Sent; the worker will ask." }
            : { tools: [{ name: "agent_task_send", arguments: { to, task: "Paint the banner." } }] },
      });
      fx.defer(() => tui.stop());
      // The worker is the same user's Pi (the TUI's home): no pairing on either side.
      fx.pi({ host, home: tui.home, session: workerSession, worker: true, brain: bannerWorkerBrain() });
      // A budget for a loaded 2-core machine (two Pis starting at once), not a measurement.
      to = await waitForEndpoint(fx.relay.url, workerSession, { timeoutMs: WORKER_REGISTERED_MS });

      await tui.submit("Have the worker paint the banner.");
      await tui.waitForScreen((screen) => footerOf(screen).some((line) => line.includes("1 question waiting")), 60_000);
      // The person quits instead of answering: ctrl+d on the empty editor.
      await tui.press("C-d");
      let status: number | undefined;
      for (let waited = 0; status === undefined && waited < 30_000; waited += 100) {
        await Bun.sleep(100);
        status = await tui.exitStatus();
      }
      expect(status).toBe(0);
      const shell = await tui.scrollback();
      const notice = shell.indexOf(`pi-tasks: ${session} quit with 1 task open (1 question unanswered):`);
      expect(notice).toBeGreaterThan(-1);
      const after = shell.slice(notice);
      expect(after).toMatch(/\n {2}[0-9a-f]{8} {2}question waiting for you — "Paint the banner\."\n/);
      expect(after).toContain("Tasks you delegated live only in this Pi: resume this session with PI_TASKS_RESUME=1 set");
      // In the shell after Pi's last frame, before Pi's own last line.
      expect(after.indexOf("To resume this session")).toBeGreaterThan(0);
      expect(await tui.stop()).toBe(0);
    });
  });
});
