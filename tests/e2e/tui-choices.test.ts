/**
 * A question with choices answered by the person in the real interactive Pi 1.6 TUI (tmux), on each
 * host: a worker asks with choices; at the origin the person types `/tasks answer <id>`, a select
 * dialog lists the choices (the suggested one first), the person moves to one and presses Enter,
 * and that choice reaches the worker as the answer.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually } from "../../kit/async.ts";
import { waitForEndpoint } from "../../kit/session-control.ts";
import { type RelayProcess, startRelayProcess } from "../../kit/relay-process.ts";
import { describeOnHosts } from "../helpers/host-kit.ts";
import { called, choiceWorkerBrain, EVENT_MESSAGE, isCustom, stopAll } from "../helpers/pi-kit.ts";
import { type PiProcess, type RpcRecord, startPi } from "../helpers/pi-process.ts";
import { describeWithTmux, startTui, type Tui } from "../helpers/tui-kit.ts";

setDefaultTimeout(90_000);

let relay: RelayProcess;
const workers: PiProcess[] = [];
// One identity for both Pis (one user): the worker trusts the origin without pairing.
const home = mkdtempSync(join(tmpdir(), "pi-tasks-tui-choices-"));
beforeAll(async () => {
  relay = await startRelayProcess();
});
afterAll(async () => {
  await stopAll(workers);
  await relay?.stop();
  rmSync(home, { recursive: true, force: true });
});

const isAnswer = (record: RpcRecord) =>
  isCustom(record, EVENT_MESSAGE) && String((record.message as { content?: unknown }).content).startsWith("## task answer");

describeWithTmux("a question with choices in the TUI", () => {
  describeOnHosts("the person picks an answer", (host) => {
    test("/tasks answer opens a select of the choices; the one picked reaches the worker", async () => {
      const worker = startPi({
        host,
        relayUrl: relay.url,
        home,
        session: `tui-choice-worker-${host}`,
        worker: true,
        brain: choiceWorkerBrain(["red", "forest green", "blue"], "blue", false),
      });
      workers.push(worker);
      const to = await waitForEndpoint(relay.url, `tui-choice-worker-${host}`);
      let tui: Tui | undefined;
      try {
        tui = await startTui({
          host,
          relayUrl: relay.url,
          env: { PI_TASKS_HOME: home },
          session: `tui-choice-origin-${host}`,
          settings: { tuiMode: "regular" },
          brain: (turn) =>
            called(turn, "agent_task_send")
              ? { text: "Over to you." }
              : { tools: [{ name: "agent_task_send", arguments: { to, task: "Paint the banner." } }] },
        });
        await tui.submit("Delegate the banner.");
        const asked = await tui.waitForScreen(/answer with \/tasks answer ([0-9a-f]{8})/, 30_000);
        const prefix = asked.match(/answer with \/tasks answer ([0-9a-f]{8})/)![1]!;
        await tui.submit(`/tasks answer ${prefix}`);
        const screen = await tui.waitForScreen((text) => text.includes("your answer to") && text.includes("forest green"), 10_000);
        const dialog = screen.slice(screen.lastIndexOf("your answer to"));
        // The suggested one first, then the others in order.
        expect(dialog.indexOf("blue")).toBeLessThan(dialog.indexOf("red"));
        expect(dialog.indexOf("red")).toBeLessThan(dialog.indexOf("forest green"));
        await tui.press("Down", "Down", "Enter");
        const answered = await worker.waitFor(isAnswer, 20_000).catch(() => undefined);
        expect(String((answered?.message as { content?: unknown } | undefined)?.content)).toContain("forest green");
        // The worker may take the answer in before this Pi repaints its notification: wait for the line.
        const said = await eventually(async () => (await tui!.scrollback()).includes("pi-tasks: answered question"), 10_000, 100);
        expect(said).toBe(true);
      } finally {
        await tui?.stop();
      }
    });
  });
});
