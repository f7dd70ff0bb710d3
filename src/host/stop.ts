/**
 * Stopping a worker this CLI spawned: SIGTERM its holder (which closes Pi's RPC stdin so Pi shuts
 * down cleanly), wait until both processes are gone, SIGKILL what remains, and confirm.
 */
import { readFileSync, rmSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { processExitConfirmMs, workerReadinessPollMs } from "../protocol/limits.ts";
import { forgetSpawned, listSpawned, loadSpawned, piPidFile } from "./spawned.ts";
import { isAlive } from "../platform/processes.ts";
import { retireScratch } from "../workspace/scratch.ts";
import { retireWorktree } from "../workspace/worktree.ts";

export interface StopResult {
  readonly session: string;
  readonly pids: readonly number[];
  /** Every process of the worker is confirmed gone. */
  readonly confirmed: boolean;
  /** Its worktree, if it had one: removed, or kept with the reason (unmerged work). */
  readonly worktree?: { readonly path: string; readonly branch: string; readonly removed: boolean; readonly kept?: string };
  /** Its scratch copy, if it had one: removed, or kept with the reason (something in it changed). */
  readonly scratch?: { readonly path: string; readonly removed: boolean; readonly kept?: string };
}

function piPid(log: string): number | undefined {
  try {
    const pid = Number(readFileSync(piPidFile(log), "utf8").trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // Already gone.
  }
}

async function gone(pids: readonly number[], withinMs: number): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  while (Date.now() < deadline) {
    if (pids.every((pid) => !isAlive(pid))) return true;
    await sleep(workerReadinessPollMs);
  }
  return pids.every((pid) => !isAlive(pid));
}

/**
 * SIGTERM to `terminate` (default: every pid), then waits until every pid is gone; SIGKILLs what
 * remains after `processExitConfirmMs`. Resolves true when all are confirmed gone.
 */
export async function stopPids(pids: readonly number[], terminate: readonly number[] = pids): Promise<boolean> {
  for (const pid of terminate) signal(pid, "SIGTERM");
  if (await gone(pids, processExitConfirmMs)) return true;
  for (const pid of pids) signal(pid, "SIGKILL");
  return gone(pids, processExitConfirmMs);
}

/** Stops a spawned worker by session name (no record: nothing to stop, confirmed). */
export async function stopProcess(env: Record<string, string | undefined>, session: string): Promise<StopResult> {
  const record = loadSpawned(env, session);
  if (record === undefined) return { session, pids: [], confirmed: true };
  const pi = piPid(record.log);
  const pids = [record.pid, ...(pi === undefined ? [] : [pi])];
  // The holder closes Pi's RPC stdin, so Pi shuts down cleanly.
  const confirmed = await stopPids(pids, [record.pid]);
  if (!confirmed) return { session, pids, confirmed };
  forgetSpawned(env, session);
  rmSync(piPidFile(record.log), { force: true });
  return {
    session,
    pids,
    confirmed,
    ...(record.worktree === undefined
      ? {}
      : { worktree: { path: record.worktree.path, branch: record.worktree.branch, ...retireWorktree(record.worktree) } }),
    ...(record.scratch === undefined ? {} : { scratch: { path: record.scratch.path, ...retireScratch(record.scratch) } }),
  };
}

/** Stops every live worker that `owner` (a Pi's pid) spawned without keeping it; resolves with their results. */
export function stopOwnedWorkers(env: Record<string, string | undefined>, owner: number): Promise<StopResult[]> {
  const owned = listSpawned(env).filter((worker) => worker.owner === owner && isAlive(worker.pid));
  return Promise.all(owned.map((worker) => stopProcess(env, worker.session)));
}
