/**
 * The `/tasks` board for people: who this session is (its name and identity fingerprint), which
 * relay it uses (and whether pi-tasks started it), the problem the footer shows (its words and its
 * fix, failures.ts), mail the trust gate rejected, and one line per
 * task with the peer's session name, its signer and the state in plain words. `/tasks <id>` prints
 * one task in detail. A session name is the peer's claim (shown escaped and marked) and peer text is
 * quoted on its line (quote.ts), so neither can add a line to the board or drive the terminal.
 */
import { sandboxLine } from "./sandbox-bash.ts";
import { embeddedRelayRecord } from "../../src/host/embedded-relay.ts";
import { listSpawned, type SpawnedWorker } from "../../src/host/spawned.ts";
import { specialistIdleMs } from "../../src/protocol/limits.ts";
import { isAlive } from "../../src/platform/processes.ts";
import { openQuestions } from "../../src/core/attention.ts";
import type { TaskView } from "../../src/core/task-core.ts";
import type { OutboxPurpose } from "../../src/core/bookkeeping.ts";
import type { WaitingMail } from "../../src/core/outbox.ts";
import { endpointKey } from "../../src/protocol/endpoint.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import { activityLine, age, signerShort, TASK_TITLE_CHARS, taskTitle, taskWords, waitBrief, waitWords } from "./describe.ts";
import { failureLines, type FooterFailure } from "./failures.ts";
import type { SessionInfo } from "./lifecycle.ts";
import { questionLines, waitingQuestions } from "./questions.ts";
import { grantRequestLines, waitingGrantRequests } from "./grant-requests.ts";
import { claimedName, inlineText, oneLine, ownSessionName } from "./quote.ts";
import { shortId } from "./short-ids.ts";
import { evidenceLines, signerWords, terminalLines } from "./render.ts";

/** Session names of endpoints, by `endpointKey` (from the relay's session list and spawn records). */
export type PeerNames = ReadonlyMap<string, string>;

/** A peer as people read it: the session name it claims (marked), else a short form of its endpoint id. */
/**
 * The session at `endpoint` by its name: a claim (anyone may call a session anything), unless its
 * mail was signed by this user's own identity (`ownSigner`) — then it is the user's own session.
 */
export function peerName(endpoint: TaskEndpoint, names: PeerNames, ownSigner = false): string {
  const name = names.get(endpointKey(endpoint));
  if (name === undefined) return `endpoint ${shortId(endpoint.id)}…`;
  return ownSigner ? ownSessionName(name) : claimedName(name);
}

/** The other side of a task by name (yours when its mail is signed by your identity); this side is "this session". */
function sideName(task: TaskView, side: "origin" | "target", names: PeerNames): string {
  const ours = (side === "origin") === (task.role === "origin");
  if (ours) return "this session";
  return peerName(task[side], names, task.peer?.verified === true && task.peer.self === true);
}

/** The relay line, as it is now: a relay pi-tasks started is checked to be still running. */
function relayLine(info: SessionInfo, bound: boolean): string {
  const { relay } = info;
  const recorded = relay.record;
  const record = recorded === undefined ? undefined : embeddedRelayRecord(info.env, recorded.port);
  if (recorded !== undefined && record === undefined) {
    return `relay: ${relay.url} — the relay pi-tasks started (pid ${recorded.pid}) has stopped; a Pi started next starts it again`;
  }
  // A relay checked against the user's relay secret says so (docs/security.md, "The relay secret"):
  // one found or started at start-up proved it then; a configured one proves it before it gets anything.
  const proven = relay.secretFile === undefined ? "" : ` · verified with your relay secret ${relay.secretFile}`;
  switch (relay.state) {
    case "configured":
      return `relay: ${relay.url} (from PI_TASKS_RELAY_URL)${relay.secretFile === undefined ? "" : ` · it must prove your relay secret ${relay.secretFile} before it is sent anything`}`;
    case "started":
      return `relay: ${relay.url} — started by this Pi (pid ${record?.pid}, log ${record?.log}); /tasks relay stop stops it${proven}`;
    case "running":
      if (relay.problem !== undefined) return `relay: ${relay.url} — ${relay.problem}`;
      return record === undefined
        ? `relay: ${relay.url} — already running (not started by pi-tasks)${proven}`
        : `relay: ${relay.url} — started by pi-tasks (pid ${record.pid}, log ${record.log}); /tasks relay stop stops it${proven}`;
    case "untrusted":
      return `relay: ${relay.url} — NOT USED: ${relay.problem ?? "it cannot prove it is yours"}`;
    case "unanswered":
      // Bound means a pass reached it: it answered (and, with a secret, proved itself) after start-up.
      return bound
        ? `relay: ${relay.url} — in use: it did not answer at start-up, but answered since${proven}`
        : `relay: ${relay.url} — NOT USED YET: ${relay.problem ?? "it did not answer in time"}`;
    case "absent":
      return `relay: ${relay.url} — not running: ${relay.problem ?? "no relay answers"}. Fix: see the relay log, set PI_TASKS_RUNTIME to a node (>= 22.19) or bun, or set PI_TASKS_RELAY_URL to a relay you run`;
    case "foreign":
      // Bound means a pass reached it: it speaks volatile-v1 now.
      return bound ? `relay: ${relay.url} — in use: it speaks volatile-v1 now` : `relay: ${relay.url} — NOT USABLE: ${relay.problem}`;
  }
}

