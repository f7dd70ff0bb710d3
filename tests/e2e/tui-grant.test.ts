/**
 * Asking for more, once, decided by the person in the real interactive Pi 1.6 TUI (tmux), on each
 * host (issue 37). The origin's grant lets the worker write only `src/`; the worker's bash (in its
 * OS sandbox) cannot write `docs/`, so its model asks with `agent_task_request_grant`. At the origin
 * the person is told, types `/tasks grant <id>`, and a dialog offers "Allow, for this task" and
 * "Deny"; Enter allows. The worker's model is woken with the decision, its next bash writes
 * `docs/` (the sandbox follows the widened grant), and it reports. A second request for the same
 * task is refused: once per task.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually } from "../../testkit/async.ts";
import { waitForEndpoint } from "../../testkit/session-control.ts";
import { type RelayProcess, startRelayProcess } from "../../testkit/relay-process.ts";
import { GRANT_VARIABLE } from "../../extensions/pi-tasks/grants.ts";
import { ALLOW_CHOICE, DENY_CHOICE } from "../../extensions/pi-tasks/grant-requests.ts";
import { describeOnHosts } from "../helpers/host-kit.ts";
import { callCount, called, field, lastSeen, stopAll, toolCalls } from "../helpers/pi-kit.ts";
import { type PiProcess, startPi } from "../helpers/pi-process.ts";
import { describeWithPackage } from "../helpers/requires-package.ts";
import { describeWithTmux, startTui, type ScriptReply, type ScriptTurn, type Tui } from "../helpers/tui-kit.ts";

setDefaultTimeout(90_000);

let relay: RelayProcess;
const workers: PiProcess[] = [];
// One identity for both Pis (one user): the worker trusts the origin without pairing.
const home = mkdtempSync(join(tmpdir(), "pi-tasks-tui-grant-"));
beforeAll(async () => {
  relay = await startRelayProcess();
});
afterAll(async () => {
  await stopAll(workers);
  await relay?.stop();
  rmSync(home, { recursive: true, force: true });
});

const WRITE_DOCS = "echo notes > docs/notes.txt && echo wrote-docs";

/** The worker: tries docs/, asks for it once, and after the approval writes it and reports. */
function askingWorker(turn: ScriptTurn): ScriptReply {
  const taskId = field(lastSeen(turn, "## task assignment"), "taskId");
  if (taskId === undefined) return { text: "nothing assigned" };
  if (callCount(turn, "bash") === 0) return { tools: [{ name: "bash", arguments: { command: WRITE_DOCS } }] };
  const ask = { taskId, request: { write: ["docs"] }, reason: "the notes belong in docs/" };
  if (callCount(turn, "agent_task_request_grant") === 0) return { tools: [{ name: "agent_task_request_grant", arguments: ask }] };
  if (lastSeen(turn, "## task grant request approved") === undefined) return { text: "waiting for the decision" };
  if (callCount(turn, "bash") === 1) return { tools: [{ name: "bash", arguments: { command: WRITE_DOCS } }] };
  if (callCount(turn, "agent_task_request_grant") === 1) return { tools: [{ name: "agent_task_request_grant", arguments: ask }] };
  if (!called(turn, "agent_task_done"))
    return { tools: [{ name: "agent_task_done", arguments: { taskId, status: "completed", summary: "notes written" } }] };
  return { text: "done" };
}

describeWithPackage("a grant request in the TUI", "bwrap", "bubblewrap", () =>
  describeWithTmux("a grant request in the TUI", () => {
    describeOnHosts("the person allows it", (host) => {
      test("/tasks grant opens a dialog; allowed, the worker's sandbox lets it write docs/; a second request is refused", async () => {
        const project = mkdtempSync(join(tmpdir(), "pi-tasks-grant-project-"));
        mkdirSync(join(project, "src"));
        mkdirSync(join(project, "docs"));
        const worker = startPi({
          host,
          relayUrl: relay.url,
          home,
          cwd: project,
          session: `tui-grant-worker-${host}`,
          worker: true,
          brain: askingWorker,
        });
        workers.push(worker);
        const to = await waitForEndpoint(relay.url, `tui-grant-worker-${host}`);
        let tui: Tui | undefined;
        try {
          tui = await startTui({
            host,
            relayUrl: relay.url,
            env: { PI_TASKS_HOME: home, [GRANT_VARIABLE]: JSON.stringify({ write: ["src"] }) },
            session: `tui-grant-origin-${host}`,
            settings: { tuiMode: "regular" },
            cols: 240,
            brain: (turn) =>
              called(turn, "agent_task_send")
                ? { text: "Over to you." }
                : { tools: [{ name: "agent_task_send", arguments: { to, task: "Write the notes." } }] },
          });
          await tui.submit("Delegate the notes.");
          const told = await tui.waitForScreen(/Decide with \/tasks grant ([0-9a-f]{8})/, 40_000);
          expect(told).toContain("asks for more: write docs");
          const prefix = told.match(/Decide with \/tasks grant ([0-9a-f]{8})/)![1]!;
          // Before the decision the sandbox held: docs/ was not written.
          expect(toolCalls(worker, "bash")[0]?.text).toContain("Read-only file system");
          expect(existsSync(join(project, "docs/notes.txt"))).toBe(false);
          await tui.submit(`/tasks grant ${prefix}`);
          const dialog = await tui.waitForScreen((screen) => screen.includes(ALLOW_CHOICE) && screen.includes(DENY_CHOICE), 10_000);
          expect(dialog.indexOf(ALLOW_CHOICE)).toBeLessThan(dialog.lastIndexOf(DENY_CHOICE));
          await tui.press("Enter");
          const wrote = await eventually(async () => existsSync(join(project, "docs/notes.txt")), 30_000, 200);
          expect(wrote).toBe(true);
          expect(await eventually(async () => (await tui!.scrollback()).includes("pi-tasks: allowed the request"), 10_000, 100)).toBe(true);
          const second = await eventually(async () => toolCalls(worker, "agent_task_request_grant")[1], 20_000, 200);
          expect(second?.isError).toBe(true);
          expect(second?.text).toContain("GRANT_REQUEST_REFUSED");
        } finally {
          await tui?.stop();
          rmSync(project, { recursive: true, force: true });
        }
      });
    });
  }),
);
