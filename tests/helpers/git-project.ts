/**
 * Git projects for tests: a repository with one commit in a fresh temporary directory (removed by
 * `removeProjects()`), and git run as a fixed test author.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const made: string[] = [];

/** Runs git in `dir` as the test author; returns its output (stdout trimmed, and the status). */
export function git(dir: string, ...args: string[]): { readonly status: number | null; readonly stdout: string } {
  const run = spawnSync("git", ["-C", dir, "-c", "user.email=t@example.invalid", "-c", "user.name=t", ...args], { encoding: "utf8" });
  return { status: run.status, stdout: run.stdout.trim() };
}

/** A fresh temporary directory (removed by `removeProjects()`). */
export function scratchDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

/** A repository (branch `main`) with README.md in one commit, in `dir` (default: a fresh directory). */
export function gitProject(dir = scratchDir("pi-tasks-git-project-")): string {
  git(dir, "init", "-q", "-b", "main");
  writeFileSync(join(dir, "README.md"), "project\n");
  git(dir, "add", ".");
  git(dir, "commit", "-q", "-m", "first");
  return dir;
}

/** Removes every directory made here. */
export function removeProjects(): void {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
}
