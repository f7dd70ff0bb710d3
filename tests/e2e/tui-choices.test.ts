/**
 * A question with choices answered by the person in the real interactive Pi 1.6 TUI (tmux), on each
 * host: a worker asks with choices; at the origin the person types `/tasks answer <id>`, a select
 * dialog lists the choices (the suggested one first), the person moves to one and presses Enter,
 * and that choice reaches the worker as the answer. The worker then asks a second question and the
 * relay goes away: the footer line still shows `1 active · 1 question waiting`, with the failure
 * after the counts (never in their place).
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually } from "../../testkit/async.ts";
import { waitForEndpoint } from "../../testkit/session-control.ts";
import { type RelayProcess, startRelayProcess } from "../../testkit/relay-process.ts";
import { describeOnHosts } from "../helpers/host-kit.ts";
import { called, choiceWorkerBrain, EVENT_MESSAGE, field, isCustom, lastSeen, stopAll } from "../helpers/pi-kit.ts";
import { type PiProcess, type RpcRecord, startPi } from "../helpers/pi-process.ts";
import { describeWithTmux, footerOf, type ScriptReply, type ScriptTurn, startTui, type Tui } from "../helpers/tui-kit.ts";

setDefaultTimeout(90_000);

let relay: RelayProcess;
const workers: PiProcess[] = [];
// One identity for both Pis (one user): the worker trusts the origin without pairing.
const home = mkdtempSync(join(tmpdir(), "pi-tasks-tui-choices-"));
beforeAll(async () => {
  relay = await startRelayProcess();
});
/** Whether the relay answers its profile (it was stopped by a scenario). */
async function relayAnswers(): Promise<boolean> {
  return fetch(`${relay.url}/api/task-relay/profile`).then(
    (response) => response.ok,
    () => false,
  );
}
afterAll(async () => {
  await stopAll(workers);
  await relay?.stop();
  rmSync(home, { recursive: true, force: true });
});

const SECOND_QUESTION = "Which size?";

/** The choice worker, which asks a second question (plain) once its first is answered, then waits. */
function askingTwice(choices: readonly string[], defaultChoice: string): (turn: ScriptTurn) => ScriptReply {
  const first = choiceWorkerBrain(choices, defaultChoice, false);
  return (turn) => {
    const taskId = field(lastSeen(turn, "## task assignment"), "taskId");
    if (taskId === undefined || lastSeen(turn, "## task answer") === undefined || called(turn, "agent_task_message", SECOND_QUESTION))
      return first(turn);
    return { tools: [{ name: "agent_task_message", arguments: { taskId, type: "question", message: SECOND_QUESTION } }] };
  };
}

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
        brain: askingTwice(["red", "forest green", "blue"], "blue"),
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
          // Wide enough for the footer's counts and a failure's words on one line.
          cols: 240,
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

        // The second question waits for this side; then the relay goes away. The footer keeps what
        // matters most — the work and the question — and adds the failure after them.
        const counts = `tasks: tui-choice-origin-${host} · 1 active · 1 question waiting`;
        await tui.waitForScreen((screen) => footerOf(screen).includes(counts), 30_000);
        await relay.stop();
        const failing = new RegExp(
          `^${counts} · unavailable \\(RELAY_UNAVAILABLE\\) on \\w+ — relay unreachable at ${relay.url.replaceAll(".", "\\.")}; retrying$`,
        );
        const down = await tui.waitForScreen((screen) => footerOf(screen).some((line) => failing.test(line.trim())), 30_000);
        expect(footerOf(down).filter((line) => line.startsWith("tasks: "))).toHaveLength(1);
      } finally {
        await tui?.stop();
        // The next host's scenario needs the relay again (a fresh one on the same port).
        if (!(await relayAnswers())) relay = await startRelayProcess({ port: relay.port });
      }
    });
  });
});
