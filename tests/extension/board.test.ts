/**
 * The `/tasks` board as a person reads it (extensions/pi-tasks/board.ts): the relay line says what
 * is true now (a relay pi-tasks started that stopped since is said to have stopped), and the
 * workers pi-tasks spawned are listed with whether they stop with this Pi; the problem the footer
 * shows is named in its words with its fix; a relay that did not answer at start-up is not called a
 * stranger.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { boardLines, detailLines, workerLines } from "../../extensions/pi-tasks/board.ts";
import { taskView } from "../helpers/extension-fakes.ts";
import type { WaitingMail } from "../../src/core/outbox.ts";
import type { SessionInfo } from "../../extensions/pi-tasks/lifecycle.ts";
import type { EmbeddedRelayRecord } from "../../src/host/embedded-relay.ts";
import type { SpawnedWorker } from "../../src/host/spawned.ts";
import { passFailure } from "../../extensions/pi-tasks/failures.ts";
import { footerLabel } from "../../extensions/pi-tasks/footer.ts";
import { TaskError } from "../../src/protocol/errors.ts";

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

describe("the problem the footer shows", () => {
  test("is on the board in the footer's words, with its fix, right under the relay line; none when the footer shows none", () => {
    const info = infoWithRecord(process.pid);
    const failure = passFailure(new TaskError("RELAY_UNAVAILABLE", { details: { operation: "receive" } }), info.relay.url)!;
    const lines = boardLines(info, undefined, [], new Map(), 0, {}, failure);
    const at = lines.findIndex((text) => text.startsWith("relay: "));
    expect(lines[at + 1]).toBe(`problem (on the footer): ${failure.words}`);
    expect(footerLabel("planner", [], {}, failure)).toBe(`tasks: planner · ${failure.words}`);
    expect(lines[at + 2]).toStartWith("  fix: nothing is lost: pi-tasks retries by itself");
    expect(boardLines(info, undefined, [], new Map(), 0, {}, undefined).some((text) => text.startsWith("problem"))).toBe(false);
  });
});

describe("mail that waits says what for", () => {
  test("a task whose answer waits for its worker to prove its key: the board line and the detail name the wait, not a fault", () => {
    const info = infoWithRecord(process.pid);
    const task = taskView({ role: "origin" });
    const waiting: WaitingMail[] = [
      { envelopeId: "e1", purpose: "fanout", cause: "proof", reason: "waiting for the target to prove who it is" },
    ];
    const lines = boardLines(info, undefined, [task], new Map(), 0, {}, undefined, () => waiting);
    const line = lines.find((text) => text.startsWith(`  ${task.taskId.slice(0, 8)}`))!;
    expect(line).toContain("(waiting for the worker to prove its key) —");
    const detail = detailLines(task, new Map(), 0, waiting);
    expect(detail).toContain("  waiting to leave (1):");
    expect(detail).toContain(
      "    a message: waiting for the worker to prove its key at its endpoint (it was asked; it leaves as soon as the worker answers)",
    );
    // Nothing waiting: nothing said.
    expect(detailLines(task, new Map(), 0, []).some((text) => text.includes("waiting to leave"))).toBe(false);
  });
});

describe("a relay that did not answer at start-up", () => {
  function unanswered(): SessionInfo {
    const info = infoWithRecord(process.pid);
    return {
      ...info,
      relay: {
        url: info.relay.url,
        state: "unanswered",
        problemCode: "RELAY_NOT_ANSWERING",
        problem: "it did not answer in time",
        secretFile: "/s",
      },
    };
  }

  test("is not used yet, in those words — never 'cannot prove it is yours' — and in use once a pass reached it", () => {
    const before = boardLines(unanswered(), undefined, [], new Map(), 0).find((text) => text.startsWith("relay: "));
    expect(before).toBe("relay: http://127.0.0.1:18999 — NOT USED YET: it did not answer in time");
    const bound = { relay: "r", id: "e" };
    const after = boardLines(unanswered(), bound, [], new Map(), 0).find((text) => text.startsWith("relay: "));
    expect(after).toBe(
      "relay: http://127.0.0.1:18999 — in use: it did not answer at start-up, but answered since · verified with your relay secret /s",
    );
  });
});

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
