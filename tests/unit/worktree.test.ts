/**
 * A workspace per worker (src/workspace/worktree.ts) on a real git repository: a worktree on a new branch
 * from the project's commit, a summary of what changed, and retirement that keeps unmerged work
 * and removes what holds nothing new.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createWorktree, retireWorktree, worktreeChanges } from "../../src/workspace/worktree.ts";
import { thrown } from "../../testkit/async.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function git(cwd: string, ...args: string[]): string {
  const run = spawnSync("git", ["-C", cwd, "-c", "user.email=t@example.invalid", "-c", "user.name=t", ...args], { encoding: "utf8" });
  if (run.status !== 0) throw new Error(run.stderr);
  return run.stdout.trim();
}

function repo(): { root: string; home: string } {
  const root = mkdtempSync(join(tmpdir(), "pi-tasks-repo-"));
  const home = mkdtempSync(join(tmpdir(), "pi-tasks-home-"));
  dirs.push(root, home);
  git(root, "init", "-q", "-b", "main");
  mkdirSync(join(root, "src"));
  writeFileSync(join(root, "src", "a.ts"), "export const a = 1;\n");
  git(root, "add", ".");
  git(root, "commit", "-q", "-m", "first");
  return { root, home };
}

describe("a worker's worktree", () => {
  test("is made on a new branch from the project's commit; the worker's directory keeps its place inside", () => {
    const { root, home } = repo();
    const { worktree, workDir } = createWorktree(join(root, "src"), "builder", home, 1_000);
    expect(worktree).toMatchObject({
      branch: "pi-tasks/builder-rs",
      base: git(root, "rev-parse", "HEAD"),
      path: join(home, "worktrees", "builder-rs"),
    });
    expect(workDir).toBe(join(worktree.path, "src"));
    expect(existsSync(join(workDir, "a.ts"))).toBe(true);
  });

  test("what changed is summed up: edits, commits and new files since the base", () => {
    const { root, home } = repo();
    const { worktree } = createWorktree(root, "builder", home);
    writeFileSync(join(worktree.path, "src", "a.ts"), "export const a = 2;\n");
    writeFileSync(join(worktree.path, "new.txt"), "new\n");
    const changes = worktreeChanges(worktree.path, worktree.base);
    expect(changes.diffStat).toContain("src/a.ts");
    expect(changes.untracked).toEqual(["new.txt"]);
  });

  test("retiring keeps unmerged work (uncommitted, or commits HEAD lacks) and removes a worktree that holds nothing new", () => {
    const { root, home } = repo();
    const { worktree } = createWorktree(root, "builder", home);
    writeFileSync(join(worktree.path, "src", "a.ts"), "export const a = 3;\n");
    expect(retireWorktree(worktree)).toEqual({ removed: false, kept: "it has uncommitted changes" });
    git(worktree.path, "commit", "-q", "-am", "work");
    expect(retireWorktree(worktree).kept).toBe(`its branch ${worktree.branch} has commits the project's HEAD does not`);
    git(root, "merge", "-q", worktree.branch);
    expect(retireWorktree(worktree)).toEqual({ removed: true });
    expect(existsSync(worktree.path)).toBe(false);
    const untouched = createWorktree(root, "idle", home).worktree;
    expect(retireWorktree(untouched)).toEqual({ removed: true });
  });

  // Issue 37: stopping a worker removed its worktree though it held a commit on a detached HEAD, and deleted its ignored files.
  test("a commit on a detached HEAD, or one only the worktree's history holds, keeps the worktree", () => {
    const { root, home } = repo();
    const { worktree } = createWorktree(root, "builder", home);
    git(worktree.path, "checkout", "-q", "--detach");
    writeFileSync(join(worktree.path, "src", "a.ts"), "export const a = 4;\n");
    git(worktree.path, "commit", "-q", "-am", "detached work");
    const detached = git(worktree.path, "rev-parse", "HEAD");
    expect(retireWorktree(worktree).kept).toBe(`its HEAD (${detached.slice(0, 12)}) has commits the project's HEAD does not`);
    expect(existsSync(worktree.path)).toBe(true);
    // Back on its branch, the detached commit is reachable from no ref: only the worktree's own history (its reflog) holds it.
    git(worktree.path, "checkout", "-q", worktree.branch);
    expect(retireWorktree(worktree).kept).toBe(`its history holds commits no branch has (${detached.slice(0, 12)})`);
    expect(git(root, "cat-file", "-t", detached)).toBe("commit");
  });

  test("ignored files keep the worktree; a worktree with nothing of its own is still removed", () => {
    const { root, home } = repo();
    writeFileSync(join(root, ".gitignore"), "build/\n");
    git(root, "add", ".gitignore");
    git(root, "commit", "-q", "-m", "ignore build");
    const { worktree } = createWorktree(root, "builder", home);
    mkdirSync(join(worktree.path, "build"));
    writeFileSync(join(worktree.path, "build", "out.bin"), "made by the worker");
    expect(retireWorktree(worktree).kept).toBe("it has ignored files (build/)");
    expect(existsSync(join(worktree.path, "build", "out.bin"))).toBe(true);
    rmSync(join(worktree.path, "build"), { recursive: true });
    expect(retireWorktree(worktree)).toEqual({ removed: true });
  });

  // Issue 37: a workspace per worker by default — the worker starts from what the person sees.
  test("the person's uncommitted work goes with the worker (tracked edits, new files; not ignored ones), committed as its base", () => {
    const { root, home } = repo();
    writeFileSync(join(root, ".gitignore"), "build/\n");
    git(root, "add", ".gitignore");
    git(root, "commit", "-q", "-m", "ignore build");
    writeFileSync(join(root, "src", "a.ts"), "export const a = 'being edited';\n");
    writeFileSync(join(root, "notes.md"), "new, not added\n");
    mkdirSync(join(root, "build"));
    writeFileSync(join(root, "build", "out.bin"), "ignored");
    const before = git(root, "status", "--porcelain");
    const { worktree } = createWorktree(root, "builder", home);
    expect(readFileSync(join(worktree.path, "src", "a.ts"), "utf8")).toBe("export const a = 'being edited';\n");
    expect(readFileSync(join(worktree.path, "notes.md"), "utf8")).toBe("new, not added\n");
    expect(existsSync(join(worktree.path, "build"))).toBe(false);
    expect(worktree.base).not.toBe(git(root, "rev-parse", "HEAD"));
    expect(git(worktree.path, "log", "-1", "--format=%an %s")).toBe("pi-tasks pi-tasks: the uncommitted work the worker started from");
    // The person's checkout is as it was; the worker's changes are measured from what it started with.
    expect(git(root, "status", "--porcelain")).toBe(before);
    expect(worktreeChanges(worktree.path, worktree.base)).toEqual({ diffStat: "", untracked: [] });
    // Nothing of the worker's own: removed, branch and all.
    expect(retireWorktree(worktree)).toEqual({ removed: true });
    expect(git(root, "branch", "--list", worktree.branch)).toBe("");
    const working = createWorktree(root, "worker", home).worktree;
    writeFileSync(join(working.path, "src", "a.ts"), "export const a = 'the worker's';\n");
    expect(worktreeChanges(working.path, working.base).diffStat).toContain("src/a.ts");
    expect(retireWorktree(working)).toEqual({ removed: false, kept: "it has uncommitted changes" });
  });

  test("a project outside git gets none: WORKTREE_UNAVAILABLE, and nothing is made", () => {
    const plain = mkdtempSync(join(tmpdir(), "pi-tasks-plain-"));
    const home = mkdtempSync(join(tmpdir(), "pi-tasks-home-"));
    dirs.push(plain, home);
    expect(thrown(() => createWorktree(plain, "builder", home)).code).toBe("WORKTREE_UNAVAILABLE");
    expect(existsSync(join(home, "worktrees"))).toBe(false);
  });
});
