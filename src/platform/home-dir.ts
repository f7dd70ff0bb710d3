/**
 * The pi-tasks home directory (`PI_TASKS_HOME`; see `piTasksHome` in src/relay-client/config.ts).
 * It holds the identity's private key, the peers this identity trusts, the records of the
 * processes pi-tasks stops (spawned workers, embedded relays), and logs full of task text — so it
 * must be this user's alone:
 *
 * - Every part of pi-tasks creates the home, and any directory in it, through `ensureHome` /
 *   `ensureHomeSubdirectory`: mode 0700, missing parents included.
 * - A home that exists but gives group or others any access, belongs to another user or is not a
 *   directory is refused with `HOME_INVALID`, naming the fix (`chmod 700 …`). It is neither used
 *   nor repaired silently: another user who could enter it may already have planted a record or
 *   read a log, and only the person can judge that (as ssh refuses a ~/.ssh others can reach).
 *   A warning would go unread in RPC and print mode, where nobody watches the footer.
 * - A directory inside the home must be a real directory of this user's, not a symbolic link
 *   (its mode is not judged: nobody else can enter a 0700 home).
 */
import { existsSync, lstatSync, mkdirSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { TaskError } from "../protocol/errors.ts";
import { octalMode } from "./private-file.ts";

export const HOME_DIRECTORY_MODE = 0o700;
/** Permission bits of group and others: none may be set on the home. */
const GROUP_OTHER_BITS = 0o077;

function homeInvalid(path: string, problem: string, fix: string, extra: Record<string, unknown> = {}): TaskError {
  return new TaskError("HOME_INVALID", { message: `The pi-tasks home ${path} ${problem}.`, details: { path, problem, fix, ...extra } });
}

/** Why `path` (which exists) is no home of this user's alone; undefined when it is one. */
function homeProblem(path: string): TaskError | undefined {
  const stat = statSync(path);
  if (!stat.isDirectory())
    return homeInvalid(path, "is not a directory; remove it, or set PI_TASKS_HOME to a directory of your own", `rm ${path}`);
  if (process.platform === "win32") return undefined;
  const uid = process.getuid?.();
  if (uid !== undefined && stat.uid !== uid) {
    const fix = `chown -R ${uid} ${path} && chmod 700 ${path}`;
    return homeInvalid(
      path,
      `belongs to uid ${stat.uid}, not to you (uid ${uid}): that user controls your key, your peers and the records pi-tasks acts on; set PI_TASKS_HOME to a directory of your own, or, if it is yours, run \`${fix}\``,
      fix,
      { owner: stat.uid, uid },
    );
  }
  if ((stat.mode & GROUP_OTHER_BITS) !== 0) {
    const fix = `chmod 700 ${path}`;
    const mode = octalMode(stat.mode);
    return homeInvalid(
      path,
      `gives group or others access (mode ${mode}): they could read its logs or plant records pi-tasks acts on; run \`${fix}\``,
      fix,
      { mode },
    );
  }
  return undefined;
}

function created(path: string): void {
  try {
    mkdirSync(path, { recursive: true, mode: HOME_DIRECTORY_MODE });
  } catch (error) {
    // Something other than a directory is there: the checks that follow say what, and the fix.
    if ((error as NodeJS.ErrnoException).code === "EEXIST" && existsSync(path)) return;
    const reason = (error as Error).message;
    throw new TaskError("HOME_INVALID", {
      message: `The pi-tasks home directory ${path} cannot be created: ${reason}`,
      details: { path, problem: `it cannot be created (${reason})` },
      cause: error,
    });
  }
}

/** Creates the home (0700) when it is missing; refuses one that is not this user's alone. Answers its absolute path. */
export function ensureHome(home: string): string {
  const path = resolve(home);
  created(path);
  const problem = homeProblem(path);
  if (problem !== undefined) throw problem;
  return path;
}

/** `ensureHome`, then the directory `parts` inside it (0700 when created). Answers its path. */
export function ensureHomeSubdirectory(home: string, ...parts: string[]): string {
  const root = ensureHome(home);
  const path = join(root, ...parts);
  created(path);
  const stat = lstatSync(path);
  const uid = process.getuid?.();
  if (!stat.isDirectory())
    throw homeInvalid(
      path,
      "is not a directory (a symbolic link or a file); remove it, pi-tasks creates the directory again",
      `rm ${path}`,
    );
  if (uid !== undefined && stat.uid !== uid)
    throw homeInvalid(path, `belongs to uid ${stat.uid}, not to you (uid ${uid}); remove it, pi-tasks creates it again`, `rm -r ${path}`, {
      owner: stat.uid,
      uid,
    });
  return path;
}
