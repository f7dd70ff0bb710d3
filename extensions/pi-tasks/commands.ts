/**
 * `/tasks` and its subcommands: what a person types in Pi. One table row per subcommand (its
 * usage, what it does, how it runs); `/tasks help` prints the table. A slash command is typed by
 * the person (the model cannot type one), so pairing here is a human act — the same as the shell's
 * `pi-tasks peers add`, which a Pi package install does not put on PATH.
 */
import { clearRelayStopMark, embeddedRelayRecord, ensureRelay, relayStopMark, stopEmbeddedRelay } from "../../src/host/embedded-relay.ts";
import { table } from "../../src/host/format.ts";
import { CLI_BUNDLE } from "../../src/host/runtime.ts";
import { killSession, workspaceLines } from "../../src/host/sessions.ts";
import { TaskError } from "../../src/protocol/errors.ts";
import { relayConfigFromEnv } from "../../src/relay-client/config.ts";
import { piTasksHome } from "../../src/relay-client/config.ts";
import { identityPath } from "../../src/trust/identity.ts";
import { addPeer, listPeers, peersPath, removePeer } from "../../src/trust/peers.ts";
import { auditCommand } from "./audit.ts";
import { applyResult } from "./tools/apply.ts";
import { boardLines, detailLines } from "./board.ts";
import type { Lifecycle, SessionInfo } from "./lifecycle.ts";
import type { PeerDirectory } from "./peers.ts";
import { grantCommand } from "./grant-requests.ts";
import { type AnswerDialog, answerCommand } from "./questions.ts";
import { reassignCommand } from "./reassign.ts";
import { findTask, isWorkflowId } from "./short-ids.ts";
import { forgetSpecialist } from "./pool.ts";
import { cancelDeliveryWords, workflowCancelLines } from "./tools/cancel.ts";
import type { WorkflowRunner } from "./workflows.ts";
import { workerTranscriptLines } from "./worker-transcript.ts";

export interface CommandDeps {
  readonly life: Lifecycle;
  /** This Pi's running workflows (the board lists them; `/tasks cancel` cancels one). */
  readonly workflows: WorkflowRunner;
  readonly peers: PeerDirectory;
  readonly appendEntry: (customType: string, data: unknown) => void;
}

interface Subcommand {
  readonly usage: string;
  readonly summary: string;
  run(words: readonly string[], deps: CommandDeps, dialog: AnswerDialog | undefined): Promise<string[]>;
}

function usage(row: Subcommand, problem: string): TaskError {
  return new TaskError("CLI_USAGE", { message: `${problem} — usage: ${row.usage}` });
}

async function started(deps: CommandDeps): Promise<SessionInfo> {
  await deps.life.ready();
  const info = deps.life.info();
  if (info === undefined) deps.life.current(); // throws why pi-tasks is not running
  return info!;
}

function identityLines(info: SessionInfo): string[] {
  const home = piTasksHome(info.env);
  return [
    `pi-tasks identity: ${info.identity.fingerprint}`,
    `  public key: ${info.identity.publicKey}`,
    `  file:       ${identityPath(home)} (every Pi with PI_TASKS_HOME=${home} is this identity)`,
    "To work with another user's Pi, pair once on both sides:",
    `  in their Pi:  /tasks pair <a name for you> ${info.identity.publicKey}`,
    "  in this Pi:   /tasks pair <a name for them> <the key their /tasks identity shows>",
    "Compare the fingerprints over a channel you trust before you pair.",
  ];
}

/** `/tasks relay stop`: stops the relay pi-tasks started; the user's other Pis leave it stopped (relay-revival.ts). */
async function stopRelayLines(info: SessionInfo, port: number): Promise<string[]> {
  const result = await stopEmbeddedRelay(info.env, port);
  if (!result.stopped)
    throw new TaskError("SESSION_NOT_OWNED", { message: `pi-tasks did not start a relay on port ${port}; it stops only its own` });
  return [
    `pi-tasks: stopped the relay on port ${port} (pid ${result.pid}). Your Pis leave it stopped and say so; /tasks relay start (in any of them) or a new Pi session starts it again.`,
  ];
}

