/**
 * The README's commands, run as a person would (issue 40), on Pi on Node from the packed production
 * install (and Pi on Bun from the checkout):
 * - every `/tasks …` line the README shows is a command `/tasks` knows, and each runs in a real Pi
 *   with the README's example ids replaced by the ids of a real task and question: the board, a task
 *   in detail, the quoted answer (`/tasks answer 7c1e 'use Postgres'` answers `use Postgres`, not
 *   the quotes), the audit, help; the rest (grant, reassign, cancel, stop) answer in words why there
 *   is nothing for them to do here — never an unknown command;
 * - every `pi-tasks …` command of the README's CLI block has a `--help`, on Node from the install,
 *   that names each option the README writes beside it.
 * Parsed from README.md itself: a changed command or option there fails this test until it works.
 */
import { expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { waitForEndpoint } from "../../testkit/session-control.ts";
import { REPO_ROOT } from "../../testkit/relay-process.ts";
import { describeOnHosts, installedPackage, NODE_BINARY, nodeHostMissingReason } from "../helpers/host-kit.ts";
import { called, field, lastSeen, toolCalls, usePiFixture } from "../helpers/pi-kit.ts";
import type { PiProcess, RpcRecord } from "../helpers/pi-process.ts";
import { runToExit } from "../helpers/run-to-exit.ts";
import type { ScriptReply, ScriptTurn } from "../helpers/tui-kit.ts";

setDefaultTimeout(120_000);

const fx = usePiFixture();
const README = readFileSync(join(REPO_ROOT, "README.md"), "utf8");

/** The lines of the README's fenced code blocks. */
const codeLines = [...README.matchAll(/```[a-z]*\n([\s\S]*?)```/g)].flatMap((block) => block[1]!.split("\n"));
/** `/tasks …` as the README writes it (the comment after `←` dropped). */
const TASKS_LINES = codeLines.filter((line) => line.startsWith("/tasks")).map((line) => line.split("←")[0]!.trim());
/** `pi-tasks …` command lines of the CLI block (each `|` alternative on its own). */
const CLI_LINES = codeLines
  .filter((line) => line.startsWith("pi-tasks "))
  .flatMap((line) => line.split("#")[0]!.split(" | "))
  .map((line) => line.trim().replace(/^pi-tasks /, ""))
  .filter((line) => line !== "" && !line.startsWith("<command>"));

/** The worker: asks which database, then completes with the answer it got, as it got it. */
function askingWorker(turn: ScriptTurn): ScriptReply {
  const taskId = field(lastSeen(turn, "## task assignment"), "taskId");
  if (taskId === undefined) return { text: "nothing assigned" };
  if (!called(turn, "agent_task_message", '"question"'))
    return { tools: [{ name: "agent_task_message", arguments: { taskId, type: "question", message: "Which database?" } }] };
  const answer = lastSeen(turn, "## task answer");
  if (answer === undefined) return { text: "waiting for the answer" };
  const said = /│ (.*)/.exec(answer)?.[1] ?? "";
  if (!called(turn, "agent_task_done"))
    return { tools: [{ name: "agent_task_done", arguments: { taskId, status: "completed", summary: `got: ${said}` } }] };
  return { text: "finished" };
}

const notified = (prefix: string) => (record: RpcRecord) =>
  record.type === "extension_ui_request" && record.method === "notify" && String(record.message).startsWith(prefix);

/** Runs `/tasks …` in `pi` and answers what it showed. */
async function tasks(pi: PiProcess, line: string): Promise<string> {
  const from = pi.records.length;
  pi.prompt(line);
  const shown = await pi.waitFor((record) => record.type === "extension_ui_request" && record.method === "notify", 20_000, from);
  return String(shown.message);
}

describeOnHosts("the README's commands, as written", (host) => {
  test("every /tasks line runs in a real Pi; the quoted answer reaches the worker without its quotes", async () => {
    expect(TASKS_LINES.length).toBeGreaterThanOrEqual(8);
    fx.pi({ host, session: `readme-worker-${host}`, worker: true, brain: askingWorker });
    const to = await waitForEndpoint(fx.relay.url, `readme-worker-${host}`);
    const origin = fx.pi({
      host,
      session: `readme-origin-${host}`,
      brain: (turn) =>
        called(turn, "agent_task_send")
          ? { text: "sent" }
          : { tools: [{ name: "agent_task_send", arguments: { to, task: "Pick a database." } }] },
    });
    origin.prompt("Delegate the database choice.");
    const question = await origin.waitFor(notified("pi-tasks: question on task"), 30_000);
    const questionId = /answer with \/tasks answer (\S+)/.exec(String(question.message))?.[1];
    expect(questionId).toBeDefined();
    const taskId = String(toolCalls(origin, "agent_task_send")[0]!.details.taskId);
    // The README's example ids, replaced by this run's (the rest of each line as written).
    const real = (line: string) =>
      line.startsWith("/tasks answer ")
        ? line.replace(/^\/tasks answer \S+/, `/tasks answer ${questionId}`)
        : line.replace(/\b[0-9a-f]{8}\b/, taskId.slice(0, 8));
    const answerLine = TASKS_LINES.find((line) => line.startsWith("/tasks answer"))!;
    expect(answerLine).toContain("'use Postgres'");
    for (const line of TASKS_LINES) {
      const shown = await tasks(origin, real(line));
      // Never an unknown command or a mistyped one: every line is a command /tasks knows.
      expect({ line, shown: shown.includes("/tasks help lists the commands") }).toEqual({ line, shown: false });
      if (line === answerLine) expect(shown).toStartWith(`pi-tasks: answered question ${questionId}`);
      if (line === "/tasks") expect(shown).toStartWith("pi-tasks\n");
      if (/^\/tasks [0-9a-f]{8}$/.test(line)) expect(shown).toStartWith(`task ${taskId}`);
      if (line.startsWith("/tasks audit")) expect(shown).toStartWith(`audit of task ${taskId}`);
      if (line === "/tasks help") expect(shown).toContain("COMMAND");
    }
    // The answer as the worker's model read it: the words, not the quotes around them.
    const done = await origin.waitFor(
      (record) => record.type === "message_end" && JSON.stringify(record).includes("## task completed"),
      30_000,
    );
    expect(JSON.stringify(done)).toContain("got: use Postgres");
    expect(JSON.stringify(done)).not.toContain("got: 'use Postgres'");
  });
});

test.skipIf(nodeHostMissingReason() !== undefined)(
  "every pi-tasks command the README shows has a --help on Node from the install naming each option written beside it",
  async () => {
    const cli = join(installedPackage(), "dist", "pi-tasks.js");
    expect(CLI_LINES.length).toBeGreaterThanOrEqual(10);
    for (const line of CLI_LINES) {
      const words = line.split(/\s+/);
      // The command: its words up to the first placeholder, option or bracket.
      const end = words.findIndex((word) => !/^[a-z]+$/.test(word));
      const command = end === -1 ? words : words.slice(0, end);
      const help = await runToExit([NODE_BINARY, cli, ...command, "--help"], { cwd: REPO_ROOT, env: process.env, timeoutMs: 30_000 });
      expect({ line, code: help.code }).toEqual({ line, code: 0 });
      for (const option of line.match(/--[a-z][a-z-]*/g) ?? [])
        expect({ line, option, named: help.stdout.includes(option) }).toEqual({ line, option, named: true });
    }
  },
);
