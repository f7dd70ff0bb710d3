/**
 * A session's model, drawn from the seed: on its turn it picks one tool call the way Pi's model
 * could — as an origin: send, answer, cancel, acknowledge, ask for a revision, reassign an orphan;
 * as a worker: ask (with and without choices), report progress, finish (completed or failed),
 * delegate a part onward asking for a grant of its own (a chain). The
 * call is started, not awaited: the runner moves time while it runs.
 */
import type { TaskCore, TaskView } from "../../src/core/task-core.ts";
import { TaskError } from "../../src/protocol/errors.ts";
import type { Grant, TaskEndpoint } from "../../src/protocol/schemas.ts";
import type { SimRandom } from "./random.ts";
import type { SimSession, World } from "./world.ts";

/** A task the model sends lasts this long at most, in virtual ms (short, so runs reach its end). */
export const SIM_TASK_TIMEOUT_MAX_MS = 300_000;
export const SIM_TASK_TIMEOUT_MIN_MS = 30_000;

/** One tool call begun: what it is (for the trace) and its run. */
export interface ModelCall {
  readonly label: string;
  readonly run: Promise<unknown>;
}

type Choice = () => ModelCall;

/** The core's tool calls as the extension makes them: through the Pi's run (relay loss recovers). */
type Calls = Pick<TaskCore, "createTask" | "message" | "done" | "cancel" | "acknowledge" | "requestRevision" | "reassignTask">;

function useOf(session: SimSession): Calls {
  const pi = session.pi.configured;
  return {
    createTask: (input, options) => pi.run((core) => core.createTask(input, options)),
    message: (input, options) => pi.run((core) => core.message(input, options)),
    done: (input, options) => pi.run((core) => core.done(input, options)),
    cancel: (input, options) => pi.run((core) => core.cancel(input, options)),
    acknowledge: (input, options) => pi.run((core) => core.acknowledge(input, options)),
    requestRevision: (input, options) => pi.run((core) => core.requestRevision(input, options)),
    reassignTask: (taskId, options) => pi.run((core) => core.reassignTask(taskId, options)),
  };
}

const isTerminal = (task: TaskView) => task.status !== "active";
const questionsOpen = (task: TaskView) => {
  const answered = new Set(task.events.flatMap((event) => (event.type === "task.answer" ? [event.payload.inReplyTo] : [])));
  return task.events.filter((event) => event.type === "task.question" && !answered.has(event.eventId));
};

function originChoices(world: World, session: SimSession, tasks: readonly TaskView[]): Choice[] {
  const { random } = session;
  const core = useOf(session);
  const mine = tasks.filter((task) => task.role === "origin");
  const choices: Choice[] = [];
  // The model names a session, as Pi's does: the relay says which endpoint holds that name now —
  // after a crash, maybe a stranger's.
  const names = world.sessions.filter((other) => other !== session).map((other) => other.name);
  if (names.length > 0 && !session.down) {
    choices.push(() => {
      const name = random.pick(names);
      const timeoutMs = random.between(SIM_TASK_TIMEOUT_MIN_MS, SIM_TASK_TIMEOUT_MAX_MS);
      const text = `work ${random.below(1000)}`;
      const grant = random.chance(0.5) ? grantOf(random) : undefined;
      const label = `send to ${name}${grant === undefined ? "" : ` granting ${JSON.stringify(grant)}`}`;
      return { label, run: sendToName(session, name, text, timeoutMs, grant) };
    });
  }
  for (const task of mine) {
    const { taskId } = task;
    if (!isTerminal(task)) choices.push(() => ({ label: `cancel ${taskId}`, run: core.cancel({ taskId, reason: "changed my mind" }) }));
    if (isTerminal(task)) choices.push(() => ({ label: `ack ${taskId}`, run: core.acknowledge({ taskId }) }));
    if (task.status === "completed")
      choices.push(() => ({ label: `revise ${taskId}`, run: core.requestRevision({ taskId, reason: "once more" }) }));
    if (task.attention === "orphaned") choices.push(() => reassign(world, session, taskId));
    for (const question of questionsOpen(task)) {
      const offered = (question.payload as { choices?: string[] }).choices;
      const message = offered === undefined ? "go on" : random.pick(offered);
      choices.push(() => ({
        label: `answer ${taskId} ${question.eventId}`,
        run: core.message({ taskId, type: "answer", inReplyTo: question.eventId, message }),
      }));
    }
  }
  return choices;
}