/** Where the relay runs beside what holds the default port, in words (a line of its own), or none. */
function besideLine(info: SessionInfo): string[] {
  const { beside } = info.relay;
  return beside === undefined
    ? []
    : [`  beside ${beside}: your own relay runs on ${info.relay.url} instead (every Pi of yours finds it there)`];
}

/** The running workers pi-tasks spawned with this home, and whether each stops with this Pi. */
export function workerLines(spawned: readonly SpawnedWorker[], self: number): string[] {
  const workers = spawned.filter((worker) => isAlive(worker.pid));
  if (workers.length === 0) return [];
  const lasts = (worker: SpawnedWorker) =>
    worker.owner === undefined
      ? "kept: runs until stopped"
      : worker.owner === self
        ? worker.pooled === true
          ? `a specialist kept warm: stops after ${age(specialistIdleMs)} without a task, or when this Pi exits`
          : "stops when this Pi exits"
        : `stops with the Pi (pid ${worker.owner}) that spawned it`;
  return [
    `workers spawned by pi-tasks (${workers.length}):`,
    ...workers.map((worker) => `  ${worker.session} — pid ${worker.pid}, ${lasts(worker)}; log ${worker.log}`),
  ];
}

function sessionLine(info: SessionInfo, endpoint: TaskEndpoint | undefined): string {
  const how = info.session.source === "generated" ? " (generated; set WOLFPACK_SESSION_NAME to choose one)" : "";
  const bound = endpoint === undefined ? "not registered yet" : `endpoint ${endpoint.relay}/${endpoint.id}`;
  return `session: ${info.session.name}${how} · ${bound}`;
}

function taskLine(task: TaskView, names: PeerNames, now: number, waiting: readonly WaitingMail[]): string {
  const peer = `${task.role === "origin" ? `to ${sideName(task, "target", names)}` : `from ${sideName(task, "origin", names)}`} [${signerShort(task.peer)}]`;
  const questions = openQuestions(task);
  const oldest = questions[0];
  const words = oldest === undefined ? taskWords(task) : `${taskWords(task)} (${age(now - oldest.occurredAt)})`;
  return `  ${shortId(task.taskId)}  ${peer} — ${words}${waitingWords(task, waiting)} — ${taskTitle(task, TASK_TITLE_CHARS)}`;
}

/** What a task's oldest unsent mail waits for, when something holds it (the board's short form). */
function waitingWords(task: TaskView, waiting: readonly WaitingMail[]): string {
  const held = waiting.find((mail) => mail.cause !== undefined);
  if (held === undefined) return "";
  return ` (waiting ${waitBrief(held.cause, peerWord(task))})`;
}

/** The other side of a task, in words. */
function peerWord(task: TaskView): string {
  return task.role === "origin" ? "the worker" : "the origin";
}

/** What a piece of a task's mail is, in words. */
const PURPOSE_WORDS: Readonly<Record<OutboxPurpose, string>> = {
  assignment: "the task",
  intent: "a message",
  terminal: "the result",
  fanout: "a message",
  receipt: "a delivery receipt",
  refusal: "a refusal",
};

/** A task's unsent mail in detail: each message and what it waits for. */
function waitingLines(task: TaskView, waiting: readonly WaitingMail[]): string[] {
  if (waiting.length === 0) return [];
  return [
    `  waiting to leave (${waiting.length}):`,
    ...waiting.map((mail) => `    ${PURPOSE_WORDS[mail.purpose]}: ${waitWords(mail.cause, peerWord(task))}`),
  ];
}

function identityLine(info: SessionInfo): string {
  return `identity: ${info.identity.fingerprint} · /tasks identity shows how to pair`;
}

/** Rejected mail by code, or nothing when none was rejected. */
export function rejectionLines(rejections: Readonly<Record<string, number>>): string[] {
  const entries = Object.entries(rejections).filter(([, count]) => count > 0);
  if (entries.length === 0) return [];
  const total = entries.reduce((sum, [, count]) => sum + count, 0);
  const parts = entries.sort(([a], [b]) => a.localeCompare(b)).map(([code, count]) => `${count} ${code}`);
  return [`rejected mail: ${total} (${parts.join(", ")}) — never shown to the model; archived as pi-tasks-rejected entries`];
}

