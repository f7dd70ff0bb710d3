/**
 * Whole-file writes that no reader can see half done: the text goes to a temporary file in the
 * same directory (created exclusively, with its mode set, flushed), which then appears under its
 * final name in one step.
 *
 * - `createFileExclusive`: `link(temp, final)`; fails when the final name exists, so of several
 *   processes creating the same file at once exactly one wins and the others read the winner's.
 * - `replaceFile`: `rename(temp, final)`; atomically replaces what was there.
 *
 * The temporary file is always removed (or renamed away); its name carries the pid and a random
 * part so concurrent writers never share one.
 */
import { randomUUID } from "node:crypto";
import { closeSync, fchmodSync, fsyncSync, linkSync, openSync, renameSync, rmSync, writeFileSync } from "node:fs";

function temporaryPath(path: string): string {
  return `${path}.${process.pid}.${randomUUID()}.tmp`;
}

function writeTemporary(path: string, text: string, mode: number): void {
  const fd = openSync(path, "wx", mode);
  try {
    // The umask may have narrowed the mode at open; set exactly the one asked for.
    fchmodSync(fd, mode);
    writeFileSync(fd, text);
    fsyncSync(fd);
  } catch (error) {
    closeSync(fd);
    rmSync(path, { force: true });
    throw error;
  }
  closeSync(fd);
}

/** Creates `path` holding `text` with `mode`; false (nothing written) when `path` already exists. */
export function createFileExclusive(path: string, text: string, mode: number): boolean {
  const temporary = temporaryPath(path);
  writeTemporary(temporary, text, mode);
  try {
    linkSync(temporary, path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw error;
  } finally {
    rmSync(temporary, { force: true });
  }
}

/** Replaces `path` (or creates it) with `text` and `mode` in one step. */
export function replaceFile(path: string, text: string, mode: number): void {
  const temporary = temporaryPath(path);
  writeTemporary(temporary, text, mode);
  try {
    renameSync(temporary, path);
  } catch (error) {
    rmSync(temporary, { force: true });
    throw error;
  }
}
