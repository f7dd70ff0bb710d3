/**
 * Workflows in one call (issue 39): `agent_task_workflow {mode, steps}` runs several tasks in the
 * extension, without a turn of the origin's model between them. A workflow is made of lanes; the
 * steps of one lane run as a chain, the lanes side by side:
 * - `all`: every step is a lane of its own (a fan-out: every step is sent at once);
 * - `chain`: one lane of every step;
 * - `lanes`: the steps naming the same `lane` form one chain (in the order given); a step naming
 *   none is a lane of its own.
 * In a lane, each step is sent when the one before completed, its task text followed by the previous
 * step's result (its summary and changed files); a step that does not complete ends its lane.
 * Every step is an ordinary task — signed, grant-bounded, on `/tasks`, its questions reaching the
 * person and the model — sent with `quietResult`, so its outcome is shown without a wake; when every
 * lane ended, the model is woken once with every step's outcome (`WORKFLOW_MESSAGE`).
 * A workflow is cancelled as a whole (`cancel`: `agent_task_cancel` or `/tasks cancel` with its id):
 * its running steps are cancelled, the steps not yet sent never are, and no wake follows.
 * Running workflows live in this Pi's RAM and are checked after every pass of the Pi run (`nudge`:
 * a step's outcome just came in) and every `workflowCheckMs` while any runs.
 */
import type { ExtensionToolContext } from "@earendil-works/pi-coding-agent";
import { customAlphabet } from "nanoid";
import type { CancelResult } from "../../src/core/results.ts";
import type { TaskView } from "../../src/core/task-core.ts";
import { formatEndpoint } from "../../src/protocol/endpoint.ts";
import { TaskError, toTaskError } from "../../src/protocol/errors.ts";
import { isTerminalStatus } from "../../src/protocol/events.ts";
import { workflowCheckMs } from "../../src/protocol/limits.ts";
import type { WorkflowParams } from "../../src/protocol/schemas.ts";
import { delegate as delegateTask } from "./delegate.ts";
import { inlineText, oneLine } from "./quote.ts";
import { matchId, WORKFLOW_ID_PREFIX } from "./short-ids.ts";
import type { ToolDeps } from "./tools/shared.ts";

/** The custom message that wakes the origin's model once a workflow ended. */
export const WORKFLOW_MESSAGE = "pi-tasks-workflow";
/** Characters of a step's result summary in the workflow's closing message. */
const SHOWN_SUMMARY_CHARS = 400;
/** Characters of the random part of a workflow id. */
const WORKFLOW_ID_CHARS = 8;
const workflowSuffix = customAlphabet("0123456789abcdefghijklmnopqrstuvwxyz", WORKFLOW_ID_CHARS);

type Step = WorkflowParams["steps"][number];