/** `/tasks relay start`: forgets the person's stop and finds or starts the relay, as session start does. */
async function startRelayLines(info: SessionInfo, port: number, deps: CommandDeps): Promise<string[]> {
  clearRelayStopMark(info.env, port);
  const relay = await ensureRelay({ env: info.env, config: relayConfigFromEnv(info.env) });
  deps.life.requestRefresh();
  if (relay.state === "started")
    return [
      `pi-tasks: started the relay at ${relay.url} (pid ${relay.record?.pid}, log ${relay.record?.log}). Your Pis' tasks go on from here.`,
    ];
  if (relay.state === "running") return [`pi-tasks: the relay at ${relay.url} is running already; nothing was started.`];
  throw new TaskError("RELAY_NOT_STARTED", { message: relay.problem ?? `nothing was started at ${relay.url}` });
}

async function relayLines(words: readonly string[], deps: CommandDeps): Promise<string[]> {
  const info = await started(deps);
  const port = info.relay.record?.port ?? relayConfigFromEnv(info.env).port;
  if (words[0] === "stop" || words[0] === "start") {
    if (port === undefined)
      throw new TaskError("SESSION_NOT_OWNED", {
        message: `this Pi uses ${info.relay.url} (PI_TASKS_RELAY_URL); pi-tasks ${words[0]}s only a relay of its own`,
      });
    return words[0] === "stop" ? stopRelayLines(info, port) : startRelayLines(info, port, deps);
  }
  const record = port === undefined ? undefined : embeddedRelayRecord(info.env, port);
  const mark = port === undefined ? undefined : relayStopMark(info.env, port);
  const state =
    record !== undefined
      ? `started by pi-tasks: pid ${record.pid}, since ${record.startedAt}, log ${record.log}`
      : mark !== undefined
        ? `stopped by you at ${mark.at} (/tasks relay stop); your Pis leave it stopped`
        : "not started by pi-tasks (or no longer running)";
  return [
    `relay: ${info.relay.url}`,
    `  ${state}`,
    ...(record !== undefined ? ["  /tasks relay stop stops it"] : mark !== undefined ? ["  /tasks relay start starts it again"] : []),
  ];
}

