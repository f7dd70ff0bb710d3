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
 *   checked with `git apply --check` and applied relative to the project (also inside a larger
 *   repository), or the files are written — all or nothing (staged beside their targets, renamed
 *   into place, taken back on any failure: APPLY_FAILED); a file that exists with other content, or
 *   a hunk that does not apply, is a conflict (APPLY_CONFLICT, listed) and nothing changes. No path
 *   of either form may lie inside `.git`, lead out through a symbolic link, or (a patch) make one.
 */
import { createHash } from "node:crypto";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  type Stats,
  writeFileSync,
} from "node:fs";
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
  // Git's own directory holds hooks and configuration that run code: no result writes there.
  if (normal.split(sep).some((part) => part.toLowerCase() === ".git")) throw badPath(path, "lies inside .git");
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

/**
 * Whether this session may write a path of the project (a grant it works under: the extension's
 * check), as the reason it may not, or undefined when it may. Applying checks every path first.
 */
export type WriteCheck = (path: string) => string | undefined;

/** Every path allowed by `mayWrite`, or PI_TASK_GRANT_DENIED with the first reason (nothing written). */
function allowed(paths: readonly string[], mayWrite: WriteCheck): void {
  for (const path of paths) {
    const reason = mayWrite(path);
    if (reason !== undefined) throw new TaskError("PI_TASK_GRANT_DENIED", { message: reason, details: { path } });
  }
}

/** File modes a patch may not give: a symbolic link (it could point anywhere once applied). */
const GIT_SYMLINK_MODE = "120000";
const LINK_MODE = new RegExp(`^(?:new file mode|new mode|old mode|deleted file mode) ${GIT_SYMLINK_MODE}$`, "m");

/**
 * Applies a patch in the project at `cwd` (a repository, a directory inside one, or a plain
 * directory): paths are the project's, applied from the repository's top under the project's own
 * directory; every path it touches checked as a carried file's is; checked with git first, then applied.
 */
