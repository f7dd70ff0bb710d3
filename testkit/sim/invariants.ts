/**
 * The simulator's invariants, each named, checked after every step (and the end's at the end).
 * A check returns the problem it found, in words, or nothing; it reads the world, never changes it.
 *
 * - presented-once: an event is shown to a Pi at most once in that Pi's life.
 * - per-target-fifo: a Pi is shown one task's events in the order the origin numbered them —
 *   progress aside, which is paced and never holds other items (src/core/presentation.ts).
 * - first-terminal-wins: a task that ended failed, cancelled or timed out at its origin never ends
 *   otherwise; a completed one becomes active again only by a revision.
 * - generation-fence: a task that ended completed or failed at its origin did not end by the report
 *   of a worker of an older generation (a reassigned task's old worker cannot end it) — unless the
 *   task was reassigned back to that very endpoint (the same executor: src/core/intake.ts); and a
 *   worker's generation of a task never goes back (a late older assignment moves nothing).
 * - orphan-bound: a task whose worker's Pi crashed is orphaned (or ended, or says it could not be
 *   delivered) at its origin within `ORPHAN_BOUND_MS`, when the origin could see the relay all
 *   that time.
 * - live-not-orphaned: a task whose worker's Pi runs, both parties reachable since the task was
 *   sent, on the same relay state, neither Pi restarted since, is never orphaned.
 * - proof-before-content: no task content leaves a session sealed to a key that never proved itself
 *   the task's peer — the stranger's (a key no session trusts, holding a name that lapsed).
 * - nothing-forged-believed: no Pi is shown, and (at the end) no task holds, text the hostile
 *   relay changed or forged (`FORGED_MARK`, testkit/sim/hostile.ts).
 * - grants-narrow: a task delegated from another never grants more than its parent (tools, bash,
 *   read and write scopes, turn, cost and time budgets), and a worker holds the grant its origin sent.
 * - caps-kept: no Pi has more than `SIM_MAX_ACTIVE_TASKS` tasks active as their origin, and no task
 *   is deeper than `maxDelegationDepth`.
 * - typed-errors: every tool call that fails, fails with a TaskError (a stable code).
 * - truthful-end (at the end of a run, the network healed and time given): every task at its
 *   origin is ended, or says why not (`orphaned`, `indeterminate`, or its assignment could not be
 *   delivered) — never silently nothing.
 */
import type { TaskView } from "../../src/core/task-core.ts";
import { TaskError } from "../../src/protocol/errors.ts";
import {
  defaultLeaseMs,
  idlePollIntervalMs,
  maxDelegationDepth,
  orphanAfterMs,
  orphanProbeIntervalMs,
  relayMaintenanceIntervalMs,
} from "../../src/protocol/limits.ts";
import { canonicalJson } from "../../src/protocol/canonical-json.ts";
import type { Grant, TaskStatus } from "../../src/protocol/schemas.ts";
import { FORGED_MARK } from "./hostile.ts";
import type { SimPi, SimSession, World } from "./world.ts";
import { SIM_EPOCH_MS, SIM_MAX_ACTIVE_TASKS, SIM_REQUEST_TIMEOUT_MS } from "./world.ts";

/** How long after its worker's crash a task may go without being orphaned: the lease lapses, the
 * relay sweeps it, the orphan clock runs, a probe sees it — and two lost probes on the way. */
export const ORPHAN_BOUND_MS =
  defaultLeaseMs + relayMaintenanceIntervalMs + orphanAfterMs + 3 * orphanProbeIntervalMs + idlePollIntervalMs + 2 * SIM_REQUEST_TIMEOUT_MS;

export type InvariantName =
  | "presented-once"
  | "per-target-fifo"
  | "first-terminal-wins"
  | "generation-fence"
  | "orphan-bound"
  | "live-not-orphaned"
  | "proof-before-content"
  | "nothing-forged-believed"
  | "grants-narrow"
  | "caps-kept"
  | "typed-errors"
  | "truthful-end";

export interface Violation {
  readonly invariant: InvariantName;
  readonly message: string;
}

export interface Invariants {
  /** The checks that hold at every step. */
  afterStep(world: World): Violation | undefined;
  /** A tool call's outcome: a failure that is not a TaskError breaks typed-errors. */
  callSettled(label: string, outcome: PromiseSettledResult<unknown>): Violation | undefined;
  /** The end's check, once the world had the time to settle. */
  atEnd(world: World): Violation | undefined;
}

