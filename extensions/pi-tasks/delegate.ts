/**
 * Delegating one task as the origin's tools do (`agent_task_send`, and each step of a workflow):
 * `to` is an endpoint, or a specialist by its profile name (specialists.ts: a warm worker of that
 * profile, else one started); the task carries the grant of the profile a spawned worker was started
 * with, narrowed by this session's default grant (`PI_TASKS_GRANT`), and a sub-task draws from what
 * this session's model left of its own task's budget.
 */
import type { ExtensionToolContext } from "@earendil-works/pi-coding-agent";
import type { CreateResult } from "../../src/core/results.ts";
import { sessionStatus } from "../../src/host/sessions.ts";
import { listSpawned } from "../../src/host/spawned.ts";
import { sameEndpoint } from "../../src/protocol/endpoint.ts";
import { narrowGrant } from "../../src/protocol/grant.ts";
import type { Grant, TaskEndpoint } from "../../src/protocol/schemas.ts";
import type { Env } from "../../src/relay-client/config.ts";
import { defaultGrant } from "./grants.ts";
import { type Specialist, specialistEndpoint } from "./specialists.ts";
import type { ToolDeps } from "./tools/shared.ts";

/**
 * The grant of the profile a worker this user spawned was started with, when `to` is that worker:
 * at the endpoint it registered when spawned, or — it rebound since (a relay restart gives every
 * session a fresh endpoint) — where the relay has its session now. A grant only narrows, so a
 * lookup that fails leaves the task with the grants it has and says nothing new.
 */
async function spawnedGrant(env: Env, relayUrl: string, params: unknown): Promise<Grant | undefined> {
  const to = (params as { to?: unknown } | undefined)?.to as TaskEndpoint | undefined;
  if (to === undefined || typeof to !== "object") return undefined;
  const granted = listSpawned(env).filter((worker) => worker.grant !== undefined);
  const atSpawn = granted.find((worker) => worker.taskEndpoint !== undefined && sameEndpoint(worker.taskEndpoint, to));
  if (atSpawn !== undefined) return atSpawn.grant;
  for (const worker of granted) {
    const now = await sessionStatus(worker.session, env, relayUrl).then(
      (found) => found.status.taskEndpoint,
      () => undefined,
    );
    if (now !== undefined && sameEndpoint(now, to)) return worker.grant;
  }
  return undefined;
}

/** What the origin asks for: a task to an endpoint or to a specialist by name. */
export interface Delegation {
  readonly to: TaskEndpoint | string;
  readonly task: string;
  readonly timeoutMs?: number;
}

/** Creates the task (its assignment queued, maybe sent); the specialist it went to, when `to` named one. */
export async function delegate(
  deps: ToolDeps,
  input: Delegation,
  options: { readonly ctx?: ExtensionToolContext; readonly signal?: AbortSignal; readonly quietResult?: boolean },
): Promise<{ created: CreateResult; specialist?: Specialist }> {
  await deps.ready();
  const specialist = typeof input.to === "string" ? await specialistEndpoint(deps, input.to, options.ctx) : undefined;
  try {
    return await delegateTo(deps, input, specialist, options);
  } finally {
    specialist?.release();
  }
}

/** The task created, to `specialist` when `to` named one (claimed meanwhile), else to the endpoint given. */
async function delegateTo(
  deps: ToolDeps,
  input: Delegation,
  specialist: Specialist | undefined,
  options: { readonly signal?: AbortSignal; readonly quietResult?: boolean },
): Promise<{ created: CreateResult; specialist?: Specialist }> {
  const params = specialist === undefined ? input : { ...input, to: specialist.endpoint };
  const info = deps.info();
  // A relay that cannot prove it is the user's is asked nothing (its lifetime sends it nothing either).
  const spawned = info === undefined || info.relay.state === "untrusted" ? undefined : await spawnedGrant(info.env, info.relay.url, params);
  const grant = info === undefined ? undefined : narrowGrant(spawned, defaultGrant(info.env));
  const created = await deps.run((core) =>
    core.createTask(params, {
      ...(options.signal === undefined ? {} : { signal: options.signal }),
      // A sub-task draws from what this session's model left of its own task's turns and cost.
      spentOn: (taskId: string) => deps.spentOn(taskId),
      ...(grant === undefined ? {} : { grant }),
      ...(options.quietResult === true ? { quietResult: true } : {}),
    }),
  );
  return { created, ...(specialist === undefined ? {} : { specialist }) };
}
