/**
 * Specialists by name (issue 39): `agent_task_send {to: "reviewer", task}` delegates to a worker of
 * the profile `reviewer` (profiles.ts: built-in, the person's or a trusted project's) with no spawn
 * of the model's own. A worker of that profile this Pi spawned that is alive and holds no active
 * task of this session is reused (warm: no start-up); otherwise one is started
 * (start-worker.ts, within the spawn cap) and stops with this Pi — or sooner, once it has been idle
 * for `specialistIdleMs` (the pool: `sweepIdleSpecialists`). The endpoint comes from the
 * relay, never from the name: a name is resolved to a spawned worker's registration, which stays
 * opaque to the model. Each sweep and start notes the specialists kept warm in pool.ts, which the
 * widget reads.
 */
import type { ExtensionToolContext } from "@earendil-works/pi-coding-agent";
import { customAlphabet } from "nanoid";
import type { TaskCore } from "../../src/core/task-core.ts";
import { killSession, sessionList } from "../../src/host/sessions.ts";
import { listSpawned, type SpawnedWorker } from "../../src/host/spawned.ts";
import { isAlive } from "../../src/platform/processes.ts";
import { sameEndpoint } from "../../src/protocol/endpoint.ts";
import { TaskError } from "../../src/protocol/errors.ts";
import { maxWorkerNameChars, specialistIdleMs, specialistPoolCheckMs } from "../../src/protocol/limits.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import { busyOf, forgetSpecialist, warmPool } from "./pool.ts";
import { findProfile, loadProfiles } from "./profiles.ts";
import { startWorker } from "./start-worker.ts";
import type { ToolDeps } from "./tools/shared.ts";

/** Characters of the random part of a started specialist's session name (`reviewer-k3x9`). */
const SPECIALIST_SUFFIX_CHARS = 4;
const suffix = customAlphabet("0123456789abcdefghijklmnopqrstuvwxyz", SPECIALIST_SUFFIX_CHARS);

export interface Specialist {
  readonly endpoint: TaskEndpoint;
  readonly session: string;
  /** Started for this send (cold), or an idle one reused (warm). */
  readonly started: boolean;
  /** Ends the claim on this specialist once its task exists (from then on the task makes it busy). */
  release(): void;
}

/**
 * Specialists handed to a delegation whose task is not created yet: not idle, so delegations side
 * by side (a workflow's steps) never share one.
 */
const claimed = new Set<string>();

function claim(endpoint: TaskEndpoint, session: string, started: boolean): Specialist {
  claimed.add(session);
  return { endpoint, session, started, release: () => void claimed.delete(session) };
}

/** Endpoints holding an active task this session assigned: busy. */
function busyEndpoints(core: TaskCore): TaskEndpoint[] {
  return busyOf(core.listTasks());
}

/** A live, idle worker of `profile` this Pi spawned, where the relay has it now; undefined when none. */
async function idleWorker(deps: ToolDeps, profile: string): Promise<Specialist | undefined> {
  const info = deps.info()!;
  const busy = busyEndpoints(deps.current());
  const ours = listSpawned(info.env).filter(
    (worker) => worker.profile === profile && (worker.spawner ?? worker.owner) === process.pid && isAlive(worker.pid),
  );
  if (ours.length === 0) return undefined;
  const registered = await registeredEndpoints(deps);
  for (const worker of ours) {
    const now = registered.get(worker.session);
    // Claimed at once (no await between the check and the claim): a delegation beside this one skips it.
    if (now !== undefined && !busy.some((endpoint) => sameEndpoint(endpoint, now)) && !claimed.has(worker.session))
      return claim(now, worker.session, false);
  }
  return undefined;
}

/**
 * Where the relay has each session registered now (an endpoint changes when the relay restarts), in
 * one look at it; empty when the relay cannot be asked.
 */
function registeredEndpoints(deps: ToolDeps): Promise<Map<string, TaskEndpoint | undefined>> {
  const info = deps.info()!;
  return sessionList(info.env, info.relay.url).then(
    (listing) => new Map(listing.sessions.map((session) => [session.session, session.taskEndpoint])),
    () => new Map(),
  );
}

