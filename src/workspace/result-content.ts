/**
 * Results that travel: a worker's completed result carries its file content, so an origin on another
 * machine can use it (docs/protocol.md, "Results that travel"). Git and node:crypto do the work.
 *
 * - At the worker (`collectContent`): in its own worktree, a git diff of everything since the
 *   worktree's base (commits, edits and new files, binary-safe), made with a temporary index so the
 *   worktree's own index is untouched; elsewhere, the files `result.changedFiles` names. Every path
 *   must be relative and inside the worker's project (`checkChangedFiles`, INVALID_RESULT_PATH).
 *   Content over `maxResultContentBytes` is not attached: the result says so (`omitted`).
 * - At the origin (`applyContent`), only on request: the hashes are checked, then the patch is
 *   checked with `git apply --check` and applied, or the files are written — all or nothing; a file
 *   that exists with other content, or a hunk that does not apply, is a conflict (APPLY_CONFLICT,
 *   listed) and nothing changes.
 */
import { createHash } from "node:crypto";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, type Stats, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, isAbsolute, join, normalize, relative, resolve, sep } from "node:path";
import { TaskError } from "../protocol/errors.ts";
import { maxResultContentBytes, maxResultFiles } from "../protocol/limits.ts";
import { isWithin, leavesStart } from "../protocol/paths.ts";
import { ResultContent } from "../protocol/schemas.ts";
import { assertValid } from "../protocol/validate.ts";
import { git } from "./worktree.ts";

const sha256 = (data: string | Uint8Array) => createHash("sha256").update(data).digest("hex");

function badPath(path: unknown, problem: string): TaskError {
  return new TaskError("INVALID_RESULT_PATH", { message: `${String(path)}: ${problem}`, details: { path, problem } });
}

/** `path` as a normalized path relative to `root` and inside it (INVALID_RESULT_PATH otherwise). */
export function insideProject(root: string, path: unknown): string {
  if (typeof path !== "string" || path.length === 0) throw badPath(path, "not a path");
  if (isAbsolute(path)) throw badPath(path, "absolute; give it relative to the project");
  const normal = normalize(path);
  if (leavesStart(normal)) throw badPath(path, "leaves the project");
  // A symbolic link on the way may lead out of the project too — also one whose target does not
  // exist yet (writing through it would create that target, wherever it is).
  const real = realpathSync(root);
  let at = real;
  for (const part of normal.split(sep)) {
    at = join(at, part);
    const stat = lstatIfAny(at);
    if (stat === undefined) break;
    const target = stat.isSymbolicLink() ? linkTarget(path, at) : at;
    if (!isWithin(target, real)) throw badPath(path, "leads out of the project through a symbolic link");
  }
  return normal;
}

/** The entry at `at` itself (a symbolic link not followed), or undefined when there is none. */
function lstatIfAny(at: string): Stats | undefined {
  try {
    return lstatSync(at);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return undefined;
    throw error;
  }
}

/** Where the symbolic link at `at` leads; one that leads nowhere cannot be shown to stay inside (INVALID_RESULT_PATH). */
function linkTarget(path: string, at: string): string {
  try {
    return realpathSync(at);
  } catch {
    throw badPath(path, "leads through a symbolic link whose target does not exist");
  }
}

/** Checks `result.changedFiles` (when given): a list of paths, each relative and inside the project. */
export function checkChangedFiles(root: string, changedFiles: unknown): readonly string[] {
  if (changedFiles === undefined) return [];
  if (!Array.isArray(changedFiles)) throw badPath(changedFiles, "result.changedFiles is a list of paths");
  return changedFiles.map((path) => insideProject(root, path));
}

