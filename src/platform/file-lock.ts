/**
 * The one lock-file implementation of pi-tasks, for work several processes must not do at once
 * (starting the embedded relay on a port, changing peers.json).
 *
 * - Taking: the lock file is created exclusively and already complete (`createFileExclusive`),
 *   holding `<pid> <random token>`, so nobody ever reads a lock without its holder.
 * - Stale: a lock whose holder is gone (its pid is not alive, or the file names no pid) and that is
 *   at least `staleMs` old (by its mtime) is taken over. Taking over moves the file aside and checks
 *   that it moved the very lock it found stale; a fresh lock moved by a late contender is put back.
 *   A lock whose holder is alive is never taken over, however old.
 * - Releasing removes the file only while it still holds this holder's token.
 */
import { randomUUID } from "node:crypto";
import { closeSync, fstatSync, linkSync, openSync, readFileSync, renameSync, rmSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { isAlive } from "./processes.ts";
import { createFileExclusive } from "./atomic-file.ts";

const LOCK_FILE_MODE = 0o600;
/** Create-or-take-over rounds of one `tryLock` (a lost race to a live holder ends it earlier). */
const TAKE_ROUNDS = 3;

export interface FileLock {
  readonly path: string;
  /** Removes the lock file if it is still this holder's; safe to call more than once. */
  release(): void;
}

export interface LockOptions {
  /** A lock whose holder is gone is taken over once it is this old (0: at once). */
  readonly staleMs: number;
}

export interface WaitLockOptions extends LockOptions {
  /** How long to keep asking while a live process holds the lock. */
  readonly waitMs: number;
  /** Pause between asks. */
  readonly pollMs: number;
}

interface SeenLock {
  readonly text: string;
  readonly pid: number | undefined;
  readonly ageMs: number;
}

/** The lock file as it is now; undefined when there is none. */
function readLock(path: string): SeenLock | undefined {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  try {
    const ageMs = Date.now() - fstatSync(fd).mtimeMs;
    const text = readFileSync(fd, "utf8");
    const first = text.trim().split(/\s+/)[0] ?? "";
    const pid = /^\d+$/.test(first) && Number(first) > 0 ? Number(first) : undefined;
    return { text, pid, ageMs };
  } finally {
    closeSync(fd);
  }
}

function isStale(seen: SeenLock, staleMs: number): boolean {
  if (seen.pid !== undefined && isAlive(seen.pid)) return false;
  return seen.ageMs >= staleMs;
}

/** Moves the stale lock `suspected` out of the way; a different (newer) lock found instead goes back. */
function takeOver(path: string, suspected: SeenLock): void {
  const aside = `${path}.${process.pid}.${randomUUID()}.stale`;
  try {
    renameSync(path, aside);
  } catch (error) {
    // Gone already: released, or another contender took it over first.
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
    throw error;
  }
  try {
    if (readFileSync(aside, "utf8") === suspected.text) return;
    try {
      linkSync(aside, path);
    } catch (error) {
      // A third process created a lock in between: it holds it now, and the holder whose lock was
      // moved learns nothing. Only three contenders racing over one stale lock reach this.
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
  } finally {
    rmSync(aside, { force: true });
  }
}

function holding(path: string, text: string): FileLock {
  let released = false;
  return {
    path,
    release() {
      if (released) return;
      released = true;
      if (readLock(path)?.text === text) rmSync(path, { force: true });
    },
  };
}

/** Takes the lock now, or answers undefined while a live process (or a not yet stale lock) holds it. */
export function tryLock(path: string, options: LockOptions): FileLock | undefined {
  const text = `${process.pid} ${randomUUID()}\n`;
  for (let round = 0; round < TAKE_ROUNDS; round += 1) {
    if (createFileExclusive(path, text, LOCK_FILE_MODE)) return holding(path, text);
    const seen = readLock(path);
    if (seen === undefined) continue;
    if (!isStale(seen, options.staleMs)) return undefined;
    takeOver(path, seen);
  }
  return undefined;
}

/** Takes the lock, asking again every `pollMs` for up to `waitMs`; undefined when it stays held. */
export async function waitForLock(path: string, options: WaitLockOptions): Promise<FileLock | undefined> {
  const deadline = Date.now() + options.waitMs;
  for (;;) {
    const lock = tryLock(path, options);
    if (lock !== undefined || Date.now() >= deadline) return lock;
    await sleep(Math.min(options.pollMs, Math.max(0, deadline - Date.now())));
  }
}

/** The pid the lock file names, when there is a lock file naming one. */
export function lockHolder(path: string): number | undefined {
  return readLock(path)?.pid;
}

/** Whether a lock file exists and names a live process. */
export function lockHeldByLiveProcess(path: string): boolean {
  const pid = lockHolder(path);
  return pid !== undefined && isAlive(pid);
}
