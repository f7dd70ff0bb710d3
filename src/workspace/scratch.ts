/**
 * A workspace per worker for a project outside git: a scratch copy of the project directory in this
 * Pi's pi-tasks home (`workspaces/<name>-<stamp>`), so that a worker's edits never land in the
 * person's files before they are applied (its result carries the files it changed; `agent_task_apply`
 * brings them over). The copy is bounded (`maxScratchCopyBytes`, `maxScratchCopyEntries`: beyond
 * them `WORKSPACE_TOO_LARGE`, nothing copied) and its manifest (every entry with its size and
 * modification time) is kept beside it, so that stopping the worker removes the copy only when
 * nothing in it changed; otherwise it is kept and the stop says where, and how to discard it.
 */
import { cpSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { TaskError } from "../protocol/errors.ts";
import { maxScratchCopyBytes, maxScratchCopyEntries } from "../protocol/limits.ts";
import { isWithin } from "../protocol/paths.ts";
import { namedItems } from "./worktree.ts";

export interface ScratchCopy {
  /** The copy (the worker's project directory). */
  readonly path: string;
  /** The project directory it was copied from. */
  readonly source: string;
  /** Its manifest, beside it: what the copy held when it was made. */
  readonly manifest: string;
}

/** Every entry below `dir` (relative path → kind, size and modification time), counted against the bounds as it goes. */
function inventory(dir: string, skip: (name: string) => boolean = () => false): Map<string, string> {
  const entries = new Map<string, string>();
  let bytes = 0;
  const tooLarge = (what: string) =>
    new TaskError("WORKSPACE_TOO_LARGE", {
      message: `The project is too large for a scratch copy (${what}); nothing was copied. Spawn the worker with worktree: false to let it work in the project itself, or make the project a git repository.`,
      details: { projectDir: dir, maxScratchCopyBytes, maxScratchCopyEntries },
    });
  for (const name of readdirSync(dir, { recursive: true, encoding: "utf8" })) {
    if (skip(name)) continue;
    const stat = lstatSync(join(dir, name));
    bytes += stat.isFile() ? stat.size : 0;
    entries.set(name, stat.isDirectory() ? "dir" : `${stat.isSymbolicLink() ? "link" : "file"} ${stat.size} ${stat.mtimeMs}`);
    if (entries.size > maxScratchCopyEntries) throw tooLarge(`more than ${maxScratchCopyEntries} entries`);
    if (bytes > maxScratchCopyBytes) throw tooLarge(`more than ${maxScratchCopyBytes} bytes`);
  }
  return entries;
}

/** Copies `projectDir` for the worker `name`; its manifest is what the copy holds now. */
export function createScratch(projectDir: string, name: string, home: string, now = Date.now()): ScratchCopy {
  if (isWithin(home, projectDir))
    throw new TaskError("WORKTREE_UNAVAILABLE", {
      message: `No scratch copy for the worker: the pi-tasks home ${home} is inside the project ${projectDir} (its keys would be copied). Spawn with worktree: false, or make the project a git repository.`,
      details: { projectDir, home },
    });
  inventory(projectDir);
  const dir = join(home, "workspaces");
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const path = join(dir, `${name}-${now.toString(36)}`);
  cpSync(projectDir, path, { recursive: true, verbatimSymlinks: true, preserveTimestamps: true, errorOnExist: true, force: false });
  const manifest = `${path}.manifest.json`;
  writeFileSync(manifest, JSON.stringify(Object.fromEntries(inventory(path))), { mode: 0o600 });
  return { path, source: projectDir, manifest };
}

/** What changed in the copy since it was made, in words, or undefined when nothing did. */
export function scratchChanges(copy: ScratchCopy): string | undefined {
  let before: Record<string, string>;
  try {
    before = JSON.parse(readFileSync(copy.manifest, "utf8")) as Record<string, string>;
  } catch (error) {
    return `its manifest cannot be read (${error instanceof Error ? error.message : String(error)})`;
  }
  const now = inventory(copy.path);
  const changed = [...now].filter(([name, entry]) => before[name] !== entry && !(entry === "dir" && before[name] === "dir"));
  const removed = Object.keys(before).filter((name) => !now.has(name));
  if (changed.length === 0 && removed.length === 0) return undefined;
  const entries = (count: number) => `${count} ${count === 1 ? "entry" : "entries"}`;
  return `${entries(changed.length)} changed or added, ${removed.length} removed (${namedItems([...changed.map(([name]) => name), ...removed])})`;
}

/** After the worker stopped: removes its copy when nothing in it changed; else says why it is kept. */
export function retireScratch(copy: ScratchCopy): { readonly removed: boolean; readonly kept?: string } {
  let kept: string | undefined;
  try {
    kept = scratchChanges(copy);
  } catch (error) {
    kept = `it cannot be compared (${error instanceof Error ? error.message : String(error)})`;
  }
  if (kept !== undefined) return { removed: false, kept: `it holds changes: ${kept}` };
  rmSync(copy.path, { recursive: true, force: true });
  rmSync(copy.manifest, { force: true });
  return { removed: true };
}
