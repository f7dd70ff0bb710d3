/**
 * Questions for the human: every question waiting for this side's answer is announced to the
 * person at this Pi (a notification, once per question), listed by `/tasks` with its age, and can
 * be answered by them with `/tasks answer [question id] [text]` — in the interactive TUI or over
 * RPC a missing choice or text is asked with a dialog. The answer is bound to its question
 * (`inReplyTo`), exactly as if the model had sent it. The question is the peer's text: it is shown
 * quoted on one line (quote.ts), in notices, lists and dialog titles alike.
 */
import { openQuestions } from "../../src/core/attention.ts";
import type { TaskCore, TaskView } from "../../src/core/task-core.ts";
import { deferralCause, TaskError, toTaskError } from "../../src/protocol/errors.ts";
import { maxShownQuoteChars, shortIdChars } from "../../src/protocol/limits.ts";
import type { TaskEvent } from "../../src/protocol/schemas.ts";
import { age, signerShort, waitWords } from "./describe.ts";
import { awaitLeaving } from "./waits.ts";
import { inlineText, oneLine } from "./quote.ts";
import { distinctShortIds, matchId, shortId } from "./short-ids.ts";

export interface OpenQuestion {
  readonly task: TaskView;
  readonly question: TaskEvent;
}

/** Every question waiting for this side's answer, oldest first. */
export function waitingQuestions(tasks: readonly TaskView[]): OpenQuestion[] {
  return tasks
    .flatMap((task) => openQuestions(task).map((question) => ({ task, question })))
    .sort((a, b) => a.question.occurredAt - b.question.occurredAt);
}

/** A question as people read it: the peer's text, quoted and escaped on one line. */
function quote(text: unknown): string {
  return inlineText(text, maxShownQuoteChars);
}

/** The short form of an id the peer chose (question ids, task ids): one line, escaped. */
const short = shortId;

/** Whether `word` is a task's id as the board shows it (at least `shortIdChars` of it): not an answer's first word. */
function isTaskId(tasks: readonly TaskView[], word: string): boolean {
  return word.length >= shortIdChars && matchId(tasks, (task) => task.taskId, word).kind !== "none";
}

/** One line per waiting question (for `/tasks`). */
export function questionLines(questions: readonly OpenQuestion[], now: number): string[] {
  if (questions.length === 0) return [];
  return [
    `questions waiting for you (${questions.length}):`,
    ...questions.map(
      ({ task, question }) =>
        `  ${short(question.eventId)}  task ${short(task.taskId)} [${signerShort(task.peer)}], ${age(now - question.occurredAt)} ago: ${quote(question.payload.message)}`,
    ),
    "Answer: /tasks answer <question id> <text> (or let your agent answer)",
  ];
}

/** The notification a person gets when a question arrives. */
export function questionNotice({ task, question }: OpenQuestion): string {
  return `pi-tasks: question on task ${short(task.taskId)} [${signerShort(task.peer)}]: ${quote(question.payload.message)} — answer with /tasks answer ${short(question.eventId)} <text>, or let your agent answer.`;
}

/** Announces each newly waiting question once (the set remembers what was announced). */
export function announceQuestions(tasks: readonly TaskView[], announced: Set<string>, notify: (message: string) => void): void {
  for (const open of waitingQuestions(tasks)) {
    if (announced.has(open.question.eventId)) continue;
    announced.add(open.question.eventId);
    notify(questionNotice(open));
  }
}

export interface AnswerDialog {
  select(title: string, options: string[]): Promise<string | undefined>;
  input(title: string, placeholder: string): Promise<string | undefined>;
}

export interface AnswerDeps {
  readonly current: () => TaskCore;
  readonly run: <T>(operation: (core: TaskCore) => Promise<T>) => Promise<T>;
  /** A person to ask for a missing choice or text (undefined without a UI). */
  readonly dialog: AnswerDialog | undefined;
}

function usage(problem: string): TaskError {
  return new TaskError("CLI_USAGE", { message: `${problem} — usage: /tasks answer [<question id>] [<answer text>]` });
}