/** A binary-safe diff of everything in the worktree at `cwd` since `base`, through a temporary index. */
function worktreePatch(cwd: string, base: string): string {
  const scratch = mkdtempSync(join(tmpdir(), "pi-tasks-index-"));
  try {
    const env = { GIT_INDEX_FILE: join(scratch, "index") };
    const top = git(cwd, ["rev-parse", "--show-toplevel"]);
    for (const args of [
      ["read-tree", base],
      ["add", "-A"],
    ]) {
      const step = git(top.out, args, env);
      if (!step.ok) throw new TaskError("RESULT_CONTENT_INVALID", { message: `git ${args[0]} failed: ${step.err}` });
    }
    const diff = git(top.out, ["diff", "--cached", "--binary", "--full-index", base], env);
    if (!diff.ok) throw new TaskError("RESULT_CONTENT_INVALID", { message: `git diff failed: ${diff.err}` });
    return diff.out === "" ? "" : `${diff.out}\n`;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** The named files (those that still exist) as carried content; the missing ones listed as absent. */
function changedFileContent(cwd: string, paths: readonly string[]): Pick<ResultContent, "files" | "absent"> {
  const files: NonNullable<ResultContent["files"]> = [];
  const absent: string[] = [];
  for (const path of paths) {
    const full = join(cwd, path);
    if (!existsSync(full) || !lstatSync(full).isFile()) {
      absent.push(path);
      continue;
    }
    const bytes = readFileSync(full);
    const text = bytes.toString("utf8");
    const utf8 = Buffer.from(text, "utf8").equals(bytes);
    files.push({ path, encoding: utf8 ? "utf8" : "base64", data: utf8 ? text : bytes.toString("base64"), sha256: sha256(bytes) });
  }
  return { ...(files.length === 0 ? {} : { files }), ...(absent.length === 0 ? {} : { absent }) };
}

const encodedBytes = (content: ResultContent) =>
  Buffer.byteLength(content.patch?.text ?? "") + (content.files ?? []).reduce((sum, file) => sum + Buffer.byteLength(file.data), 0);

/**
 * The content a completed result carries: the worktree's patch (given its `base`), else the changed
 * files; undefined when there is nothing to carry. Over `maxResultContentBytes` it says `omitted`.
 */
export function collectContent(
  cwd: string,
  options: { readonly base?: string; readonly changedFiles: readonly string[] },
): ResultContent | undefined {
  const files = options.changedFiles.length;
  if (options.base === undefined && files > maxResultFiles) {
    const bytes = options.changedFiles.reduce((sum, path) => sum + (existsSync(join(cwd, path)) ? lstatSync(join(cwd, path)).size : 0), 0);
    return { omitted: { code: "RESULT_TOO_LARGE", bytes, maxBytes: maxResultContentBytes, files, maxFiles: maxResultFiles } };
  }
  let content: ResultContent;
  if (options.base !== undefined) {
    const text = worktreePatch(cwd, options.base);
    if (text === "") return undefined;
    content = { patch: { format: "git-diff", text, sha256: sha256(text), base: options.base } };
  } else {
    content = changedFileContent(cwd, options.changedFiles);
    if (content.files === undefined && content.absent === undefined) return undefined;
  }
  const bytes = encodedBytes(content);
  if (bytes <= maxResultContentBytes) return content;
  return {
    ...(content.absent === undefined ? {} : { absent: content.absent }),
    omitted: { code: "RESULT_TOO_LARGE", bytes, maxBytes: maxResultContentBytes },
  };
}

/** What applying did: the files written, or the patch's files. */
export interface Applied {
  readonly mode: "patch" | "files";
  readonly paths: readonly string[];
}

function conflict(conflicts: readonly string[]): TaskError {
  return new TaskError("APPLY_CONFLICT", { message: `conflicts: ${conflicts.join("; ")}`, details: { conflicts } });
}

/** Applies a patch in the repository (or plain directory) at `cwd`: checked first, then applied. */
function applyPatch(cwd: string, patch: NonNullable<ResultContent["patch"]>): Applied {
  if (sha256(patch.text) !== patch.sha256) throw new TaskError("RESULT_CONTENT_INVALID", { message: "the patch does not match its hash" });
  const top = git(cwd, ["rev-parse", "--show-toplevel"]);
  const where = top.ok ? top.out : cwd;
  const scratch = mkdtempSync(join(tmpdir(), "pi-tasks-patch-"));
  try {
    const file = join(scratch, "result.patch");
    writeFileSync(file, patch.text);
    const checked = git(where, ["apply", "--check", "--verbose", file]);
    if (!checked.ok) throw conflict(checked.err.split("\n").filter((line) => line.startsWith("error:")));
    const stat = git(where, ["apply", "--numstat", file]);
    const applied = git(where, ["apply", file]);
    if (!applied.ok) throw conflict([applied.err]);
    return { mode: "patch", paths: stat.out.split("\n").map((line) => line.split("\t").at(-1) ?? line) };
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** Writes carried files into `cwd`, all or nothing: every path and hash checked, every conflict listed first. */
function applyFiles(cwd: string, files: NonNullable<ResultContent["files"]>): Applied {
  const planned = files.map((file) => {
    const bytes = file.encoding === "utf8" ? Buffer.from(file.data, "utf8") : Buffer.from(file.data, "base64");
    if (sha256(bytes) !== file.sha256) throw new TaskError("RESULT_CONTENT_INVALID", { message: `${file.path} does not match its hash` });
    return { path: insideProject(cwd, file.path), bytes };
  });
  const conflicts = planned
    .filter(({ path, bytes }) => existsSync(join(cwd, path)) && !readFileSync(join(cwd, path)).equals(bytes))
    .map(({ path }) => `${path} exists with other content`);
  if (conflicts.length > 0) throw conflict(conflicts);
  for (const { path, bytes } of planned) {
    mkdirSync(dirname(resolve(cwd, path)), { recursive: true });
    writeFileSync(resolve(cwd, path), bytes);
  }
  return { mode: "files", paths: planned.map(({ path }) => relative(cwd, resolve(cwd, path))) };
}

/** Applies a result's content to the checkout at `cwd` (only on request: a tool or a command). */
export function applyContent(cwd: string, raw: unknown): Applied {
  if (raw === undefined) throw new TaskError("NO_RESULT_CONTENT");
  const content = assertValid(ResultContent, raw, { code: "RESULT_CONTENT_INVALID", pathPrefix: "/result/content" });
  if (content.patch !== undefined) return applyPatch(cwd, content.patch);
  if (content.files !== undefined) return applyFiles(cwd, content.files);
  throw new TaskError("NO_RESULT_CONTENT", {
    details: content.omitted === undefined ? {} : { omitted: content.omitted },
  });
}
