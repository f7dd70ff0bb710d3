/**
 * The `/tasks` board as a person reads it (extensions/pi-tasks/board.ts): the relay line says what
 * is true now (a relay pi-tasks started that stopped since is said to have stopped), and the
 * workers pi-tasks spawned are listed with whether they stop with this Pi.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { boardLines, workerLines } from "../../extensions/pi-tasks/board.ts";
import type { SessionInfo } from "../../extensions/pi-tasks/lifecycle.ts";
import type { EmbeddedRelayRecord } from "../../src/cli/embedded-relay.ts";
import type { SpawnedWorker } from "../../src/cli/spawned.ts";

const homes: string[] = [];
afterEach(() => {
  for (const home of homes.splice(0)) rmSync(home, { recursive: true, force: true });
});

/** A pid that certainly ran and is gone now. */
function deadPid(): number {
  return Bun.spawnSync(["true"]).pid;
}

function infoWithRecord(pid: number): SessionInfo {
  const home = mkdtempSync(join(tmpdir(), "pi-tasks-board-"));
  homes.push(home);
  const port = 18_999;
  const record: EmbeddedRelayRecord = {
    pid,
    port,
    url: `http://127.0.0.1:${port}`,
    log: join(home, "relays", `${port}.log`),
    startedAt: new Date(0).toISOString(),
    startedBy: process.pid,
  };
  mkdirSync(join(home, "relays"), { recursive: true });
  writeFileSync(join(home, "relays", `${port}.json`), JSON.stringify(record));
  return {
    session: { name: "planner", source: "WOLFPACK_SESSION_NAME" },
    identity: { publicKey: "ed25519:x", fingerprint: "0000:1111:2222:3333" },
    relay: { url: record.url, state: "started", record },
    env: { PI_TASKS_HOME: home },
    cwd: home,
  };
}

describe("the relay line", () => {
  test("a relay pi-tasks started and that still runs: started by this Pi, with how to stop it", () => {
    const line = boardLines(infoWithRecord(process.pid), undefined, [], new Map(), 0).find((text) => text.startsWith("relay: "));
    expect(line).toContain(`started by this Pi (pid ${process.pid}`);
    expect(line).toContain("/tasks relay stop");
  });

  test("after that relay stopped: the board says so, never 'started by this Pi' any more", () => {
    const pid = deadPid();
    const line = boardLines(infoWithRecord(pid), undefined, [], new Map(), 0).find((text) => text.startsWith("relay: "));
    expect(line).toBe(
      `relay: http://127.0.0.1:18999 — the relay pi-tasks started (pid ${pid}) has stopped; a Pi started next starts it again`,
    );
  });
});

describe("the workers pi-tasks spawned", () => {
  const worker = (session: string, pid: number, owner?: number): SpawnedWorker => ({
    session,
    pid,
    projectDir: "/p",
    relay: "http://127.0.0.1:1",
    log: `/logs/${session}.log`,
    createdAt: "",
    ...(owner === undefined ? {} : { owner }),
  });

  test("running ones are listed with their lifetime; gone ones are not", () => {
    const lines = workerLines(
      [worker("mine", process.pid, 42), worker("kept", process.pid), worker("theirs", process.pid, 7), worker("gone", deadPid(), 42)],
      42,
    );
    expect(lines).toEqual([
      "workers spawned by pi-tasks (3):",
      `  mine — pid ${process.pid}, stops when this Pi exits; log /logs/mine.log`,
      `  kept — pid ${process.pid}, kept: runs until stopped; log /logs/kept.log`,
      `  theirs — pid ${process.pid}, stops with the Pi (pid 7) that spawned it; log /logs/theirs.log`,
    ]);
    expect(workerLines([], 42)).toEqual([]);
  });
});