async function pickQuestion(
  questions: readonly OpenQuestion[],
  prefix: string | undefined,
  dialog: AnswerDialog | undefined,
): Promise<OpenQuestion | undefined> {
  if (prefix !== undefined) {
    const match = matchId(questions, (open) => open.question.eventId, prefix);
    if (match.kind === "one") return match.item;
    throw usage(
      match.kind === "none"
        ? `no waiting question ${oneLine(prefix)}`
        : `${oneLine(prefix)} names ${match.items.length} questions (${distinctShortIds(match.items.map((open) => open.question.eventId)).join(", ")}); give more of the id`,
    );
  }
  if (questions.length === 1) return questions[0];
  if (dialog === undefined) throw usage(`${questions.length} questions are waiting; name one`);
  const labels = questions.map((open) => `${short(open.question.eventId)}: ${quote(open.question.payload.message)}`);
  const chosen = await dialog.select("pi-tasks: which question do you answer?", labels);
  return chosen === undefined ? undefined : questions[labels.indexOf(chosen)];
}

/**
 * `/tasks answer [<question id>] [<text>]`: the person answers a waiting question. Returns the
 * lines to show (what was sent, or why nothing was).
 */
export async function answerCommand(args: readonly string[], deps: AnswerDeps): Promise<string[]> {
  const questions = waitingQuestions(deps.current().listTasks());
  if (questions.length === 0) return ["pi-tasks: no question is waiting for you"];
  const [first, ...rest] = args;
  // The first word is a question id when it names a waiting question (a short id, short-ids.ts); else it is the answer.
  const named = first !== undefined && matchId(questions, (open) => open.question.eventId, first).kind !== "none";
  // A task's id where the question's belongs is a mistake, never the start of an answer.
  if (!named && first !== undefined && rest.length > 0 && isTaskId(deps.current().listTasks(), first)) {
    throw new TaskError("NOT_A_QUESTION", {
      message: `${oneLine(first)} is a task's id, not a question's; the questions waiting for you: ${questions.map((open) => short(open.question.eventId)).join(", ")} (/tasks lists them). Nothing was sent.`,
      details: { id: first },
    });
  }
  const open = await pickQuestion(questions, named ? first : undefined, deps.dialog);
  if (open === undefined) return ["pi-tasks: no question chosen; nothing was sent"];
  const written = (named ? rest : args).join(" ").trim();
  const text = written !== "" ? written : await askAnswer(open.question, deps.dialog);
  if (text === "") return ["pi-tasks: no answer given; nothing was sent"];
  const { task, question } = open;
  const which = `question ${short(question.eventId)} on task ${short(task.taskId)}`;
  try {
    await deps.run((core) => core.message({ taskId: task.taskId, type: "answer", message: text, inReplyTo: question.eventId }));
  } catch (raw) {
    const error = toTaskError(raw);
    // Recorded, but not taken at once: a short wait (the worker proving its key again) usually ends it.
    const left = await awaitLeaving(deps, error, undefined);
    if (left?.state === "accepted") return [`pi-tasks: answered ${which}`];
    if (left?.state === "pending")
      return [`pi-tasks: your answer to ${which} is recorded and waits: ${waitWords(left.cause, "the worker")}.`];
    return [answerFailure(error, which)];
  }
  return [`pi-tasks: answered ${which}`];
}

/**
 * The person's answer from a dialog: a select among the question's choices (the suggested one
 * first), or free text for a question without choices. Empty when the dialog was dismissed.
 */
async function askAnswer(question: TaskEvent, dialog: AnswerDialog | undefined): Promise<string> {
  const title = `pi-tasks: your answer to ${quote(question.payload.message)}`;
  const choices = question.payload.choices;
  if (!Array.isArray(choices)) return (await dialog?.input(title, "answer"))?.trim() ?? "";
  const suggested = question.payload.defaultChoice;
  const ordered = (typeof suggested === "string" ? [suggested, ...choices.filter((choice) => choice !== suggested)] : choices).map(String);
  // Shown escaped (the asker wrote them), answered as written.
  const shown = ordered.map((choice) => oneLine(choice));
  const picked = await dialog?.select(title, shown);
  return picked === undefined ? "" : (ordered[shown.indexOf(picked)] ?? "");
}

/**
 * What became of an answer the relay did not accept: recorded and queued (the error names its
 * envelope), or not recorded at all (it failed before, e.g. the relay could not be reached to bind).
 */
function answerFailure(failure: TaskError, which: string): string {
  if (failure.details.delivery === "pending")
    return `pi-tasks: your answer to ${which} is recorded and waits: ${waitWords(deferralCause(failure.details), "the worker")} (${failure.code}).`;
  if (failure.details.delivery === "blocked")
    return `pi-tasks: your answer to ${which} was refused by the relay (${failure.code}: ${failure.message}); it will not be sent.`;
  return `pi-tasks: your answer to ${which} was not sent and nothing was recorded (${failure.code}: ${failure.message}); try again.`;
}