/**
 * The board: header lines (with the problem the footer shows now, in its words, and the fix),
 * questions waiting for the person, then one line per task (newest last).
 */
export function boardLines(
  info: SessionInfo | undefined,
  endpoint: TaskEndpoint | undefined,
  tasks: readonly TaskView[],
  names: PeerNames,
  now: number,
  rejections: Readonly<Record<string, number>> = {},
  failure?: FooterFailure,
  waiting: (taskId: string) => readonly WaitingMail[] = () => [],
): string[] {
  if (info === undefined) return ["pi-tasks is starting…"];
  const active = tasks.filter((task) => task.status === "active").length;
  const questions = tasks.reduce((sum, task) => sum + openQuestions(task).length, 0);
  const counts = [
    `${tasks.length} task${tasks.length === 1 ? "" : "s"}`,
    `${active} active`,
    ...(questions > 0 ? [`${questions} question${questions === 1 ? "" : "s"} waiting for you`] : []),
  ];
  return [
    "pi-tasks",
    sessionLine(info, endpoint),
    identityLine(info),
    relayLine(info, endpoint !== undefined),
    ...besideLine(info),
    ...[sandboxLine(info.env, tasks)].filter((line): line is string => line !== undefined),
    ...failureLines(failure),
    ...workerLines(listSpawned(info.env), process.pid),
    ...rejectionLines(rejections),
    ...questionLines(waitingQuestions(tasks), now),
    ...grantRequestLines(waitingGrantRequests(tasks), now),
    counts.join(" · "),
    ...tasks.map((task) => taskLine(task, names, now, waiting(task.taskId))),
    ...(tasks.length > 0 ? ["Details: /tasks <task id>"] : []),
  ];
}

type TaskEvent = TaskView["events"][number];

/** The events whose insertion into the worker's Pi session its receipt confirmed (undefined at the worker: it sends them). */
function insertedEvents(task: TaskView): Set<string> | undefined {
  if (task.role !== "origin") return undefined;
  const inserted = new Set<string>();
  for (const event of task.events) {
    const receipt = event.payload as { eventId?: unknown; stage?: unknown; state?: unknown };
    if (event.type === "task.delivery_receipt" && receipt.stage === "pi_inserted" && receipt.state === "confirmed")
      inserted.add(String(receipt.eventId));
  }
  return inserted;
}

/** One event: how long ago, its type (a steer named as one, with whether it reached the worker's running turn), its text. */
function eventLine(event: TaskEvent, now: number, inserted: ReadonlySet<string> | undefined): string {
  const payload = event.payload as Record<string, unknown>;
  const text = typeof payload.message === "string" ? payload.message : typeof payload.summary === "string" ? payload.summary : "";
  const steer = event.type === "task.information" && payload.steer === true;
  const reached =
    inserted === undefined ? "" : inserted.has(event.eventId) ? " (inserted into the worker's running turn)" : " (not yet inserted)";
  const type = steer ? `steer${reached}` : event.type;
  return `  ${age(now - event.occurredAt).padStart(4)} ago  ${oneLine(type)}${text === "" ? "" : ` — ${inlineText(text, TASK_TITLE_CHARS)}`}`;
}

/** One task in detail (with what its unsent mail waits for). */
export function detailLines(task: TaskView, names: PeerNames, now: number, waiting: readonly WaitingMail[] = []): string[] {
  // In time order (events arrive from both sides; the store keeps them as they came).
  const visible = task.events.filter((event) => event.type !== "task.delivery_receipt").sort((a, b) => a.occurredAt - b.occurredAt);
  const inserted = insertedEvents(task);
  return [
    `task ${oneLine(task.taskId)}`,
    `  ${task.role === "origin" ? "you assigned it" : "assigned to you"}: ${taskWords(task)}`,
    `  from ${sideName(task, "origin", names)} to ${sideName(task, "target", names)}`,
    `  ${task.role === "origin" ? "worker" : "origin"} signer: ${signerWords(task.peer)}`,
    `  status ${task.status}; created ${age(now - task.createdAt)} ago; expires in ${age(task.expiresAt - now)}`,
    ...(task.activity === undefined ? [] : [`  worker activity: ${activityLine(task.activity, now)}`]),
    ...terminalLines(task).map((line) => `  ${line}`),
    "  delivery evidence:",
    ...evidenceLines(task).map((line) => `    ${line}`),
    ...waitingLines(task, waiting),
    `  events (${visible.length}):`,
    ...visible.map((event) => eventLine(event, now, inserted)),
  ];
}