const SUBCOMMANDS: Readonly<Record<string, Subcommand>> = {
  answer: {
    usage: "/tasks answer [<question id>] [<text>]",
    summary: "answer a question a worker asked (a dialog asks for what you leave out)",
    run: (words, deps, dialog) =>
      deps.life
        .ready()
        .then(() => answerCommand(words, { current: () => deps.life.current(), run: (operation) => deps.life.run(operation), dialog })),
  },
  grant: {
    usage: "/tasks grant [<request id>] [allow|deny] [<note>]",
    summary: "decide a worker's request for more than its grant (only you can; a dialog asks for what you leave out)",
    run: (words, deps, dialog) =>
      deps.life
        .ready()
        .then(() => grantCommand(words, { current: () => deps.life.current(), run: (operation) => deps.life.run(operation), dialog })),
  },
  stop: {
    usage: "/tasks stop <worker session>",
    summary:
      "stop a worker pi-tasks spawned (a specialist kept warm, or any other), confirmed gone; its workspace is kept if it holds work",
    run: async (words, deps) => {
      if (words.length !== 1) throw usage(SUBCOMMANDS.stop!, "name the worker's session (the board lists them)");
      const info = await started(deps);
      const stopped = await killSession(words[0]!, info.env);
      forgetSpecialist(stopped.session);
      return [`pi-tasks: stopped ${stopped.session} (pids ${stopped.pids.join(", ")}); confirmed gone.`, ...workspaceLines(stopped)];
    },
  },
  cancel: {
    usage: "/tasks cancel <task or workflow id> [<reason>]",
    summary: "cancel a task this session assigned, or a workflow as a whole (its running steps; the rest never sent)",
    run: async (words, deps) => {
      if (words.length === 0) throw usage(SUBCOMMANDS.cancel!, "name the task or the workflow (the board lists them)");
      await started(deps);
      const reason = words.length > 1 ? words.slice(1).join(" ") : undefined;
      if (isWorkflowId(words[0]!)) return workflowCancelLines(await deps.workflows.cancel(words[0]!, reason));
      const found = findTask(deps.life.current().listTasks(), words[0]!);
      const cancelled = await deps.life.run((core) => core.cancel({ taskId: found.taskId, ...(reason === undefined ? {} : { reason }) }));
      return [`pi-tasks: cancelled task ${cancelled.taskId}; delivery to the worker: ${cancelDeliveryWords(cancelled)}.`];
    },
  },
  reassign: {
    usage: "/tasks reassign <task id> [<worker session>]",
    summary: "move an orphaned task to another worker (default: its worker's restarted session)",
    run: (words, deps) =>
      reassignCommand(words, {
        current: () => deps.life.current(),
        run: (operation) => deps.life.run(operation),
        info: () => deps.life.info(),
      }),
  },
  apply: {
    usage: "/tasks apply <task id>",
    summary: "apply a completed result's patch or files into this checkout (conflicts listed, nothing changed)",
    run: async (words, deps) => {
      if (words.length !== 1) throw usage(SUBCOMMANDS.apply!, "name the task");
      const info = await started(deps);
      const found = findTask(deps.life.current().listTasks(), words[0]!);
      return (await deps.life.run(async (core) => applyResult(core, found.taskId, info.cwd))).text.split("\n");
    },
  },
  audit: {
    usage: "/tasks audit <task id> [--json]",
    summary: "one timeline of a task from both sides, gaps named",
    run: async (words, deps) => {
      await deps.life.ready();
      return auditCommand(words, {
        current: () => deps.life.current(),
        requestRefresh: () => deps.life.requestRefresh(),
        appendEntry: deps.appendEntry,
      });
    },
  },
  identity: {
    usage: "/tasks identity",
    summary: "this installation's key and fingerprint, and how to pair",
    run: async (_words, deps) => identityLines(await started(deps)),
  },
  peers: {
    usage: "/tasks peers",
    summary: "the identities this one trusts",
    run: async (_words, deps) => {
      const home = piTasksHome((await started(deps)).env);
      const peers = listPeers(home);
      if (peers.length === 0) return [`pi-tasks: no peers in ${peersPath(home)}; pair with /tasks pair <name> <key>`];
      return [
        `pi-tasks peers (${peersPath(home)}):`,
        ...table(
          ["NAME", "FINGERPRINT", "ADDED"],
          peers.map((peer) => [peer.name, peer.fingerprint, peer.addedAt]),
        ).split("\n"),
      ];
    },
  },
  pair: {
    usage: "/tasks pair <name> <key>",
    summary: "trust <key> (ed25519:…, from the other side's /tasks identity) as the peer <name>",
    run: async (words, deps) => {
      if (words.length !== 2) throw usage(SUBCOMMANDS.pair!, "name the peer and give its key");
      const { peer, changed } = await addPeer(piTasksHome((await started(deps)).env), words[0]!, words[1]!);
      deps.life.requestRefresh();
      return [
        changed
          ? `pi-tasks: paired ${peer.name} (fingerprint ${peer.fingerprint}); its mail is trusted from now on.`
          : `pi-tasks: ${peer.name} was already paired with this key; nothing changed.`,
      ];
    },
  },
  unpair: {
    usage: "/tasks unpair <name>",
    summary: "stop trusting the peer <name>",
    run: async (words, deps) => {
      if (words.length !== 1) throw usage(SUBCOMMANDS.unpair!, "name the peer");
      const removed = await removePeer(piTasksHome((await started(deps)).env), words[0]!);
      return [`pi-tasks: unpaired ${removed.name} (fingerprint ${removed.fingerprint}); its mail is refused from now on.`];
    },
  },
  relay: {
    usage: "/tasks relay [stop|start]",
    summary: "the relay this Pi uses; stop stops the relay pi-tasks started (your Pis leave it stopped), start starts it again",
    run: (words, deps) => relayLines(words, deps),
  },
  help: {
    usage: "/tasks help",
    summary: "this list",
    run: async () => helpLines(),
  },
};

