/**
 * Reading a file only this user may control: identity.json (the private key), peers.json (whom
 * this identity trusts) and the Redis password file. Whoever can replace or redirect such a file
 * decides who this installation is, whom it trusts, or learns a secret — so a file is read only
 * when it is
 *
 * - not a symbolic link (a link could point at another user's file, or be re-pointed later),
 * - a regular file (a FIFO or a device could block or feed anything),
 * - owned by this user (another owner could rewrite it at any time),
 * - without the caller's forbidden permission bits (group or others writing, or reading a secret).
 *
 * The file is opened without following a link (`O_NOFOLLOW`) and without waiting on a FIFO
 * (`O_NONBLOCK`), and checked through the open descriptor, so what is checked is exactly what is read even
 * when the path is swapped in between. A refusal names the problem and its fix and never quotes the
 * file's content.
 */
import { closeSync, constants, fstatSync, openSync, readFileSync } from "node:fs";

/** What is wrong with a file, how to fix it, and facts for an error's details. */
export interface PrivateFileRefusal {
  /** A clause that follows the path, e.g. "is a symbolic link …; replace it …". Names the fix. */
  readonly problem: string;
  readonly fix: string;
  readonly details: Readonly<Record<string, unknown>>;
}

const PERMISSION_BITS = 0o777;
/** `O_NOFOLLOW` and `O_NONBLOCK` where the platform has them (not on Windows). */
const OPEN_FLAGS = constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0);
/** What `open` answers for a symbolic link under `O_NOFOLLOW` (Linux and macOS; some BSDs say EMLINK). */
const LINK_CODES = new Set(["ELOOP", "EMLINK"]);

export function octalMode(mode: number): string {
  return `0${(mode & PERMISSION_BITS).toString(8).padStart(3, "0")}`;
}

function linkRefusal(path: string): PrivateFileRefusal {
  const fix = `replace the link by the file itself (a regular file of your own, mode 600) at ${path}`;
  return {
    problem: `is a symbolic link; pi-tasks reads only a regular file of your own there (a link could lead to another user's file); ${fix}`,
    fix,
    details: { kind: "symbolic link" },
  };
}

/** The problem of an open file, checked through its descriptor; undefined when it may be read. */
function problemOf(fd: number, path: string, forbiddenBits: number): PrivateFileRefusal | undefined {
  const stat = fstatSync(fd);
  if (!stat.isFile())
    return {
      problem: `is not a regular file; remove it (pi-tasks reads only a regular file of your own there)`,
      fix: `rm ${path}`,
      details: { kind: "not a regular file" },
    };
  if (process.platform === "win32") return undefined;
  const uid = process.getuid?.();
  if (uid !== undefined && stat.uid !== uid) {
    const fix = `chown ${uid} ${path}`;
    return {
      problem: `belongs to uid ${stat.uid}, not to you (uid ${uid}), so that user could change it; if it is yours, run \`${fix}\`, else remove it`,
      fix,
      details: { owner: stat.uid, uid },
    };
  }
  if ((stat.mode & forbiddenBits) !== 0) {
    const fix = `chmod 600 ${path}`;
    const mode = octalMode(stat.mode);
    return { problem: `has mode ${mode}, which gives group or others access they must not have; run \`${fix}\``, fix, details: { mode } };
  }
  return undefined;
}

function unreadable(path: string, error: unknown): PrivateFileRefusal {
  return { problem: `cannot be read (${(error as Error).message})`, fix: `check ${path}`, details: { kind: "unreadable" } };
}

/**
 * The text of `path`, or undefined when it does not exist. Throws what `refuse` makes of a file
 * that may not be read (see the header), or of one that cannot be read at all.
 */
export function readPrivateFile(path: string, forbiddenBits: number, refuse: (refusal: PrivateFileRefusal) => Error): string | undefined {
  let fd: number;
  try {
    fd = openSync(path, OPEN_FLAGS);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? "";
    if (code === "ENOENT") return undefined;
    throw refuse(LINK_CODES.has(code) ? linkRefusal(path) : unreadable(path, error));
  }
  let refusal: PrivateFileRefusal | undefined;
  let text = "";
  try {
    refusal = problemOf(fd, path, forbiddenBits);
    if (refusal === undefined) text = readFileSync(fd, "utf8");
  } catch (error) {
    refusal = unreadable(path, error);
  } finally {
    closeSync(fd);
  }
  if (refusal !== undefined) throw refuse(refusal);
  return text;
}