function presentedOnce(session: SimSession, pi: SimPi): Violation | undefined {
  const seen = new Set<string>();
  for (const eventId of pi.host.insertedIds()) {
    if (seen.has(eventId)) return { invariant: "presented-once", message: `${pi.id} was shown event ${eventId} twice` };
    seen.add(eventId);
  }
  return undefined;
}

function perTargetFifo(pi: SimPi): Violation | undefined {
  const last = new Map<string, bigint>();
  for (const item of pi.host.inserted) {
    if (item.event.type === "task.progress") continue;
    const sequence = BigInt(item.event.sequence);
    const before = last.get(item.taskId);
    if (before !== undefined && sequence <= before)
      return {
        invariant: "per-target-fifo",
        message: `${pi.id} was shown event ${item.eventId} (${item.event.type}, sequence ${sequence}) of task ${item.taskId} after sequence ${before}`,
      };
    last.set(item.taskId, sequence);
  }
  return undefined;
}

/** Every Pi of the world that holds `taskId` as its worker, with its view. */
function workersOf(world: World, taskId: string): { pi: SimPi; task: TaskView }[] {
  return world.sessions.flatMap((session) =>
    session.pis.flatMap((pi) => {
      const task = pi.configured.current().findTask(taskId);
      return task === undefined || task.role !== "worker" ? [] : [{ pi, task }];
    }),
  );
}

function generationFence(world: World, task: TaskView): Violation | undefined {
  if (task.status !== "completed" && task.status !== "failed") return undefined;
  const terminal = task.events.findLast((event) => event.type === "task.completed" || event.type === "task.failed");
  const intentId = (terminal?.payload as { intentId?: unknown } | undefined)?.intentId;
  if (typeof intentId !== "string") return undefined;
  const generation = task.generation ?? 1;
  for (const { pi, task: held } of workersOf(world, task.taskId)) {
    const delivery = held.terminalDelivery;
    if (delivery.state === "not_submitted" || delivery.intentId !== intentId || (held.generation ?? 1) >= generation) continue;
    // Reassigned back to the very endpoint that reports (its session re-homed there): the same executor, whose mail counts.
    if (pi.configured.current().endpoint()?.id === task.target.id) continue;
    return {
      invariant: "generation-fence",
      message: `task ${task.taskId} (generation ${generation}) ended ${task.status} by the report of ${pi.id}, which holds generation ${held.generation ?? 1}`,
    };
  }
  return undefined;
}

/** A worker Pi's generation of each task it holds only grows (`held`: the highest seen, per Pi and task). */
function workerGenerations(held: Map<string, number>, pi: SimPi): Violation | undefined {
  for (const task of pi.configured.current().listTasks()) {
    if (task.role !== "worker") continue;
    const key = `${pi.id}/${task.taskId}`;
    const generation = task.generation ?? 1;
    const before = held.get(key) ?? generation;
    held.set(key, Math.max(before, generation));
    if (generation < before)
      return { invariant: "generation-fence", message: `${pi.id} holds task ${task.taskId} at generation ${generation}, after ${before}` };
  }
  return undefined;
}

/** The task says it could not be delivered (its assignment refused for good, e.g. its worker gone before it proved its key). */
const undeliverable = (task: TaskView) => task.deliveryEvidence.relayAcceptance === "blocked";

/** Who holds a task as its worker, in words. */
function holding(world: World, taskId: string): string {
  const holders = workersOf(world, taskId).map(({ pi, task }) => `${pi.id}: ${task.status}, generation ${task.generation ?? 1}`);
  return holders.length === 0 ? "no worker holds it" : holders.join("; ");
}

/** The Pi at the task's target endpoint now, if any Pi ever held that endpoint. */
function targetPi(world: World, task: TaskView): SimPi | undefined {
  for (const session of world.sessions)
    for (const pi of session.pis) if (pi.configured.current().endpoint()?.id === task.target.id) return pi;
  return undefined;
}

