/**
 * A workspace per worker: a git worktree of the project on a new branch, so that parallel workers'
 * edits never land in one tree (`agent_task_spawn {worktree: true}`, or a profile's `worktree: true`).
 * Git does the work (`git worktree`); this module only names things and decides what to keep:
 * - the worktree lives in this Pi's pi-tasks home (`worktrees/<name>-<stamp>`), on branch
 *   `pi-tasks/<name>-<stamp>` from the project's current commit;
 * - a worker's result carries its branch and a summary of what changed (`worktreeChanges`);
 * - when the worker stops, the worktree is removed only when removing it loses nothing (no
 *   uncommitted change, untracked or ignored file; its branch and its HEAD, detached or not, add
 *   nothing the project's HEAD lacks; no commit only its history holds); otherwise it is kept and
 *   the stop says where, and how to merge or remove it.
 */
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync } from "node:fs";
import { join, relative } from "node:path";
import { TaskError } from "../protocol/errors.ts";
import { maxCarriedDiffBytes, maxWorkspaceDiffChars, maxWorkspaceUntracked } from "../protocol/limits.ts";

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
  const start = carryUncommitted(root.out, path) ?? base.out;
  return { worktree: { path, branch, base: start, root: root.out }, workDir: join(path, relative(root.out, projectDir)) };
}

/** Who commits the person's uncommitted work in a worker's worktree (never the person's own identity). */
const CARRY_IDENTITY = ["-c", "user.name=pi-tasks", "-c", "user.email=pi-tasks@localhost"];
const CARRY_MESSAGE = "pi-tasks: the uncommitted work the worker started from";

/**
 * The person's uncommitted work — tracked changes and untracked files git does not ignore — copied
 * into the new worktree and committed there as its base, so the worker starts from what the person
 * sees and its changes are measured from that. Returns the base commit, or undefined when there was
 * nothing to carry. `WORKTREE_UNAVAILABLE` when it cannot be carried (the worktree is removed).
 */
function carryUncommitted(root: string, path: string): string | undefined {
  const diff = spawnSync("git", ["-C", root, "diff", "--binary", "HEAD"], { encoding: "buffer", maxBuffer: maxCarriedDiffBytes });
  const listed = git(root, ["ls-files", "--others", "--exclude-standard", "-z"]);
  const untracked = listed.ok ? listed.out.split("\0").filter((name) => name !== "") : [];
  if (diff.status !== 0 || !listed.ok) return dropWorktree(root, path, diff.error?.message ?? listed.err);
  if (diff.stdout.length === 0 && untracked.length === 0) return undefined;
  if (diff.stdout.length > 0) {
    const applied = spawnSync("git", ["-C", path, "apply", "--binary", "--whitespace=nowarn"], { input: diff.stdout, encoding: "utf8" });
    if (applied.status !== 0) return dropWorktree(root, path, applied.stderr);
  }
  for (const name of untracked) cpSync(join(root, name), join(path, name), { verbatimSymlinks: true });
  const staged = git(path, ["add", "-A"]);
  if (!staged.ok) return dropWorktree(root, path, staged.err);
  const committed = git(path, [...CARRY_IDENTITY, "commit", "-q", "--no-verify", "-m", CARRY_MESSAGE]);
  if (!committed.ok) return dropWorktree(root, path, committed.err);
  return git(path, ["rev-parse", "HEAD"]).out;
}

function dropWorktree(root: string, path: string, problem: string): never {
  const branch = git(path, ["rev-parse", "--abbrev-ref", "HEAD"]);
  git(root, ["worktree", "remove", "--force", path]);
  if (branch.ok) git(root, ["branch", "-D", branch.out]);
  throw unavailable("the uncommitted work could not be carried into it", { git: problem });
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

/** Commits a list of kept work names, at most (the rest counted). */
const MAX_NAMED_COMMITS = 3;
/** Characters of a commit id in what is said. */
const SHORT_COMMIT_CHARS = 12;

/** At most `MAX_NAMED_COMMITS` of `items` in words, the rest counted. */
export const namedItems = (items: readonly string[], shorten: (item: string) => string = (item) => item) =>
  items.length <= MAX_NAMED_COMMITS
    ? items.map(shorten).join(", ")
    : `${items.slice(0, MAX_NAMED_COMMITS).map(shorten).join(", ")} and ${items.length - MAX_NAMED_COMMITS} more`;
const short = (commit: string) => commit.slice(0, SHORT_COMMIT_CHARS);

/**
 * Why a worktree must be kept (work removing it would lose), or undefined when removing it loses
 * nothing: uncommitted changes or untracked files, ignored files (a build the worker made), its
 * branch or its HEAD (also detached) ahead of the project's HEAD, or commits only its own history
 * (its HEAD's reflog) still holds — reachable from no branch.
 */
export function unmergedWork(worktree: Worktree): string | undefined {
  const status = git(worktree.path, ["status", "--porcelain", "--ignored"]);
  if (!status.ok) return `git status failed: ${status.err}`;
  const entries = status.out === "" ? [] : status.out.split("\n");
  if (entries.some((entry) => !entry.startsWith("!! "))) return "it has uncommitted changes";
  if (entries.length > 0) return `it has ignored files (${namedItems(entries.map((entry) => entry.slice(3)))})`;
  const project = git(worktree.root, ["rev-parse", "HEAD"]);
  if (!project.ok) return `git rev-parse failed: ${project.err}`;
  // The base (the project's commit, or the person's uncommitted work carried over on it) is the person's own.
  const merged = (commit: string, into: string) => git(worktree.root, ["merge-base", "--is-ancestor", commit, into]).ok;
  const ahead = (commit: string) => !merged(commit, project.out) && !merged(commit, worktree.base);
  if (ahead(worktree.branch)) return `its branch ${worktree.branch} has commits the project's HEAD does not`;
  const head = git(worktree.path, ["rev-parse", "HEAD"]);
  if (!head.ok) return `git rev-parse failed: ${head.err}`;
  if (ahead(head.out)) return `its HEAD (${short(head.out)}) has commits the project's HEAD does not`;
  const history = git(worktree.path, ["reflog", "--format=%H", "HEAD"]);
  if (!history.ok) return `git reflog failed: ${history.err}`;
  const seen = [...new Set(history.out.split("\n").filter((commit) => commit !== ""))];
  if (seen.length === 0) return undefined;
  const lost = git(worktree.root, ["rev-list", "--no-walk", ...seen, "--not", "--branches", project.out, worktree.base]);
  if (!lost.ok) return `git rev-list failed: ${lost.err}`;
  return lost.out === "" ? undefined : `its history holds commits no branch has (${namedItems(lost.out.split("\n"), short)})`;
}

/** After the worker stopped: removes its worktree and branch when nothing is unmerged; else says why it is kept. */
export function retireWorktree(worktree: Worktree): { readonly removed: boolean; readonly kept?: string } {
  const kept = unmergedWork(worktree);
  if (kept !== undefined) return { removed: false, kept };
  const removed = git(worktree.root, ["worktree", "remove", worktree.path]);
  if (!removed.ok) return { removed: false, kept: `git worktree remove failed: ${removed.err}` };
  // Nothing on it but the person's own (merged, or the uncommitted work carried over as its base).
  git(worktree.root, ["branch", "-D", worktree.branch]);
  return { removed: true };
}
