/**
 * A workspace per worker by default (src/workspace/workspace.ts): a git worktree in a repository, a
 * scratch copy outside git (src/workspace/scratch.ts), the project itself only when asked. The copy
 * is bounded, never holds the pi-tasks home, and is removed at stop only when nothing in it changed.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createScratch, retireScratch } from "../../src/workspace/scratch.ts";
import { createWorkspace } from "../../src/workspace/workspace.ts";
import { maxScratchCopyBytes, maxScratchCopyEntries } from "../../src/protocol/limits.ts";
import { thrown } from "../../testkit/async.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function made(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
}

function plainProject(): { project: string; home: string } {
  const project = made("pi-tasks-plain-");
  mkdirSync(join(project, "src"));
  writeFileSync(join(project, "src", "a.ts"), "export const a = 1;\n");
  symlinkSync("src/a.ts", join(project, "link.ts"));
  return { project, home: made("pi-tasks-home-") };
}

describe("a scratch copy", () => {
  test("copies the project (links as links) into the home's workspaces; the worker's edits never reach the project", () => {
    const { project, home } = plainProject();
    const copy = createScratch(project, "builder", home, 1_000);
    expect(copy.path).toBe(join(home, "workspaces", "builder-rs"));
    expect(readFileSync(join(copy.path, "link.ts"), "utf8")).toBe("export const a = 1;\n");
    writeFileSync(join(copy.path, "src", "a.ts"), "export const a = 2;\n");
    expect(readFileSync(join(project, "src", "a.ts"), "utf8")).toBe("export const a = 1;\n");
  });

  test("stopping removes a copy with no change, and keeps one with an edit, a new or a removed file, saying what", () => {
    const { project, home } = plainProject();
    const idle = createScratch(project, "idle", home, 1);
    expect(retireScratch(idle)).toEqual({ removed: true });
    expect(existsSync(idle.path)).toBe(false);
    expect(existsSync(idle.manifest)).toBe(false);
    for (const [index, change] of [
      (path: string) => writeFileSync(join(path, "src", "a.ts"), "export const a = 22;\n"),
      (path: string) => writeFileSync(join(path, "new.txt"), "new"),
      (path: string) => rmSync(join(path, "link.ts")),
    ].entries()) {
      const copy = createScratch(project, `w${index}`, home, index + 10);
      change(copy.path);
      const retired = retireScratch(copy);
      expect(retired.removed).toBe(false);
      expect(retired.kept).toStartWith("it holds changes: ");
      expect(existsSync(copy.path)).toBe(true);
    }
  });

  test(`more than maxScratchCopyEntries (${maxScratchCopyEntries}) entries, or more than maxScratchCopyBytes, is WORKSPACE_TOO_LARGE and copies nothing`, () => {
    const { project, home } = plainProject();
    // A sparse file: its size counts, no disk is spent.
    writeFileSync(join(project, "big.bin"), "");
    truncateSync(join(project, "big.bin"), maxScratchCopyBytes + 1);
    const tooBig = thrown(() => createScratch(project, "big", home));
    expect(tooBig.code).toBe("WORKSPACE_TOO_LARGE");
    expect(tooBig.message).toContain("worktree: false");
    rmSync(join(project, "big.bin"));
    // The project holds 3 entries (src, src/a.ts, link.ts): files up to one more than the bound.
    mkdirSync(join(project, "many"));
    for (let index = 0; index < maxScratchCopyEntries - 3; index += 1) writeFileSync(join(project, "many", String(index)), "");
    expect(thrown(() => createScratch(project, "many", home)).code).toBe("WORKSPACE_TOO_LARGE");
    expect(existsSync(join(home, "workspaces"))).toBe(false);
  });

  test("a project holding the pi-tasks home is never copied (its keys would go with it)", () => {
    const project = made("pi-tasks-holding-");
    const home = join(project, ".pi-tasks");
    mkdirSync(home);
    writeFileSync(join(home, "identity.json"), "the private key");
    const error = thrown(() => createScratch(project, "w", home));
    expect(error.code).toBe("WORKTREE_UNAVAILABLE");
    expect(existsSync(join(home, "workspaces"))).toBe(false);
  });
});

describe("the workspace a spawned worker gets", () => {
  test("by default: a worktree in a git repository, a scratch copy outside git; false: the project itself; true outside git: WORKTREE_UNAVAILABLE", () => {
    const { project, home } = plainProject();
    const scratch = createWorkspace(project, "plain", home, undefined);
    expect(scratch.scratch?.path).toBe(scratch.workDir);
    expect(scratch.worktree).toBeUndefined();
    expect(createWorkspace(project, "itself", home, false)).toEqual({ workDir: project });
    expect(thrown(() => createWorkspace(project, "asked", home, true)).code).toBe("WORKTREE_UNAVAILABLE");
    const git = (...args: string[]) =>
      spawnSync("git", ["-C", project, "-c", "user.email=t@example.invalid", "-c", "user.name=t", ...args], { encoding: "utf8" });
    git("init", "-q", "-b", "main");
    git("add", ".");
    git("commit", "-q", "-m", "first");
    const tree = createWorkspace(join(project, "src"), "tree", home, undefined);
    expect(tree.worktree?.branch).toStartWith("pi-tasks/tree-");
    expect(tree.workDir).toBe(join(tree.worktree!.path, "src"));
  });
});
