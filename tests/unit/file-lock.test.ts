/**
 * The shared lock file (src/platform/file-lock.ts) used by the embedded relay's start lock and by
 * peers.json changes: one holder at a time, a holder's release removes only its own lock, a lock
 * whose holder is gone is taken over once it is stale, a live holder's never.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { lockHeldByLiveProcess, lockHolder, tryLock, waitForLock } from "../../src/platform/file-lock.ts";

/** A pid that does not exist (above the kernel's largest pid_max). */
const DEAD_PID = 4_194_303;
const STALE_MS = 5_000;
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function lockFile(): string {
  const dir = mkdtempSync(join(tmpdir(), "pi-tasks-lock-"));
  dirs.push(dir);
  return join(dir, "thing.lock");
}

function plant(path: string, text: string, ageMs: number): void {
  writeFileSync(path, text);
  const when = new Date(Date.now() - ageMs);
  utimesSync(path, when, when);
}

describe("file lock", () => {
  test("one holder at a time: the file names this pid; release removes it and the lock can be taken again", () => {
    const path = lockFile();
    const lock = tryLock(path, { staleMs: STALE_MS });
    expect(lock).toBeDefined();
    expect(readFileSync(path, "utf8")).toMatch(new RegExp(`^${process.pid} [0-9a-f-]{36}\\n$`));
    expect(lockHolder(path)).toBe(process.pid);
    expect(lockHeldByLiveProcess(path)).toBe(true);
    // This process is alive, so its own lock is held against it too.
    expect(tryLock(path, { staleMs: 0 })).toBeUndefined();
    lock!.release();
    lock!.release();
    expect(existsSync(path)).toBe(false);
    expect(lockHeldByLiveProcess(path)).toBe(false);
    const again = tryLock(path, { staleMs: STALE_MS });
    expect(again).toBeDefined();
    again!.release();
    // No temporary or set-aside file is left.
    expect(readdirSync(join(path, ".."))).toEqual([]);
  });

  test("release removes only its own lock, not one that replaced it", () => {
    const path = lockFile();
    const lock = tryLock(path, { staleMs: STALE_MS })!;
    writeFileSync(path, `${process.pid} someone-else\n`);
    lock.release();
    expect(readFileSync(path, "utf8")).toBe(`${process.pid} someone-else\n`);
  });

  test("a lock whose holder is gone is taken over once it is staleMs old, not before", () => {
    const path = lockFile();
    plant(path, `${DEAD_PID}\n`, 0);
    expect(lockHeldByLiveProcess(path)).toBe(false);
    expect(tryLock(path, { staleMs: STALE_MS })).toBeUndefined();
    expect(readFileSync(path, "utf8")).toBe(`${DEAD_PID}\n`);
    // staleMs 0 (the embedded relay's start lock): at once.
    const now = tryLock(path, { staleMs: 0 });
    expect(now).toBeDefined();
    expect(lockHolder(path)).toBe(process.pid);
    now!.release();

    plant(path, `${DEAD_PID}\n`, STALE_MS + 1_000);
    const later = tryLock(path, { staleMs: STALE_MS });
    expect(later).toBeDefined();
    later!.release();
  });

  test("a lock naming no pid is treated as a gone holder; a live holder is never taken over", () => {
    const path = lockFile();
    plant(path, "garbage", STALE_MS + 1_000);
    const taken = tryLock(path, { staleMs: STALE_MS });
    expect(taken).toBeDefined();
    taken!.release();

    plant(path, `${process.pid} planted\n`, STALE_MS * 100);
    expect(tryLock(path, { staleMs: 0 })).toBeUndefined();
    expect(readFileSync(path, "utf8")).toBe(`${process.pid} planted\n`);
  });

  test("waitForLock asks again until waitMs passes, then answers undefined", async () => {
    const path = lockFile();
    const held = tryLock(path, { staleMs: STALE_MS })!;
    const waitMs = 200;
    expect(await waitForLock(path, { staleMs: STALE_MS, waitMs, pollMs: 20 })).toBeUndefined();
    // It asks again while it waits: a release during the wait is taken.
    setTimeout(() => held.release(), 50);
    const taken = await waitForLock(path, { staleMs: STALE_MS, waitMs, pollMs: 20 });
    expect(taken).toBeDefined();
    taken!.release();
  });
});