/** The specialists this Pi started for sends by name that are still running. */
function pooledWorkers(deps: ToolDeps): SpawnedWorker[] {
  const info = deps.info();
  if (info === undefined) return [];
  return listSpawned(info.env).filter((worker) => worker.pooled === true && worker.spawner === process.pid && isAlive(worker.pid));
}

/**
 * One look at the pool: a specialist holding an active task of this session is busy; one idle since
 * `specialistIdleMs` or longer (`idleSince` remembers since when, by session) is stopped, its
 * workspace kept if it holds work (src/host/stop.ts). Returns the sessions stopped.
 */
export async function sweepIdleSpecialists(
  deps: ToolDeps,
  idleSince: Map<string, number>,
  now: number,
  stop: (session: string) => Promise<unknown>,
): Promise<string[]> {
  let busy: TaskEndpoint[];
  try {
    busy = busyEndpoints(deps.current());
  } catch {
    return []; // no Pi run: nothing is judged idle
  }
  const stopped: string[] = [];
  const pooled = pooledWorkers(deps);
  for (const session of warmPool.keys()) if (!pooled.some((worker) => worker.session === session)) warmPool.delete(session);
  const registered = pooled.length === 0 ? new Map<string, TaskEndpoint | undefined>() : await registeredEndpoints(deps);
  for (const worker of pooled) {
    // Where it is registered now, else where it was recorded.
    const endpoint = registered.get(worker.session) ?? worker.taskEndpoint;
    warmPool.set(worker.session, endpoint);
    if (endpoint !== undefined && busy.some((held) => sameEndpoint(held, endpoint))) {
      idleSince.delete(worker.session);
      continue;
    }
    const since = idleSince.get(worker.session) ?? now;
    idleSince.set(worker.session, since);
    if (now - since < specialistIdleMs) continue;
    await stop(worker.session).catch(() => undefined);
    idleSince.delete(worker.session);
    forgetSpecialist(worker.session);
    stopped.push(worker.session);
  }
  return stopped;
}

/**
 * Keeps the pool while this Pi has specialists running: a sweep every `specialistPoolCheckMs`
 * (unref'd), ending when none runs. Also called as the extension loads: after a `/reload` the
 * specialists started before it are found again and kept (or stopped) as before.
 */
const keepers = new WeakMap<ToolDeps, ReturnType<typeof setInterval>>();
export function keepPool(deps: ToolDeps): void {
  if (keepers.has(deps)) return;
  const idleSince = new Map<string, number>();
  const stop = (session: string) => killSession(session, deps.info()!.env);
  const timer = setInterval(() => {
    if (pooledWorkers(deps).length === 0) {
      warmPool.clear();
      clearInterval(timer);
      keepers.delete(deps);
      return;
    }
    void sweepIdleSpecialists(deps, idleSince, Date.now(), stop).catch(() => undefined);
  }, specialistPoolCheckMs);
  timer.unref?.();
  keepers.set(deps, timer);
}

/** The endpoint of a worker of the profile `name`: an idle one of this Pi's, else one started now. */
export async function specialistEndpoint(deps: ToolDeps, name: string, ctx: ExtensionToolContext | undefined): Promise<Specialist> {
  await deps.ready();
  const info = deps.info();
  if (info === undefined) throw new TaskError("TASKS_NOT_RUNNING");
  // Unknown or unusable: INVALID_PROFILE, naming the profiles there are; nothing started.
  findProfile(loadProfiles(info.env, ctx?.cwd ?? info.cwd, ctx?.isProjectTrusted?.() === true), name);
  const warm = await idleWorker(deps, name);
  if (warm !== undefined) return warm;
  const session = `${name.slice(0, maxWorkerNameChars - SPECIALIST_SUFFIX_CHARS - 1)}-${suffix()}`;
  const { worker } = await startWorker(deps, { name: session, profile: name }, ctx, { pooled: true });
  warmPool.set(worker.session, worker.taskEndpoint);
  keepPool(deps);
  return claim(worker.taskEndpoint, worker.session, true);
}
