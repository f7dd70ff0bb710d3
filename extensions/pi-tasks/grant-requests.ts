/**
 * Grant requests for the person (src/core/grant-requests.ts): a worker asked for more than its
 * grant. Only the person at the origin's Pi decides — the origin's model has no tool for it and is
 * never shown the request. Each request is announced once (a notification), listed by `/tasks`,
 * and decided with `/tasks grant [request id] [allow|deny] [note]`: in the TUI or over RPC a
 * dialog asks for what is left out. The request's reason is the worker's text: shown quoted.
 */
import { openGrantRequests } from "../../src/core/grant-requests.ts";
import type { TaskCore, TaskView } from "../../src/core/task-core.ts";
import { TaskError } from "../../src/protocol/errors.ts";
import { grantAdditions } from "../../src/protocol/grant.ts";
import { maxShownQuoteChars } from "../../src/protocol/limits.ts";
import type { GrantRequest, TaskEvent } from "../../src/protocol/schemas.ts";
import { age, signerShort } from "./describe.ts";
import type { AnswerDialog } from "./questions.ts";
import { inlineText, oneLine } from "./quote.ts";
import { distinctShortIds, matchId, shortId } from "./short-ids.ts";

export interface OpenGrantRequest {
  readonly task: TaskView;
  readonly request: TaskEvent;
}

/** The dialog's two answers. */
export const ALLOW_CHOICE = "Allow, for this task";
export const DENY_CHOICE = "Deny";

/** Every grant request waiting for this person's decision, oldest first. */
export function waitingGrantRequests(tasks: readonly TaskView[]): OpenGrantRequest[] {
  return tasks
    .flatMap((task) => openGrantRequests(task).map((request) => ({ task, request })))
    .sort((a, b) => a.request.occurredAt - b.request.occurredAt);
}

/** What a request asks for beyond the task's grant, in words (the worker's path names escaped). */
export function askedFor({ task, request }: OpenGrantRequest): string {
  const adds = grantAdditions(task.grant, request.payload.request as GrantRequest);
  return adds.length === 0 ? "nothing its grant lacks now" : adds.map((item) => oneLine(item)).join(", ");
}

const reasonOf = (request: TaskEvent) => inlineText(request.payload.reason, maxShownQuoteChars);

/** One line per waiting request (for `/tasks`). */
export function grantRequestLines(requests: readonly OpenGrantRequest[], now: number): string[] {
  if (requests.length === 0) return [];
  return [
    `grant requests waiting for your decision (${requests.length}):`,
    ...requests.map(
      (open) =>
        `  ${shortId(open.request.eventId)}  task ${shortId(open.task.taskId)} [${signerShort(open.task.peer)}], ${age(now - open.request.occurredAt)} ago: ${askedFor(open)} — ${reasonOf(open.request)}`,
    ),
    "Decide: /tasks grant <request id> allow|deny (only you can; your agent cannot)",
  ];
}

/** The notification a person gets when a request arrives. */
export function grantRequestNotice(open: OpenGrantRequest): string {
  return `pi-tasks: the worker of task ${shortId(open.task.taskId)} [${signerShort(open.task.peer)}] asks for more: ${askedFor(open)} — ${reasonOf(open.request)}. Decide with /tasks grant ${shortId(open.request.eventId)}.`;
}

/** Announces each newly waiting request once (the set remembers what was announced). */
export function announceGrantRequests(tasks: readonly TaskView[], announced: Set<string>, notify: (message: string) => void): void {
  for (const open of waitingGrantRequests(tasks)) {
    if (announced.has(open.request.eventId)) continue;
    announced.add(open.request.eventId);
    notify(grantRequestNotice(open));
  }
}

export interface GrantDeps {
  readonly current: () => TaskCore;
  readonly run: <T>(operation: (core: TaskCore) => Promise<T>) => Promise<T>;
  readonly dialog: AnswerDialog | undefined;
}

const USAGE = "/tasks grant [<request id>] [allow|deny] [<note>]";

function usage(problem: string): TaskError {
  return new TaskError("CLI_USAGE", { message: `${problem} — usage: ${USAGE}` });
}

async function pickRequest(
  requests: readonly OpenGrantRequest[],
  prefix: string | undefined,
  dialog: AnswerDialog | undefined,
): Promise<OpenGrantRequest | undefined> {
  if (prefix !== undefined) {
    const match = matchId(requests, (open) => open.request.eventId, prefix);
    if (match.kind === "one") return match.item;
    if (match.kind === "none") throw usage(`no waiting grant request ${oneLine(prefix)}`);
    throw usage(
      `${oneLine(prefix)} names ${match.items.length} requests (${distinctShortIds(match.items.map((open) => open.request.eventId)).join(", ")})`,
    );
  }
  if (requests.length === 1) return requests[0];
  if (dialog === undefined) throw usage(`${requests.length} grant requests are waiting; name one`);
  const labels = requests.map((open) => `${shortId(open.request.eventId)}: ${askedFor(open)}`);
  const chosen = await dialog.select("pi-tasks: which grant request do you decide?", labels);
  return chosen === undefined ? undefined : requests[labels.indexOf(chosen)];
}

/** allow / deny from the words, else from the dialog; undefined when the person chose nothing. */
async function pickDecision(
  word: string | undefined,
  open: OpenGrantRequest,
  dialog: AnswerDialog | undefined,
): Promise<boolean | undefined> {
  if (word === "allow" || word === "deny") return word === "allow";
  if (word !== undefined) throw usage(`say allow or deny, not ${oneLine(word)}`);
  if (dialog === undefined) throw usage("say allow or deny");
  const title = `pi-tasks: the worker of task ${shortId(open.task.taskId)} asks for ${askedFor(open)} — ${reasonOf(open.request)}`;
  const chosen = await dialog.select(title, [ALLOW_CHOICE, DENY_CHOICE]);
  return chosen === undefined ? undefined : chosen === ALLOW_CHOICE;
}

/** `/tasks grant`: the person decides a waiting grant request. Returns the lines to show. */
export async function grantCommand(args: readonly string[], deps: GrantDeps): Promise<string[]> {
  const requests = waitingGrantRequests(deps.current().listTasks());
  if (requests.length === 0) return ["pi-tasks: no grant request is waiting for you"];
  const [first, ...rest] = args;
  const named = first !== undefined && first !== "allow" && first !== "deny";
  const open = await pickRequest(requests, named ? first : undefined, deps.dialog);
  if (open === undefined) return ["pi-tasks: no request chosen; nothing was decided"];
  const [word, ...noteWords] = named ? rest : args;
  const approved = await pickDecision(word, open, deps.dialog);
  if (approved === undefined) return ["pi-tasks: no decision chosen; nothing was decided"];
  const note = noteWords.join(" ").trim();
  const decided = await deps.run((core) =>
    core.decideGrant({ taskId: open.task.taskId, request: open.request.eventId, approved, ...(note === "" ? {} : { note }) }),
  );
  const which = `the request ${shortId(open.request.eventId)} of task ${shortId(open.task.taskId)}`;
  return approved
    ? [`pi-tasks: allowed ${which} for this task; its grant is now ${JSON.stringify(decided.grant ?? {})}`]
    : [`pi-tasks: denied ${which}; its grant is unchanged`];
}
