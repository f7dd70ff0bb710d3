/**
 * A workspace per worker: a git worktree of the project on a new branch, so that parallel workers'
 * edits never land in one tree (`agent_task_spawn {worktree: true}`, or a profile's `worktree: true`).
 * Git does the work (`git worktree`); this module only names things and decides what to keep:
 * - the worktree lives in this Pi's pi-tasks home (`worktrees/<name>-<stamp>`), on branch
 *   `pi-tasks/<name>-<stamp>` from the project's current commit;
 * - a worker's result carries its branch and a summary of what changed (`worktreeChanges`);
 * - when the worker stops, the worktree is removed only when nothing in it is unmerged (no
 *   uncommitted change, and its branch adds nothing the project's HEAD lacks); otherwise it is kept
 *   and the stop says where, and how to merge or remove it.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join, relative } from "node:path";
import { TaskError } from "../protocol/errors.ts";
import { maxWorkspaceDiffChars, maxWorkspaceUntracked } from "../protocol/limits.ts";

export interface Worktree {
  /** The worktree's directory (the worker's project directory is this, or a directory inside it). */
  readonly path: string;
  readonly branch: string;
  /** The commit it started from. */
  readonly base: string;
  /** The project's repository (its top level). */
  readonly root: string;
}

/** The worker's environment names its branch and base, so its result can say what changed. */
export const WORKTREE_BRANCH_ENV = "PI_TASKS_WORKTREE_BRANCH";
export const WORKTREE_BASE_ENV = "PI_TASKS_WORKTREE_BASE";

/** Runs git in `cwd` (extra environment, e.g. a temporary index); trimmed output, never throws. */
export function git(cwd: string, args: readonly string[], env?: Record<string, string>): { ok: boolean; out: string; err: string } {
  const run = spawnSync("git", ["-C", cwd, ...args], {
    encoding: "utf8",
    ...(env === undefined ? {} : { env: { ...process.env, ...env } }),
  });
  return { ok: run.status === 0, out: (run.stdout ?? "").trim(), err: (run.stderr ?? run.error?.message ?? "").trim() };
}

function unavailable(problem: string, details: Record<string, unknown>): TaskError {
  return new TaskError("WORKTREE_UNAVAILABLE", { message: `No worktree for the worker: ${problem}`, details });
}

/** Makes a worktree of the repository holding `projectDir`; returns it and the worker's directory inside it. */
export function createWorktree(projectDir: string, name: string, home: string, now = Date.now()): { worktree: Worktree; workDir: string } {
  const root = git(projectDir, ["rev-parse", "--show-toplevel"]);
  if (!root.ok) throw unavailable(`${projectDir} is not in a git repository`, { projectDir, git: root.err });
  const base = git(root.out, ["rev-parse", "HEAD"]);
  if (!base.ok) throw unavailable("the repository has no commit yet", { projectDir, git: base.err });
  const stamp = now.toString(36);
  const branch = `pi-tasks/${name}-${stamp}`;
  const dir = join(home, "worktrees");
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const path = join(dir, `${name}-${stamp}`);
  const added = git(root.out, ["worktree", "add", "-b", branch, path, base.out]);
  if (!added.ok) throw unavailable("git worktree add failed", { projectDir, git: added.err });
  return { worktree: { path, branch, base: base.out, root: root.out }, workDir: join(path, relative(root.out, projectDir)) };
}

/** What changed in a worktree since its base: `git diff --stat` (commits and uncommitted edits) and untracked files. */
export function worktreeChanges(cwd: string, base: string): { readonly diffStat: string; readonly untracked: readonly string[] } {
  const diff = git(cwd, ["diff", "--stat", base]);
  const stat = diff.ok ? diff.out : `(git diff failed: ${diff.err})`;
  const listed = git(cwd, ["ls-files", "--others", "--exclude-standard"]);
  const untracked = listed.ok && listed.out !== "" ? listed.out.split("\n") : [];
  return {
    diffStat:
      stat.length <= maxWorkspaceDiffChars
        ? stat
        : `${stat.slice(0, maxWorkspaceDiffChars)}\n… (cut; run git diff --stat ${base} in the worktree)`,
    untracked:
      untracked.length <= maxWorkspaceUntracked
        ? untracked
        : [...untracked.slice(0, maxWorkspaceUntracked), `… and ${untracked.length - maxWorkspaceUntracked} more`],
  };
}

/** Why a worktree must be kept (unmerged work), or undefined when removing it loses nothing. */
export function unmergedWork(worktree: Worktree): string | undefined {
  const status = git(worktree.path, ["status", "--porcelain"]);
  if (!status.ok) return `git status failed: ${status.err}`;
  if (status.out !== "") return "it has uncommitted changes";
  const merged = git(worktree.root, ["merge-base", "--is-ancestor", worktree.branch, "HEAD"]);
  return merged.ok ? undefined : `its branch ${worktree.branch} has commits the project's HEAD does not`;
}

/** After the worker stopped: removes its worktree and branch when nothing is unmerged; else says why it is kept. */
export function retireWorktree(worktree: Worktree): { readonly removed: boolean; readonly kept?: string } {
  const kept = unmergedWork(worktree);
  if (kept !== undefined) return { removed: false, kept };
  const removed = git(worktree.root, ["worktree", "remove", worktree.path]);
  if (!removed.ok) return { removed: false, kept: `git worktree remove failed: ${removed.err}` };
  git(worktree.root, ["branch", "-d", worktree.branch]);
  return { removed: true };
}