function workerChoices(world: World, session: SimSession, tasks: readonly TaskView[]): Choice[] {
  const { random } = session;
  const names = world.sessions.filter((other) => other !== session).map((other) => other.name);
  const core = useOf(session);
  const choices: Choice[] = [];
  for (const task of tasks.filter((each) => each.role === "worker" && !isTerminal(each))) {
    const { taskId } = task;
    choices.push(() => {
      const withChoices = random.chance(0.5);
      const choicesOf = withChoices ? { choices: ["yes", "no"] } : {};
      return {
        label: `ask ${taskId}${withChoices ? " (choices)" : ""}`,
        run: core.message({ taskId, type: "question", message: "which way?", ...choicesOf }),
      };
    });
    choices.push(() => ({
      label: `progress ${taskId}`,
      run: core.message({ taskId, type: "progress", message: "half way", percent: random.below(101) }),
    }));
    choices.push(() => finish(session, taskId));
    if (names.length > 0) choices.push(() => delegate(session, random.pick(names)));
  }
  return choices;
}

/** A worker delegates part of its task onward, asking for a grant of its own (the core narrows it to what its task has). */
function delegate(session: SimSession, name: string): ModelCall {
  const grant = grantOf(session.random);
  return {
    label: `delegate to ${name} asking ${JSON.stringify(grant)}`,
    run: sendToName(session, name, "a part of it", SIM_TASK_TIMEOUT_MIN_MS, grant),
  };
}

/** What a model may grant: a few tools, bash or not, scopes under the project, turn and time budgets. */
const GRANT_TOOLS = ["read", "edit", "bash", "grep"];
const GRANT_SCOPES = ["src", "docs", "src/core"];

/** A grant drawn from the seed: each field present or not. */
function grantOf(random: SimRandom): Grant {
  const some = (items: readonly string[]) => items.filter(() => random.chance(0.5));
  const fields: Grant = {
    ...(random.chance(0.5) ? { tools: some(GRANT_TOOLS) } : {}),
    ...(random.chance(0.5) ? { bash: random.chance(0.5) } : {}),
    ...(random.chance(0.5) ? { network: random.chance(0.5) } : {}),
    ...(random.chance(0.5) ? { read: some(GRANT_SCOPES) } : {}),
    ...(random.chance(0.5) ? { write: some(GRANT_SCOPES) } : {}),
    ...(random.chance(0.5) ? { maxTurns: random.between(1, 20) } : {}),
    ...(random.chance(0.5) ? { maxWallMs: random.between(10_000, SIM_TASK_TIMEOUT_MAX_MS) } : {}),
  };
  return fields;
}

/**
 * A task sent to whoever holds `name` at the relay now (TARGET_NOT_REGISTERED when nobody does) —
 * delegated from the one task this session works on, if it works on one (the core's own choice).
 */
async function sendToName(session: SimSession, name: string, task: string, timeoutMs: number, grant?: Grant): Promise<unknown> {
  const status = await session.pi.configured.session.transport.sessionStatus(name);
  const to = status.taskEndpoint as TaskEndpoint | undefined;
  if (to === undefined) throw new TaskError("TARGET_NOT_REGISTERED", { details: { session: name } });
  return useOf(session).createTask({ to, task, timeoutMs }, grant === undefined ? {} : { grant });
}

/** How likely a model with an orphaned task reassigns one on its turn. */
const ORPHAN_TAKEN_UP = 0.5;

/** The origin moves an orphaned task: to its lost worker's successor, or to another session. */
function reassign(world: World, session: SimSession, taskId: string): ModelCall {
  const { random } = session;
  const others = world.sessions.filter((other) => other !== session && !other.down && other.core.endpoint() !== undefined);
  const to = others.length > 0 && random.chance(0.5) ? random.pick(others) : undefined;
  const where = to === undefined ? {} : { to: to.core.endpoint()! };
  return { label: `reassign ${taskId}${to === undefined ? "" : ` to ${to.name}`}`, run: useOf(session).reassignTask(taskId, where) };
}

/** The worker reports its task done: completed or (less often) failed. */
export function finish(session: SimSession, taskId: string): ModelCall {
  const failed = session.random.chance(0.2);
  const run = failed
    ? useOf(session).done({
        taskId,
        status: "failed",
        summary: "could not",
        error: { code: "SIM_FAILED", message: "no", retryable: false },
      })
    : useOf(session).done({ taskId, status: "completed", summary: "all done" });
  return { label: `done ${taskId} ${failed ? "failed" : "completed"}`, run };
}

/** One tool call of this session's model, or undefined when it has nothing it could do. */
export function modelTurn(world: World, session: SimSession): ModelCall | undefined {
  if (session.down || session.core.endpoint() === undefined) return undefined;
  const tasks = session.core.listTasks();
  const choices = [...originChoices(world, session, tasks), ...workerChoices(world, session, tasks)];
  if (choices.length === 0) return undefined;
  // An orphan wakes the model with an offer to reassign: it takes it up more often than not.
  const orphans = tasks.filter((task) => task.role === "origin" && task.status === "active" && task.attention === "orphaned");
  if (orphans.length > 0 && session.random.chance(ORPHAN_TAKEN_UP)) return reassign(world, session, session.random.pick(orphans).taskId);
  return session.random.pick(choices)();
}
