/**
 * What the person reads when they quit Pi with work open: the tasks still open, the questions and
 * results waiting for them, and what becomes of each — instead of Pi ending without a word.
 *
 * Where it goes: Pi 1.6's interactive quit (Ctrl+D, Ctrl+C twice, /quit) stops its TUI — the
 * terminal back in its normal mode — before it emits `session_shutdown`, then prints its own "To
 * resume this session" line (interactive-mode.js `shutdown`). Lines written to stderr in between
 * stand in the shell after Pi's last frame, before that line. Only the TUI gets them
 * (`ctx.mode === "tui"`); in RPC, print and json modes the program running Pi owns the output.
 */
import { openQuestions } from "../../src/core/attention.ts";
import type { TaskView } from "../../src/core/task-core.ts";
import { maxQuitNoticeTasks } from "../../src/protocol/limits.ts";
import { awaitsAcknowledgement, TASK_TITLE_CHARS, taskTitle, taskWords } from "./describe.ts";
import { plural } from "./footer.ts";
import { RESUME_VARIABLE } from "./resume.ts";
import { shortId } from "./short-ids.ts";

/** The tasks a quit leaves open: work under way, questions unanswered, results not acknowledged. */
export function openAtQuit(tasks: readonly TaskView[]): TaskView[] {
  return tasks.filter((task) => task.status === "active" || awaitsAcknowledgement(task));
}

/** What becomes of the open tasks, in the order the person acts on it. */
function consequences(open: readonly TaskView[], resumeOn: boolean, stoppedWorkers: number): string[] {
  const delegated = open.filter((task) => task.role === "origin" && task.status === "active").length;
  const working = open.filter((task) => task.role === "worker").length;
  const lines: string[] = [];
  if (stoppedWorkers > 0) lines.push(`${plural(stoppedWorkers, "worker")} this Pi started (not kept) stopped with it.`);
  if (delegated > 0) {
    const resume = resumeOn
      ? "resume this session (pi --continue here)"
      : `resume this session with ${RESUME_VARIABLE}=1 set (${RESUME_VARIABLE}=1 pi --continue here)`;
    lines.push(`Tasks you delegated live only in this Pi: ${resume} to take back those whose workers still hold them.`);
  }
  if (working > 0) lines.push("Tasks this session worked on: their origins see it gone and may reassign them.");
  return lines;
}

/**
 * The notice for a quit with `open` tasks (none: nothing to say). `stoppedWorkers` counts the
 * workers stopped with this Pi; `resumeOn` is whether this Pi resumes its delegations.
 */
export function quitNotice(session: string, open: readonly TaskView[], stoppedWorkers: number, resumeOn: boolean): string | undefined {
  if (open.length === 0) return undefined;
  const questions = open.reduce((sum, task) => sum + openQuestions(task).length, 0);
  const results = open.filter(awaitsAcknowledgement).length;
  const waiting = [
    ...(questions > 0 ? [`${plural(questions, "question")} unanswered`] : []),
    ...(results > 0 ? [`${plural(results, "result")} not acknowledged`] : []),
  ];
  const head = `pi-tasks: ${session} quit with ${plural(open.length, "task")} open${waiting.length > 0 ? ` (${waiting.join(", ")})` : ""}:`;
  const shown = open
    .slice(0, maxQuitNoticeTasks)
    .map((task) => `  ${shortId(task.taskId)}  ${taskWords(task)} — ${taskTitle(task, TASK_TITLE_CHARS)}`);
  const more = open.length > maxQuitNoticeTasks ? [`  … and ${open.length - maxQuitNoticeTasks} more`] : [];
  return `${[head, ...shown, ...more, ...consequences(open, resumeOn, stoppedWorkers)].join("\n")}\n`;
}
