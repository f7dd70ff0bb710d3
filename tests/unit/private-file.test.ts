/**
 * Reading a file only this user may control (src/platform/private-file.ts), the check under
 * identity.json, peers.json and the Redis password file: a missing file is undefined; a symbolic
 * link, anything but a regular file, another user's file, or one with any of the caller's forbidden
 * mode bits is refused — each with its own problem — and its content is never read.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type PrivateFileRefusal, readPrivateFile } from "../../src/platform/private-file.ts";

/** Group and others: what a private key's file must not give. */
const GROUP_OTHER_BITS = 0o077;
/** A user id that is not this process's (nobody). */
const OTHER_UID = 65_534;
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function scratch(): string {
  const dir = mkdtempSync(join(tmpdir(), "pi-tasks-private-file-"));
  dirs.push(dir);
  return dir;
}

class Refused extends Error {
  constructor(readonly refusal: PrivateFileRefusal) {
    super(refusal.problem);
  }
}

/** What `readPrivateFile` refuses about `path` (fails the test when it reads it). */
function refusalOf(path: string, forbiddenBits = GROUP_OTHER_BITS): PrivateFileRefusal {
  try {
    readPrivateFile(path, forbiddenBits, (refusal) => new Refused(refusal));
  } catch (error) {
    if (error instanceof Refused) return error.refusal;
    throw error;
  }
  throw new Error(`expected ${path} to be refused`);
}

const read = (path: string, forbiddenBits = GROUP_OTHER_BITS) => readPrivateFile(path, forbiddenBits, (refusal) => new Refused(refusal));

describe("reading a private file", () => {
  test("a missing file is undefined; a regular file of one's own, mode 0600, is read", () => {
    const dir = scratch();
    expect(read(join(dir, "missing"))).toBeUndefined();
    writeFileSync(join(dir, "mine"), "secret", { mode: 0o600 });
    expect(read(join(dir, "mine"))).toBe("secret");
  });

  test("a directory where the file should be is refused as not a regular file (not read, not an I/O error)", () => {
    // Guards private-file.ts problemOf: the regular-file check.
    const path = join(scratch(), "identity.json");
    mkdirSync(path, { mode: 0o700 });
    const refusal = refusalOf(path);
    expect(refusal.details).toEqual({ kind: "not a regular file" });
    expect(refusal.fix).toBe(`rm ${path}`);
    expect(refusal.problem).toContain("is not a regular file");
  });

  test("a symbolic link is refused as a link, even to a valid file of one's own", () => {
    // Guards private-file.ts readPrivateFile: O_NOFOLLOW and the link codes.
    const dir = scratch();
    writeFileSync(join(dir, "real"), "secret", { mode: 0o600 });
    symlinkSync(join(dir, "real"), join(dir, "link"));
    expect(refusalOf(join(dir, "link")).details).toEqual({ kind: "symbolic link" });
  });

  test.skipIf(process.getuid?.() !== 0)("another user's file is refused naming its owner (as root: chown)", () => {
    // Guards private-file.ts problemOf: the owner check.
    const path = join(scratch(), "theirs");
    writeFileSync(path, "secret", { mode: 0o600 });
    chownSync(path, OTHER_UID, OTHER_UID);
    expect(refusalOf(path).details).toEqual({ owner: OTHER_UID, uid: process.getuid!() });
  });

  test("each single forbidden bit is refused naming the mode and `chmod 600`; the bits the caller allows are read", () => {
    // Guards private-file.ts problemOf: `stat.mode & forbiddenBits`, with exactly the caller's bits.
    const path = join(scratch(), "file");
    writeFileSync(path, "secret", { mode: 0o600 });
    for (let bit = 1; bit <= 0o040; bit <<= 1) {
      chmodSync(path, 0o600 | bit);
      const mode = `0${(0o600 | bit).toString(8)}`;
      expect(refusalOf(path).details).toEqual({ mode });
      expect(refusalOf(path).fix).toBe(`chmod 600 ${path}`);
    }
    // Forbidding writes only (as peers.json does): reading bits are allowed, writing bits are not.
    const WRITE_BITS = 0o022;
    for (const allowed of [0o644, 0o640, 0o604, 0o655, 0o400]) {
      chmodSync(path, allowed);
      expect({ mode: allowed.toString(8), text: read(path, WRITE_BITS) }).toEqual({ mode: allowed.toString(8), text: "secret" });
    }
    for (const refused of [0o620, 0o602]) {
      chmodSync(path, refused);
      expect(refusalOf(path, WRITE_BITS).details).toEqual({ mode: `0${refused.toString(8)}` });
    }
  });
});
