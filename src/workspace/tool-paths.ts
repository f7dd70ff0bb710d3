/**
 * Where a tool's path argument lands on disk, for the grant check (src/protocol/grant.ts): resolved
 * as Pi 1.6's own file tools resolve it — Unicode spaces read as plain spaces, one leading `@`
 * dropped, `~` and `~/…` the home directory, a `file://` URL as the path it names, anything relative
 * taken from the working directory — and then through symbolic links: the real path of the deepest
 * part that exists, with the parts that do not exist yet appended (a file about to be written). A
 * scope is resolved the same way, so a link inside a scope that points out of it leads outside.
 */
import { realpathSync } from "node:fs";
import { homedir } from "node:os";
import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The spaces Pi's tools read as a plain space (its `normalizeUnicodeSpaces`). */
const UNICODE_SPACES = /[\u00A0\u2000-\u200A\u202F\u205F\u3000]/g;

/** The path a Pi file tool would open for `raw` in `cwd`, before symbolic links. */
export function piToolPath(raw: string, cwd: string, home: string = homedir()): string {
  let path = raw.replace(UNICODE_SPACES, " ");
  if (path.startsWith("@")) path = path.slice(1);
  if (path === "~") path = home;
  else if (path.startsWith("~/")) path = join(home, path.slice(2));
  if (path.startsWith("file://")) {
    try {
      path = fileURLToPath(path);
    } catch {
      // Not a file URL Pi could open either: judged as the text it is.
    }
  }
  return isAbsolute(path) ? resolve(path) : resolve(cwd, path);
}

/** `path` with every symbolic link in the part that exists resolved; the rest (not there yet) appended. */
export function realPathOf(path: string): string {
  const missing: string[] = [];
  let existing = resolve(path);
  for (;;) {
    try {
      const real = realpathSync(existing);
      return missing.length === 0 ? real : join(real, ...missing.reverse());
    } catch {
      const parent = dirname(existing);
      if (parent === existing) return resolve(path);
      missing.push(basename(existing));
      existing = parent;
    }
  }
}

/** Where a tool call's path argument lands: as Pi resolves it, then through symbolic links. */
export function toolPathOnDisk(raw: string, cwd: string, home: string = homedir()): string {
  return realPathOf(piToolPath(raw, cwd, home));
}
