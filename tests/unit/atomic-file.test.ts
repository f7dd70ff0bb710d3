/**
 * Whole-file writes (src/platform/atomic-file.ts), under identity.json, peers.json and the relay
 * secret: the file gets exactly the mode asked for whatever the umask, an exclusive create never
 * replaces what is there, and no temporary file is left behind.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createFileExclusive, replaceFile } from "../../src/platform/atomic-file.ts";

const PERMISSIONS = 0o777;
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function scratch(): string {
  const dir = mkdtempSync(join(tmpdir(), "pi-tasks-atomic-file-"));
  dirs.push(dir);
  return dir;
}

/** Runs `write` under `umask`, restoring the process's umask after. */
function underUmask<T>(umask: number, write: () => T): T {
  const previous = process.umask(umask);
  try {
    return write();
  } finally {
    process.umask(previous);
  }
}

const mode = (path: string) => statSync(path).mode & PERMISSIONS;

describe("atomic file writes", () => {
  test("the file has exactly the mode asked for, whatever the umask", () => {
    // Guards atomic-file.ts writeTemporary: fchmod after open (the umask may narrow or the mode be wider).
    const dir = scratch();
    underUmask(0o277, () => {
      expect(createFileExclusive(join(dir, "created"), "text", 0o600)).toBe(true);
      replaceFile(join(dir, "replaced"), "text", 0o600);
    });
    underUmask(0o022, () => {
      expect(createFileExclusive(join(dir, "wide"), "text", 0o640)).toBe(true);
      replaceFile(join(dir, "wide-replaced"), "text", 0o640);
    });
    expect([mode(join(dir, "created")), mode(join(dir, "replaced")), mode(join(dir, "wide")), mode(join(dir, "wide-replaced"))]).toEqual([
      0o600, 0o600, 0o640, 0o640,
    ]);
  });

  test("an exclusive create over an existing file answers false and leaves it as it was; no temporary file stays", () => {
    // Guards atomic-file.ts createFileExclusive: link (never replace), EEXIST as false, the temporary removed.
    const dir = scratch();
    const path = join(dir, "identity.json");
    writeFileSync(path, "the first", { mode: 0o600 });
    expect(createFileExclusive(path, "a second", 0o600)).toBe(false);
    expect(readFileSync(path, "utf8")).toBe("the first");
    expect(createFileExclusive(join(dir, "new.json"), "made", 0o600)).toBe(true);
    expect(readFileSync(join(dir, "new.json"), "utf8")).toBe("made");
    expect(readdirSync(dir).sort()).toEqual(["identity.json", "new.json"]);
  });

  test("a replace puts the whole new text in place; no temporary file stays", () => {
    // Guards atomic-file.ts replaceFile.
    const dir = scratch();
    const path = join(dir, "peers.json");
    writeFileSync(path, "old", { mode: 0o644 });
    replaceFile(path, "new", 0o600);
    expect({ text: readFileSync(path, "utf8"), mode: mode(path) }).toEqual({ text: "new", mode: 0o600 });
    expect(readdirSync(dir)).toEqual(["peers.json"]);
  });
});