function orphanChecks(world: World, session: SimSession, task: TaskView): Violation | undefined {
  const worker = targetPi(world, task);
  if (worker === undefined || task.status !== "active") return undefined;
  const now = world.timers.now();
  const origin = session.pi;
  if (worker.crashedAt !== undefined) {
    const since = worker.crashedAt;
    const clearSight =
      origin.startedAt <= since && !world.network.partitionedSince(session.name, since) && world.relayRestartedAt() < since;
    if (clearSight && now - since > ORPHAN_BOUND_MS && task.attention !== "orphaned" && !undeliverable(task))
      return {
        invariant: "orphan-bound",
        message: `task ${task.taskId}: its worker ${worker.id} crashed ${now - since} ms ago, yet it is not orphaned at ${origin.id}`,
      };
    return undefined;
  }
  const since = task.createdAt - SIM_EPOCH_MS;
  const workerSession = worker.id.split("/")[0]!;
  const reachable = (name: string) => !world.network.partitionedSince(name, since);
  // An origin Pi that started after the task did (a restart, resuming it) asks the worker whether it
  // holds the task; one whose assignment never left the crashed Pi is truthfully orphaned then.
  const steady =
    reachable(workerSession) &&
    reachable(session.name) &&
    world.relayRestartedAt() < since &&
    worker.startedAt <= since &&
    origin.startedAt <= since;
  if (steady && task.attention === "orphaned")
    return {
      invariant: "live-not-orphaned",
      message: `task ${task.taskId} is orphaned at ${origin.id}, but its worker ${worker.id} runs and was reachable all along (${holding(world, task.taskId)})`,
    };
  return undefined;
}

/** What a Pi was shown since the last check (`checked` counts the items seen), searched for the forger's mark. */
function shownForged(checked: Map<SimPi, number>, pi: SimPi): Violation | undefined {
  const from = checked.get(pi) ?? 0;
  checked.set(pi, pi.host.inserted.length);
  for (const item of pi.host.inserted.slice(from)) {
    if (JSON.stringify(item).includes(FORGED_MARK))
      return {
        invariant: "nothing-forged-believed",
        message: `${pi.id} was shown ${item.event.type} ${item.eventId}, which the relay forged`,
      };
  }
  return undefined;
}

/** A task a running Pi holds with text the relay forged in it. */
function heldForged(session: SimSession): Violation | undefined {
  const task = session.core.listTasks().find((each) => JSON.stringify(each).includes(FORGED_MARK));
  if (task === undefined) return undefined;
  return {
    invariant: "nothing-forged-believed",
    message: `${session.pi.id} holds task ${task.taskId} (${task.role}) with text the relay forged`,
  };
}

/** A scope inside another: the same path, or under it (the model's scopes are plain relative paths). */
const inside = (scope: string, outer: string) => scope === outer || scope.startsWith(`${outer}/`);

/** What `child` grants beyond `parent`, in words, or undefined when it grants nothing more. */
function widening(child: Grant | undefined, parent: Grant): string | undefined {
  if (child === undefined) return "no grant at all (everything)";
  if (parent.tools !== undefined && (child.tools === undefined || child.tools.some((tool) => !parent.tools!.includes(tool))))
    return `tools ${JSON.stringify(child.tools)} beyond ${JSON.stringify(parent.tools)}`;
  if (parent.bash === false && child.bash !== false) return "bash, which its parent may not use";
  if (parent.network !== true && child.network === true) return "the network, which its parent may not reach";
  for (const kind of ["read", "write"] as const) {
    const outer = parent[kind];
    const scopes = child[kind];
    if (outer !== undefined && (scopes === undefined || scopes.some((scope) => !outer.some((each) => inside(scope, each)))))
      return `${kind} ${JSON.stringify(scopes)} beyond ${JSON.stringify(outer)}`;
  }
  for (const budget of ["maxTurns", "maxCostUsd", "maxWallMs"] as const) {
    const bound = parent[budget];
    if (bound !== undefined && !((child[budget] ?? Number.POSITIVE_INFINITY) <= bound)) return `${budget} ${child[budget]} over ${bound}`;
  }
  return undefined;
}

