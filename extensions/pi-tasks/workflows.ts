/**
 * Workflows in one call (issue 39): `agent_task_workflow {mode, steps}` runs several tasks in the
 * extension, without a turn of the origin's model between them:
 * - `all`: every step is sent at once (a fan-out, within the fan-out cap);
 * - `chain`: each step is sent when the one before completed, its task text followed by the previous
 *   step's result (its summary and changed files); a step that does not complete ends the chain.
 * Every step is an ordinary task — signed, grant-bounded, on `/tasks`, its questions reaching the
 * person and the model — sent with `quietResult`, so its outcome is shown without a wake; when the
 * workflow ends, the model is woken once with every step's outcome (`WORKFLOW_MESSAGE`).
 * Running workflows live in this Pi's RAM and are checked every `workflowCheckMs` while any runs.
 */
import type { ExtensionToolContext } from "@earendil-works/pi-coding-agent";
import type { TaskView } from "../../src/core/task-core.ts";
import { formatEndpoint } from "../../src/protocol/endpoint.ts";
import { toTaskError } from "../../src/protocol/errors.ts";
import { isTerminalStatus } from "../../src/protocol/events.ts";
import { workflowCheckMs } from "../../src/protocol/limits.ts";
import type { WorkflowParams } from "../../src/protocol/schemas.ts";
import { delegate } from "./delegate.ts";
import { inlineText } from "./quote.ts";
import type { ToolDeps } from "./tools/shared.ts";

/** The custom message that wakes the origin's model once a workflow ended. */
export const WORKFLOW_MESSAGE = "pi-tasks-workflow";
/** Characters of a step's result summary in the workflow's closing message. */
const SHOWN_SUMMARY_CHARS = 400;

type Step = WorkflowParams["steps"][number];

interface RunningStep {
  readonly step: Step;
  taskId?: string;
  /** Why it was never sent (an error), when it was not. */
  notSent?: string;
}

export interface Workflow {
  readonly id: string;
  readonly mode: WorkflowParams["mode"];
  readonly steps: RunningStep[];
  ended: boolean;
}

export interface WorkflowRunner {
  /** Starts a workflow: sends its first step (chain) or every step (all). */
  start(params: WorkflowParams, ctx: ExtensionToolContext | undefined): Promise<Workflow>;
  stop(): void;
}

const taskOf = (deps: ToolDeps, taskId: string | undefined): TaskView | undefined => {
  if (taskId === undefined) return undefined;
  try {
    return deps.current().findTask(taskId);
  } catch {
    return undefined;
  }
};

/** A step's result, in words: its status, and its summary (the worker's text, quoted on one line) and changed files. */
function resultWords(task: TaskView | undefined): string {
  if (task === undefined) return "unknown (the task is no longer held)";
  const terminal = [...task.events].reverse().find((event) => event.type === `task.${task.status}`);
  const summary = typeof terminal?.payload.summary === "string" ? ` — ${inlineText(terminal.payload.summary, SHOWN_SUMMARY_CHARS)}` : "";
  const changed = (terminal?.payload.result as { changedFiles?: unknown } | undefined)?.changedFiles;
  const files = Array.isArray(changed) && changed.length > 0 ? ` (changed: ${changed.map(String).join(", ")})` : "";
  return `${task.status}${summary}${files}`;
}

/** The next chain step's task: its own text, then what the step before it reported. */
function chained(step: Step, previous: TaskView | undefined): Step {
  return { ...step, task: `${step.task}\n\nThe previous step's result: ${resultWords(previous)}` };
}

function closing(workflow: Workflow, deps: ToolDeps): string {
  const lines = workflow.steps.map((running, index) => {
    const head = `${index + 1}. ${typeof running.step.to === "string" ? running.step.to : formatEndpoint(running.step.to)}`;
    if (running.notSent !== undefined) return `${head} — not sent: ${running.notSent}`;
    if (running.taskId === undefined) return `${head} — not run (an earlier step did not complete)`;
    return `${head} — task ${running.taskId}: ${resultWords(taskOf(deps, running.taskId))}`;
  });
  return [
    "## workflow ended",
    `- workflow: ${workflow.id} (${workflow.mode}, ${workflow.steps.length} steps)`,
    ...lines.map((line) => `- ${line}`),
    "",
    "Verify each result yourself, apply what changed files with agent_task_apply, and acknowledge each completed step with agent_task_ack.",
  ].join("\n");
}

export function createWorkflowRunner(deps: ToolDeps, wake: (content: string) => void): WorkflowRunner {
  const running = new Set<Workflow>();
  let timer: ReturnType<typeof setInterval> | undefined;
  const contexts = new WeakMap<Workflow, ExtensionToolContext | undefined>();

  async function send(workflow: Workflow, index: number, step: Step): Promise<void> {
    const target = workflow.steps[index]!;
    try {
      target.taskId = (await delegate(deps, step, { ctx: contexts.get(workflow), quietResult: true })).created.taskId;
    } catch (error) {
      const failure = toTaskError(error);
      // The task exists (its assignment waits): the step runs; otherwise it was not sent.
      if (typeof failure.details.taskId === "string") target.taskId = failure.details.taskId;
      else target.notSent = `${failure.code}: ${failure.message}`;
    }
  }

  /** Advances one workflow: the next chain step, or its end. */
  async function advance(workflow: Workflow): Promise<void> {
    const states = workflow.steps.map((step) => (step.notSent !== undefined ? "failed" : taskOf(deps, step.taskId)?.status));
    if (workflow.mode === "chain") {
      const last = workflow.steps.findLastIndex((step) => step.taskId !== undefined || step.notSent !== undefined);
      const status = states[last];
      if (status === "completed" && last + 1 < workflow.steps.length) {
        await send(workflow, last + 1, chained(workflow.steps[last + 1]!.step, taskOf(deps, workflow.steps[last]!.taskId)));
        return;
      }
      if (status === undefined || status === "active") return;
    } else if (states.some((status) => status === undefined || !isTerminalStatus(status))) return;
    workflow.ended = true;
    running.delete(workflow);
    wake(closing(workflow, deps));
  }

  let checking = false;
  const check = async () => {
    // One check at a time: a chain's next step is sent once.
    if (checking) return;
    checking = true;
    try {
      for (const workflow of [...running]) await advance(workflow).catch(() => undefined);
    } finally {
      checking = false;
    }
    if (running.size === 0 && timer !== undefined) {
      clearInterval(timer);
      timer = undefined;
    }
  };

  return {
    async start(params, ctx) {
      const workflow: Workflow = {
        id: crypto.randomUUID(),
        mode: params.mode,
        steps: params.steps.map((step) => ({ step })),
        ended: false,
      };
      contexts.set(workflow, ctx);
      const first = params.mode === "chain" ? params.steps.slice(0, 1) : params.steps;
      for (const [index, step] of first.entries()) await send(workflow, index, step);
      running.add(workflow);
      if (timer === undefined) {
        timer = setInterval(() => void check(), workflowCheckMs);
        timer.unref?.();
      }
      return workflow;
    },
    stop() {
      running.clear();
      if (timer !== undefined) clearInterval(timer);
      timer = undefined;
    },
  };
}