export function helpLines(): string[] {
  const rows = [
    ["/tasks", "the board: this session, its relay, its workers, questions waiting for you, every task"],
    ["/tasks <task id>", "one task in detail"],
  ];
  for (const row of Object.values(SUBCOMMANDS)) rows.push([row.usage, row.summary]);
  return [
    ...table(["COMMAND", "WHAT IT DOES"], rows).split("\n"),
    "",
    // Pi's installer puts no bin on PATH: the command of the install Pi loaded, as it runs.
    `The pi-tasks command (relay, spawn, list, conformance, …) of this install: node ${CLI_BUNDLE}`,
  ];
}

/** The one-line description Pi shows for `/tasks`. */
export const TASKS_DESCRIPTION = `pi-tasks: the board, or one of: ${Object.keys(SUBCOMMANDS).join(", ")} (/tasks help)`;

/** The workflows running now, one line each, with how to see and cancel one. */
function workflowLines(workflows: WorkflowRunner): string[] {
  const running = workflows.list();
  if (running.length === 0) return [];
  return [
    ...running.map((workflow) => workflows.summary(workflow)),
    "A workflow in detail: /tasks <workflow id>; cancel one as a whole: /tasks cancel <workflow id>",
  ];
}

async function board(wanted: string, deps: CommandDeps): Promise<string[]> {
  await deps.life.ready();
  const info = deps.life.info();
  const core = deps.life.current();
  if (info !== undefined) await deps.peers.refresh(info);
  const tasks = core.listTasks();
  if (wanted === "")
    return [
      ...boardLines(info, core.endpoint(), tasks, deps.peers.names(), Date.now(), core.rejections(), deps.life.failure(), (taskId) =>
        core.waitingMail(taskId),
      ),
      ...workflowLines(deps.workflows),
    ];
  if (isWorkflowId(wanted)) {
    const workflow = deps.workflows.find(wanted);
    return [deps.workflows.summary(workflow), ...deps.workflows.describe(workflow).map((line) => `  ${line}`)];
  }
  try {
    const task = findTask(tasks, wanted);
    const names = deps.peers.names();
    const transcript = info === undefined ? [] : workerTranscriptLines(info.env, task, names);
    return [...detailLines(task, names, Date.now(), core.waitingMail(task.taskId)), ...transcript];
  } catch (error) {
    // Not a task: maybe a mistyped subcommand.
    if (error instanceof TaskError && error.code === "UNKNOWN_TASK") return [`pi-tasks: ${error.message} (/tasks help lists the commands)`];
    throw error;
  }
}

/**
 * The words of `/tasks <args>` as a shell reads them: split on spaces, except inside a word quoted
 * with '…' or "…" (the quotes are not part of it), so `/tasks answer 7c1e 'use Postgres'` answers
 * `use Postgres`. A quote opened at the start of a word and never closed is `CLI_USAGE`.
 */
export function commandWords(args: string): string[] {
  const words: string[] = [];
  for (const match of args.matchAll(/'([^']*)'|"([^"]*)"|(\S+)/g)) {
    const [, single, double, plain] = match;
    if (plain !== undefined && /^['"]/.test(plain))
      throw new TaskError("CLI_USAGE", { message: `the quote that opens ${plain} is never closed; nothing was done` });
    words.push(single ?? double ?? plain!);
  }
  return words;
}

/** Runs `/tasks <args>`: the lines to show (an error becomes a `pi-tasks: …` line, never a throw). */
export async function tasksCommand(args: string, deps: CommandDeps, dialog: AnswerDialog | undefined): Promise<string[]> {
  try {
    const words = commandWords(args);
    const row = words[0] === undefined || !Object.hasOwn(SUBCOMMANDS, words[0]) ? undefined : SUBCOMMANDS[words[0]];
    return row === undefined ? await board(words.join(" "), deps) : await row.run(words.slice(1), deps, dialog);
  } catch (error) {
    return [`pi-tasks: ${error instanceof Error ? error.message : String(error)}`];
  }
}
