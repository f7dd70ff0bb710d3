/**
 * A task party as a program of its own, to run on a host of testkit/netns.ts (another machine): one
 * library task core (createConfiguredTaskCore: it rebinds by itself after a relay reset) on the relay
 * at `--relay`, signing with the identity of `--home`, with an in-memory presentation host. It talks
 * JSON lines: on stdout `{"event":"ready","endpoint":…}` once connected, then an answer per command;
 * on stdin the commands
 * - `{"cmd":"send","toSession":NAME,"count":N,"everyMs":M}` (origin): N tasks to the worker session
 *   NAME (at the endpoint it holds then), one every M ms;
 * - `{"cmd":"stats"}`: `{"event":"stats", …}` — tasks, completed, acknowledged, active, and the
 *   events presented more than once (`twice`);
 * - `{"cmd":"stop"}`: closes the core and exits.
 * A worker (`--role worker`) completes every task assigned to it; an origin acknowledges every
 * completed task. Both refresh every `PASS_MS`.
 *
 * Run: `bun testkit/netns-party.ts --relay URL --home DIR --session NAME --role origin|worker`.
 */
import { parseArgs } from "node:util";
import { createInterface } from "node:readline";
import { createConfiguredTaskCore } from "../src/core/configured.ts";
import type { TaskCore } from "../src/core/task-core.ts";
import { homeTrust } from "../src/core/home-trust.ts";
import { createMemoryHost } from "./memory-host.ts";

/** How often the party runs a pass. */
const PASS_MS = 100;
/** How long a refused create waits before it is tried again. */
const RETRY_MS = 250;

const { values } = parseArgs({
  options: { relay: { type: "string" }, home: { type: "string" }, session: { type: "string" }, role: { type: "string" } },
});
const emit = (line: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(line)}\n`);
const host = createMemoryHost();
const configured = createConfiguredTaskCore({
  url: values.relay!,
  callerSession: values.session!,
  env: {},
  host,
  trust: homeTrust(values.home!, { claimedName: values.session! }),
});
const worker = values.role === "worker";
const finished = new Set<string>();
let stopping = false;

/** Completes (worker) or acknowledges (origin) what is due; a failure is retried next pass. */
function settleTasks(core: TaskCore): void {
  for (const task of core.listTasks()) {
    if (finished.has(task.taskId)) continue;
    if (worker && task.role === "worker" && task.status === "active" && task.terminalDelivery.state === "not_submitted") {
      finished.add(task.taskId);
      core.done({ taskId: task.taskId, status: "completed", summary: `done ${task.taskId}` }).catch(() => finished.delete(task.taskId));
    }
    if (!worker && task.role === "origin" && task.status === "completed") {
      finished.add(task.taskId);
      core.acknowledge({ taskId: task.taskId }).catch(() => finished.delete(task.taskId));
    }
  }
}

function stats(): Record<string, unknown> {
  const tasks = configured.current().listTasks();
  const ids = host.insertedIds();
  return {
    event: "stats",
    tasks: tasks.length,
    completed: tasks.filter((task) => task.status === "completed").length,
    acknowledged: tasks.filter((task) => task.events.some((event) => event.type === "task.parent_acknowledged")).length,
    active: tasks.filter((task) => task.status === "active").length,
    orphaned: tasks.filter((task) => task.attention === "orphaned").length,
    indeterminate: tasks.filter((task) => task.attention === "indeterminate").length,
    notSent: tasks.filter((task) => task.deliveryEvidence.relayAcceptance !== "accepted").length,
    twice: ids.filter((id, index) => ids.indexOf(id) !== index).length,
    endpoint: configured.current().endpoint(),
  };
}

/** The endpoint `session` is registered with now (as a person or a model finds a worker), or undefined. */
async function endpointOf(session: string): Promise<unknown> {
  const status = await configured.session.transport.sessionStatus(session).catch(() => undefined);
  return status?.taskEndpoint;
}

/**
 * Sends `count` tasks to the worker session `toSession`, one every `everyMs`, each to the endpoint
 * the session holds then. A create refused before the task existed (no relay, a reset under way) is
 * tried again after `RETRY_MS`, as a caller would; a task that exists is never created twice.
 */
async function send(toSession: string, count: number, everyMs: number): Promise<void> {
  let attempts = 0;
  for (let index = 0; index < count && !stopping; index += 1) {
    for (;;) {
      attempts += 1;
      const to = await endpointOf(toSession);
      const created =
        to === undefined
          ? false
          : await configured
              .run((core) => core.createTask({ to, task: `load task ${index}` }))
              .then(
                () => true,
                (error: { details?: { taskId?: unknown } }) => typeof error.details?.taskId === "string",
              );
      if (created || stopping) break;
      await Bun.sleep(RETRY_MS);
    }
    await Bun.sleep(everyMs);
  }
  emit({ event: "sent", count, attempts });
}

async function loop(): Promise<void> {
  while (!stopping) {
    await configured.refresh().catch(() => undefined);
    try {
      settleTasks(configured.current());
    } catch {
      // No core between a reset and its rebind: next pass.
    }
    await Bun.sleep(PASS_MS);
  }
}

await configured.run((core) => core.connect());
emit({ event: "ready", endpoint: configured.current().endpoint() });
void loop();
for await (const line of createInterface({ input: process.stdin })) {
  const command = JSON.parse(line) as { cmd: string; toSession?: string; count?: number; everyMs?: number };
  if (command.cmd === "send") void send(command.toSession!, command.count ?? 1, command.everyMs ?? 0);
  if (command.cmd === "stats") emit(stats());
  if (command.cmd === "stop") break;
}
stopping = true;
await configured.close();
process.exit(0);
