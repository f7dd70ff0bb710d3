/**
 * The relay secret of an OS user (docs/security.md, "The relay secret"): one random secret per
 * loopback port, in a file only that user can read. The embedded relay a Pi starts on a port is
 * given that port's file (`pi-tasks relay --secret-file`) and accepts only clients that prove they
 * hold it; a Pi checks that whatever answers on the port proves it too before sending anything.
 *
 * - Where: `$PI_TASKS_RELAY_SECRET_DIR/<port>.secret`, by default `~/.pi/pi-tasks-relays/` — in the
 *   user's home, not in `PI_TASKS_HOME`: every Pi of the user, whatever its identity, shares the
 *   relay. Not `$XDG_RUNTIME_DIR`: a Pi started from cron or an ssh session without it would look
 *   elsewhere and take its own relay for a stranger's.
 * - Safe or refused (`RELAY_SECRET_INVALID`, naming the fix): the directory and the file must be
 *   this user's, not symlinks, the directory mode 0700 and the file not open to group or others.
 *   The file is opened without following a link and judged by what was opened.
 * - Made once, race-free (created complete and linked into place; whoever loses reads the winner's),
 *   never replaced while it exists: a relay running with it would stop recognising its own users.
 * - Content: the secret as base64url text (`relaySecretBytes` random bytes), one line.
 */
import { randomBytes } from "node:crypto";
import { closeSync, constants, fstatSync, lstatSync, mkdirSync, openSync, readFileSync, type Stats } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { TaskError } from "../protocol/errors.ts";
import { relaySecretBytes, maxRelaySecretFileBytes, minRelaySecretBytes } from "../protocol/limits.ts";
import { createFileExclusive } from "../platform/atomic-file.ts";

/** Names the directory of the user's relay secrets (tests; a user who keeps them elsewhere). */
export const RELAY_SECRET_DIR_VARIABLE = "PI_TASKS_RELAY_SECRET_DIR";
/** Names a relay secret file: the relay this Pi uses must prove it (any relay, also an explicit URL). */
export const RELAY_SECRET_FILE_VARIABLE = "PI_TASKS_RELAY_SECRET_FILE";

const SECRET_DIRECTORY_MODE = 0o700;
const SECRET_FILE_MODE = 0o600;
/** Permission bits of group and others: none may be set. */
const GROUP_OTHER_BITS = 0o077;
const PERMISSION_BITS = 0o777;
const BASE64URL_TEXT = /^[A-Za-z0-9_-]+$/;
/** Whether this platform has owners and modes to check (not Windows). */
const POSIX = process.platform !== "win32";

type Env = Record<string, string | undefined>;

export function relaySecretDir(env: Env): string {
  const explicit = env[RELAY_SECRET_DIR_VARIABLE]?.trim();
  return explicit ? resolve(explicit) : join(homedir(), ".pi", "pi-tasks-relays");
}

export function relaySecretPath(env: Env, port: number): string {
  return join(relaySecretDir(env), `${port}.secret`);
}

function invalid(path: string, problem: string, fix: string): TaskError {
  return new TaskError("RELAY_SECRET_INVALID", {
    message: `The relay secret ${path} cannot be used: ${problem}; ${fix}.`,
    details: { path, problem, fix },
  });
}

function octal(mode: number): string {
  return `0${(mode & PERMISSION_BITS).toString(8).padStart(3, "0")}`;
}

/** Refuses what another user owns or group and others may use (`what` names it in the message). */
function checkOwnership(path: string, stat: Stats, what: "directory" | "file"): void {
  if (!POSIX) return;
  const uid = process.getuid?.();
  if (uid !== undefined && stat.uid !== uid) {
    throw invalid(
      path,
      `the ${what} belongs to uid ${stat.uid}, not to you (uid ${uid})`,
      `remove it, or set ${what === "file" ? RELAY_SECRET_FILE_VARIABLE : RELAY_SECRET_DIR_VARIABLE} to one of your own`,
    );
  }
  if ((stat.mode & GROUP_OTHER_BITS) !== 0) {
    const wanted = what === "file" ? "600" : "700";
    throw invalid(
      path,
      `group or others may use the ${what} (mode ${octal(stat.mode)})`,
      `run \`chmod ${wanted} ${path}\` (and, if others could read the secret, remove the secret so a new one is made)`,
    );
  }
}

/** The secret directory, made 0700 when missing; refused when it is not safely the user's own. */
export function ensureSecretDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: SECRET_DIRECTORY_MODE });
  const stat = lstatSync(dir);
  if (stat.isSymbolicLink() || !stat.isDirectory()) throw invalid(dir, "it is not a directory (or it is a symbolic link)", "remove it");
  checkOwnership(dir, stat, "directory");
}

function parseSecret(path: string, text: string): Buffer {
  const trimmed = text.trim();
  const secret = BASE64URL_TEXT.test(trimmed) ? Buffer.from(trimmed, "base64url") : Buffer.alloc(0);
  if (secret.length < minRelaySecretBytes) {
    throw invalid(
      path,
      `it does not hold a secret of at least ${minRelaySecretBytes} bytes as base64url text`,
      "remove it so a new one is made, or copy the file again",
    );
  }
  return secret;
}

/** The secret in `path`; undefined when there is no such file. Throws `RELAY_SECRET_INVALID`. */
export function readRelaySecret(path: string): Buffer | undefined {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return undefined;
    if (code === "ELOOP") throw invalid(path, "it is a symbolic link", "replace it with the file itself");
    throw invalid(path, `it cannot be read (${(error as Error).message})`, "check its directory and permissions");
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) throw invalid(path, "it is not a regular file", "remove it");
    checkOwnership(path, stat, "file");
    if (stat.size > maxRelaySecretFileBytes)
      throw invalid(path, `it is larger than ${maxRelaySecretFileBytes} bytes`, "remove it so a new one is made");
    return parseSecret(path, readFileSync(fd, "utf8"));
  } finally {
    closeSync(fd);
  }
}

/** Whether `path` exists (anything but "no such file" counts as there: reading it then says what is wrong). */
export function relaySecretExists(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== "ENOENT";
  }
}

/** The secret in `path`, made (with its directory) when missing. Throws `RELAY_SECRET_INVALID`. */
export function ensureRelaySecret(path: string): Buffer {
  const existing = readRelaySecret(path);
  if (existing !== undefined) return existing;
  ensureSecretDir(resolve(path, ".."));
  // Losing a race to another Pi leaves its secret in place: read that one.
  createFileExclusive(path, `${randomBytes(relaySecretBytes).toString("base64url")}\n`, SECRET_FILE_MODE);
  const made = readRelaySecret(path);
  if (made === undefined) throw invalid(path, "it vanished right after it was made", "try again");
  return made;
}