function applyPatch(cwd: string, patch: NonNullable<ResultContent["patch"]>, mayWrite: WriteCheck): Applied {
  if (sha256(patch.text) !== patch.sha256) throw new TaskError("RESULT_CONTENT_INVALID", { message: "the patch does not match its hash" });
  if (LINK_MODE.test(patch.text)) throw badPath("(patch)", "makes a symbolic link");
  const top = git(cwd, ["rev-parse", "--show-toplevel"]);
  const where = top.ok ? top.out : cwd;
  const under = top.ok ? relative(realpathSync(top.out), realpathSync(cwd)) : "";
  const directory = under === "" ? [] : [`--directory=${under}`];
  const scratch = mkdtempSync(join(tmpdir(), "pi-tasks-patch-"));
  try {
    const file = join(scratch, "result.patch");
    writeFileSync(file, patch.text);
    const stat = git(where, ["apply", "--numstat", ...directory, file]);
    if (!stat.ok) throw conflict([stat.err]);
    const paths = stat.out
      .split("\n")
      .filter((line) => line !== "")
      .map((line) => insideProject(cwd, relative(under, line.split("\t").at(-1) ?? line)));
    // A rename or copy also touches its source, which the count names not: checked as well.
    const sources = [...patch.text.matchAll(/^(?:rename|copy) from (.+)$/gm)].map((match) => insideProject(cwd, match[1]));
    allowed([...paths, ...sources], mayWrite);
    const checked = git(where, ["apply", "--check", "--verbose", ...directory, file]);
    if (!checked.ok) throw conflict(checked.err.split("\n").filter((line) => line.startsWith("error:")));
    const applied = git(where, ["apply", ...directory, file]);
    if (!applied.ok) throw conflict([applied.err]);
    return { mode: "patch", paths };
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** Why carried files cannot be written as planned: one is under another, or something in the way; an empty list when they can. */
function obstacles(cwd: string, planned: readonly { path: string; bytes: Buffer }[]): string[] {
  const paths = planned.map(({ path }) => path);
  const nested = paths.find((path) => paths.some((other) => path.startsWith(`${other}${sep}`)));
  if (nested !== undefined) throw badPath(nested, "lies under another file this result writes");
  const found: string[] = [];
  for (const { path, bytes } of planned) {
    const parts = path.split(sep);
    const blocker = parts
      .slice(0, -1)
      .findIndex((_, index) => lstatIfAny(join(cwd, ...parts.slice(0, index + 1)))?.isDirectory() === false);
    const stat = lstatIfAny(join(cwd, path));
    if (blocker >= 0) found.push(`${path}: ${parts.slice(0, blocker + 1).join("/")} is a file`);
    else if (stat?.isDirectory() === true) found.push(`${path} is a directory`);
    else if (stat !== undefined && !readFileSync(join(cwd, path)).equals(bytes)) found.push(`${path} exists with other content`);
  }
  return found;
}

/** Writes carried files into `cwd`, all or nothing: every path and hash checked, every conflict listed first. */
function applyFiles(cwd: string, files: NonNullable<ResultContent["files"]>, mayWrite: WriteCheck): Applied {
  const planned = files.map((file) => {
    const bytes = file.encoding === "utf8" ? Buffer.from(file.data, "utf8") : Buffer.from(file.data, "base64");
    if (sha256(bytes) !== file.sha256) throw new TaskError("RESULT_CONTENT_INVALID", { message: `${file.path} does not match its hash` });
    return { path: insideProject(cwd, file.path), bytes };
  });
  allowed(
    planned.map(({ path }) => path),
    mayWrite,
  );
  const conflicts = obstacles(cwd, planned);
  if (conflicts.length > 0) throw conflict(conflicts);
  writeAllOrNothing(cwd, planned);
  return { mode: "files", paths: planned.map(({ path }) => relative(cwd, resolve(cwd, path))) };
}

/**
 * Stages every file beside its target, then renames them into place; on any failure, takes back
 * what it did — staged files, files it created, directories it made — and says why (APPLY_FAILED).
 */
function writeAllOrNothing(cwd: string, planned: readonly { path: string; bytes: Buffer }[]): void {
  const madeDirs: string[] = [];
  const staged: string[] = [];
  const created: string[] = [];
  try {
    for (const { path, bytes } of planned) {
      const target = resolve(cwd, path);
      const first = mkdirSync(dirname(target), { recursive: true });
      if (first !== undefined) madeDirs.push(first);
      const stage = `${target}.pi-tasks-apply`;
      writeFileSync(stage, bytes, { flag: "wx" });
      staged.push(stage);
    }
    for (const [index, { path }] of planned.entries()) {
      const target = resolve(cwd, path);
      const existed = existsSync(target);
      renameSync(staged[index]!, target);
      if (!existed) created.push(target);
    }
  } catch (error) {
    for (const path of [...staged, ...created]) rmSync(path, { force: true });
    for (const dir of madeDirs.reverse()) rmSync(dir, { recursive: true, force: true });
    throw new TaskError("APPLY_FAILED", { message: `applying stopped: ${(error as Error).message}`, cause: error, details: { cwd } });
  }
}

/** Applies a result's content to the checkout at `cwd` (only on request: a tool or a command). */
export function applyContent(cwd: string, raw: unknown, mayWrite: WriteCheck = () => undefined): Applied {
  if (raw === undefined) throw new TaskError("NO_RESULT_CONTENT");
  const content = assertValid(ResultContent, raw, { code: "RESULT_CONTENT_INVALID", pathPrefix: "/result/content" });
  if (content.patch !== undefined) return applyPatch(cwd, content.patch, mayWrite);
  if (content.files !== undefined) return applyFiles(cwd, content.files, mayWrite);
  throw new TaskError("NO_RESULT_CONTENT", {
    details: content.omitted === undefined ? {} : { omitted: content.omitted },
  });
}