/** Grants along chains (at each origin) and in transit (each worker holds what its origin sent), caps. */
function grantsAndCaps(world: World, session: SimSession): Violation | undefined {
  const tasks = session.core.listTasks();
  const active = tasks.filter((task) => task.role === "origin" && task.status === "active").length;
  if (active > SIM_MAX_ACTIVE_TASKS) return { invariant: "caps-kept", message: `${session.pi.id} has ${active} active tasks of its own` };
  for (const task of tasks) {
    const depth = task.lineage?.depth ?? 0;
    if (depth > maxDelegationDepth) return { invariant: "caps-kept", message: `task ${task.taskId} is ${depth} deep at ${session.pi.id}` };
    const parentId = task.role === "origin" ? task.lineage?.parentTaskId : undefined;
    const parent = parentId === undefined ? undefined : session.core.findTask(parentId)?.grant;
    const wider = parent === undefined ? undefined : widening(task.grant, parent);
    if (wider !== undefined)
      return {
        invariant: "grants-narrow",
        message: `task ${task.taskId}, delegated from ${parentId} at ${session.pi.id}, grants ${wider}`,
      };
    if (task.role !== "worker") continue;
    for (const origin of world.sessions.filter((each) => !each.down)) {
      const sent = origin.core.findTask(task.taskId);
      if (sent?.role === "origin" && canonicalJson(sent.grant ?? null) !== canonicalJson(task.grant ?? null))
        return {
          invariant: "grants-narrow",
          message: `${session.pi.id} holds task ${task.taskId} with another grant than ${origin.pi.id} sent`,
        };
    }
  }
  return undefined;
}

const FINAL: ReadonlySet<TaskStatus> = new Set(["failed", "cancelled", "timed_out"]);

function firstTerminalWins(ended: Map<string, { status: TaskStatus; revision: number }>, pi: SimPi, task: TaskView): Violation | undefined {
  const key = `${pi.id}/${task.taskId}`;
  const before = ended.get(key);
  const now = { status: task.status, revision: task.revision ?? 0 };
  ended.set(key, now);
  if (before === undefined || before.status === now.status) return undefined;
  const reopened = before.status === "completed" && now.status === "active" && now.revision > before.revision;
  if (!FINAL.has(before.status) && (before.status !== "completed" || reopened)) return undefined;
  return {
    invariant: "first-terminal-wins",
    message: `${pi.id}: task ${task.taskId} ended ${before.status}, then became ${now.status} (revision ${before.revision} → ${now.revision})`,
  };
}

export function createInvariants(): Invariants {
  /** Per origin Pi and task: the status last seen, and its revision round. */
  const ended = new Map<string, { status: TaskStatus; revision: number }>();
  /** Per Pi: how many of its shown items were searched for forgeries. */
  const checked = new Map<SimPi, number>();
  /** Per worker Pi and task: the highest generation it held. */
  const generations = new Map<string, number>();
  const originChecks = (world: World, session: SimSession): Violation | undefined => {
    if (session.down) return undefined;
    for (const task of session.core.listTasks()) {
      if (task.role !== "origin") continue;
      const problem = firstTerminalWins(ended, session.pi, task) ?? generationFence(world, task) ?? orphanChecks(world, session, task);
      if (problem !== undefined) return problem;
    }
    return undefined;
  };
  return {
    afterStep: (world) => {
      const leak = world.leaks[0];
      if (leak !== undefined) return { invariant: "proof-before-content", message: leak };
      for (const session of world.sessions) {
        for (const pi of session.pis) {
          const problem = presentedOnce(session, pi) ?? perTargetFifo(pi) ?? shownForged(checked, pi) ?? workerGenerations(generations, pi);
          if (problem !== undefined) return problem;
        }
        const problem = originChecks(world, session) ?? (session.down ? undefined : grantsAndCaps(world, session));
        if (problem !== undefined) return problem;
      }
      return undefined;
    },
    callSettled: (label, outcome) => {
      if (outcome.status === "fulfilled" || outcome.reason instanceof TaskError) return undefined;
      return { invariant: "typed-errors", message: `${label} failed with an untyped error: ${String(outcome.reason)}` };
    },
    atEnd: (world) => {
      for (const session of world.sessions) {
        if (session.down) continue;
        const forged = heldForged(session);
        if (forged !== undefined) return forged;
        for (const task of session.core.listTasks()) {
          if (task.role !== "origin" || task.status !== "active") continue;
          if (task.attention === "orphaned" || task.attention === "indeterminate" || undeliverable(task)) continue;
          const holders = workersOf(world, task.taskId).map(({ pi, task: held }) => `${pi.id}: ${held.status}`);
          return {
            invariant: "truthful-end",
            message: `${session.pi.id}: task ${task.taskId} to ${task.target.id} is still active with nothing said about why (workers: ${holders.join(", ") || "none holds it"})`,
          };
        }
      }
      return undefined;
    },
  };
}