export interface RunningStep {
  readonly step: Step;
  /** The lane (chain) this step runs in. */
  readonly lane: string;
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

/** A step's state as the lanes read it: sent and where it stands, never sent, or not started yet. */
export type StepState = "unsent" | "failed" | "running" | "completed" | "ended";

/** Sends of the next steps (each with the step whose result it carries), and whether the workflow ended. */
export interface Advance {
  readonly send: readonly { readonly index: number; readonly previous?: number }[];
  readonly ended: boolean;
}

export interface WorkflowCancel {
  readonly workflow: Workflow;
  readonly cancelled: readonly CancelResult[];
  /** Steps whose cancel failed, each with why (their task goes on). */
  readonly failed: readonly { readonly taskId: string; readonly error: string }[];
}

export interface WorkflowRunner {
  /** Starts a workflow: sends the first step of every lane. */
  start(params: WorkflowParams, ctx: ExtensionToolContext | undefined): Promise<Workflow>;
  /** The running workflow `id` names (a full id or a unique prefix); throws UNKNOWN_WORKFLOW. */
  find(id: string): Workflow;
  /** Cancels a running workflow as a whole: no step is sent any more, the running ones are cancelled, no wake. */
  cancel(id: string, reason: string | undefined): Promise<WorkflowCancel>;
  /** Looks at the running workflows now (after a pass took a step's outcome in), besides every `workflowCheckMs`. */
  nudge(): void;
  /** The workflows running now. */
  list(): readonly Workflow[];
  /** One line per step of a workflow: where it went and how it stands. */
  describe(workflow: Workflow): string[];
  /** A running workflow on one line: its id, mode and how many steps stand where. */
  summary(workflow: Workflow): string;
  stop(): void;
}

/** Each step's lane; refuses a `lane` outside mode `lanes` (INVALID_WORKFLOW), changing nothing. */
export function lanesOf(params: WorkflowParams): string[] {
  const stray = params.steps.findIndex((step) => step.lane !== undefined);
  if (params.mode !== "lanes" && stray >= 0)
    throw new TaskError("INVALID_WORKFLOW", {
      message: `step ${stray + 1} names a lane, but lanes are for mode "lanes" (this workflow is "${params.mode}"); nothing was sent`,
      details: { step: stray + 1, mode: params.mode },
    });
  return params.steps.map((step, index) => {
    if (params.mode === "chain") return "chain";
    if (params.mode === "lanes" && step.lane !== undefined) return `lane ${step.lane}`;
    return `step ${index + 1}`;
  });
}

/**
 * What to do next in each lane, from its steps' states: its first step when none started; the next
 * one when the last started completed; nothing while that one runs. A lane whose last started step
 * did not complete (or was its last) has ended; the workflow ends when every lane has.
 */
export function advanceOf(steps: readonly RunningStep[], stateOf: (index: number) => StepState): Advance {
  const send: { index: number; previous?: number }[] = [];
  let running = false;
  for (const lane of new Set(steps.map((step) => step.lane))) {
    const members = steps.flatMap((step, index) => (step.lane === lane ? [index] : []));
    const started = members.filter((index) => stateOf(index) !== "unsent");
    const last = started.at(-1);
    if (last === undefined) {
      send.push({ index: members[0]! });
      continue;
    }
    const state = stateOf(last);
    const next = members[started.length];
    if (state === "running") running = true;
    else if (state === "completed" && next !== undefined) send.push({ index: next, previous: last });
  }
  return { send, ended: send.length === 0 && !running };
}

const taskOf = (deps: ToolDeps, taskId: string | undefined): TaskView | undefined => {
  if (taskId === undefined) return undefined;
  try {
    return deps.current().findTask(taskId);
  } catch {
    return undefined;
  }
};

/** A step's state: a task no longer held has ended (nothing more will be heard of it). */
function stateOf(deps: ToolDeps, step: RunningStep): StepState {
  if (step.notSent !== undefined) return "failed";
  if (step.taskId === undefined) return "unsent";
  const status = taskOf(deps, step.taskId)?.status;
  if (status === undefined) return "ended";
  if (status === "completed") return "completed";
  return isTerminalStatus(status) ? "ended" : "running";
}

/** A step's result, in words: its status, and its summary (the worker's text, quoted on one line) and changed files. */
function resultWords(task: TaskView | undefined): string {
  if (task === undefined) return "unknown (the task is no longer held)";
  const terminal = [...task.events].reverse().find((event) => event.type === `task.${task.status}`);
  const summary = typeof terminal?.payload.summary === "string" ? ` — ${inlineText(terminal.payload.summary, SHOWN_SUMMARY_CHARS)}` : "";
  const changed = (terminal?.payload.result as { changedFiles?: unknown } | undefined)?.changedFiles;
  const files = Array.isArray(changed) && changed.length > 0 ? ` (changed: ${changed.map(String).join(", ")})` : "";
  return `${task.status}${summary}${files}`;
}

/** The next step's task in a lane: its own text, then what the step before it reported. */
function chained(step: Step, previous: TaskView | undefined): Step {
  return { ...step, task: `${step.task}\n\nThe previous step's result: ${resultWords(previous)}` };
}

/** One line per step: where it went and how it stands. */
function stepLines(workflow: Workflow, deps: ToolDeps): string[] {
  return workflow.steps.map((running, index) => {
    const to = typeof running.step.to === "string" ? running.step.to : formatEndpoint(running.step.to);
    const lane = workflow.mode === "lanes" && running.step.lane !== undefined ? ` (lane ${oneLine(running.step.lane)})` : "";
    const head = `${index + 1}. ${to}${lane}`;
    if (running.notSent !== undefined) return `${head} — not sent: ${running.notSent}`;
    if (running.taskId === undefined) return `${head} — not run (an earlier step of its lane did not complete)`;
    return `${head} — task ${running.taskId}: ${resultWords(taskOf(deps, running.taskId))}`;
  });
}

function closing(workflow: Workflow, deps: ToolDeps): string {
  return [
    "## workflow ended",
    `- workflow: ${workflow.id} (${workflow.mode}, ${workflow.steps.length} steps)`,
    ...stepLines(workflow, deps).map((line) => `- ${line}`),
    "",
    "Verify each result yourself, apply what changed files with agent_task_apply, and acknowledge each completed step with agent_task_ack.",
  ].join("\n");
}

/** Cancels a workflow's running steps (it is already out of the running ones: nothing more is sent). */
async function cancelSteps(deps: ToolDeps, workflow: Workflow, reason: string): Promise<WorkflowCancel> {
  const cancelled: CancelResult[] = [];
  const failed: { taskId: string; error: string }[] = [];
  for (const step of workflow.steps) {
    const taskId = step.taskId;
    if (taskId === undefined || stateOf(deps, step) !== "running") continue;
    await deps
      .run((core) => core.cancel({ taskId, reason }))
      .then(
        (result) => void cancelled.push(result),
        (error: unknown) => void failed.push({ taskId, error: `${toTaskError(error).code}: ${toTaskError(error).message}` }),
      );
  }
  return { workflow, cancelled, failed };
}

/** A workflow on one line: its id, mode and how many steps stand where. */
function summaryOf(deps: ToolDeps, workflow: Workflow): string {
  const counts = new Map<StepState, number>();
  for (const step of workflow.steps) {
    const state = stateOf(deps, step);
    counts.set(state, (counts.get(state) ?? 0) + 1);
  }
  const parts = [...counts].map(([state, count]) => `${count} ${state === "unsent" ? "waiting" : state}`);
  return `workflow ${workflow.id} (${workflow.mode}, ${workflow.steps.length} steps: ${parts.join(", ")})`;
}

/** A workflow not started yet: its id, and each step in its lane (INVALID_WORKFLOW for a stray lane). */
function newWorkflow(params: WorkflowParams): Workflow {
  const lanes = lanesOf(params);
  return {
    id: `${WORKFLOW_ID_PREFIX}${workflowSuffix()}`,
    mode: params.mode,
    steps: params.steps.map((step, index) => ({ step, lane: lanes[index]! })),
    ended: false,
  };
}

/** Sends step `index` (after `previous`, whose result it carries): its task id, or why it was not sent. */
async function sendStep(
  deps: ToolDeps,
  delegate: (step: Step) => Promise<{ created: { taskId: string } }>,
  workflow: Workflow,
  index: number,
  previous: number | undefined,
): Promise<void> {
  const target = workflow.steps[index]!;
  const step = previous === undefined ? target.step : chained(target.step, taskOf(deps, workflow.steps[previous]!.taskId));
  try {
    target.taskId = (await delegate(step)).created.taskId;
  } catch (error) {
    const failure = toTaskError(error);
    // The task exists (its assignment waits): the step runs; otherwise it was not sent.
    if (typeof failure.details.taskId === "string") target.taskId = failure.details.taskId;
    else target.notSent = `${failure.code}: ${failure.message}`;
  }
}

/** The running workflow `id` names: a full id or a unique prefix; else UNKNOWN_WORKFLOW. */
function findWorkflow(running: ReadonlySet<Workflow>, id: string): Workflow {
  const match = matchId([...running], (workflow) => workflow.id, id);
  if (match.kind === "one") return match.item;
  throw new TaskError("UNKNOWN_WORKFLOW", {
    message:
      match.kind === "many"
        ? `${oneLine(id)} names ${match.items.length} running workflows; give more of the id`
        : `no running workflow ${oneLine(id)} in this Pi (an ended one has nothing left to cancel)`,
    details: { workflowId: id },
  });
}

export interface WorkflowRunnerOptions {
  /** Sends one step (the extension's `delegate`; a test's stand-in). */
  readonly delegate?: typeof delegateTask;
}

export function createWorkflowRunner(deps: ToolDeps, wake: (content: string) => void, options: WorkflowRunnerOptions = {}): WorkflowRunner {
  const delegate = options.delegate ?? delegateTask;
  const running = new Set<Workflow>();
  let timer: ReturnType<typeof setInterval> | undefined;
  const contexts = new WeakMap<Workflow, ExtensionToolContext | undefined>();

  const send = async (workflow: Workflow, index: number, previous: number | undefined) => {
    await sendStep(deps, (step) => delegate(deps, step, { ctx: contexts.get(workflow), quietResult: true }), workflow, index, previous);
    // Cancelled while this step was on its way: its task is cancelled as the others were.
    if (workflow.ended && workflow.steps[index]!.taskId !== undefined)
      await cancelSteps(deps, workflow, `workflow ${workflow.id} cancelled`);
  };

  /** Advances one workflow: the next step of each lane, or its end (one wake). */
  async function advance(workflow: Workflow): Promise<void> {
    const next = advanceOf(workflow.steps, (index) => stateOf(deps, workflow.steps[index]!));
    // The next step of each lane, side by side (a specialist is claimed by one step only).
    await Promise.all(next.send.map(({ index, previous }) => send(workflow, index, previous)));
    if (!next.ended || workflow.ended) return;
    workflow.ended = true;
    running.delete(workflow);
    wake(closing(workflow, deps));
  }

  let checking = false;
  const check = async () => {
    // One check at a time: a lane's next step is sent once.
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

  const find = (id: string) => findWorkflow(running, id);

  return {
    async start(params, ctx) {
      const workflow = newWorkflow(params);
      contexts.set(workflow, ctx);
      const first = advanceOf(workflow.steps, () => "unsent");
      // The first step of every lane at once: specialists are started side by side, within the spawn cap.
      await Promise.all(first.send.map(({ index }) => send(workflow, index, undefined)));
      // Checked only once its first steps are out (a check meanwhile would send them again).
      running.add(workflow);
      if (timer === undefined) {
        timer = setInterval(() => void check(), workflowCheckMs);
        timer.unref?.();
      }
      return workflow;
    },
    find,
    async cancel(id, reason) {
      const workflow = find(id);
      workflow.ended = true;
      running.delete(workflow);
      return cancelSteps(deps, workflow, reason ?? `workflow ${workflow.id} cancelled`);
    },
    nudge: () => {
      if (running.size > 0) void check();
    },
    list: () => [...running],
    describe: (workflow) => stepLines(workflow, deps),
    summary: (workflow) => summaryOf(deps, workflow),
    stop() {
      running.clear();
      if (timer !== undefined) clearInterval(timer);
      timer = undefined;
    },
  };
}
