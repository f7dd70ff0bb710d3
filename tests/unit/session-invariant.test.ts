/**
 * The invariant every real Pi's teardown checks (tests/helpers/session-invariant.ts,
 * tests/helpers/teardown-check.ts) catches what it is for: fed fake records of each kind of fault,
 * it names each one — a check that cannot fail would be a defect.
 */
import { describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EVENT_MESSAGE, EVENT_RECORD, WAKE_MESSAGE } from "../../extensions/pi-tasks/presenter.ts";
import {
  invariantViolations,
  parseJsonLines,
  rpcObservation,
  sessionPresentations,
  stderrExtensionErrors,
  terminalExtensionErrors,
} from "../helpers/session-invariant.ts";
import { checkWorkers, sessionDirViolations, surfaceTeardownFailures, watchPi } from "../helpers/teardown-check.ts";

const TASK = "task-1";

/** The RPC record of an inserted `pi-tasks-event` message. */
function inserted(eventId: string, type = "task.message", taskId = TASK) {
  return {
    type: "message_end",
    message: { role: "custom", customType: EVENT_MESSAGE, content: "…", details: { taskId, eventId, event: { type } } },
  };
}

function archived(eventId: string, type = "task.parent_acknowledged") {
  return { type: "entry_appended", entry: { type: "custom", customType: EVENT_RECORD, data: { taskId: TASK, eventId, event: { type } } } };
}

function woken(wakeId: string, ...eventIds: string[]) {
  return { type: "message_end", message: { role: "custom", customType: WAKE_MESSAGE, content: "", details: { wakeId, eventIds } } };
}

const EXTENSION_ERROR = { type: "extension_error", extensionPath: "/x/index.ts", event: "session_start", error: "boom" };

function violationsOf(records: Record<string, unknown>[], extensionErrorsExpected?: string): string[] {
  return invariantViolations(rpcObservation(records), { extensionErrorsExpected });
}

describe("the session invariant on an RPC stream", () => {
  test("a clean session: events inserted and woken once, one archived, an orphan, its reassignment and a new orphan: no violation", () => {
    const records = [
      inserted("e1"),
      woken("w1", "e1"),
      archived("e2"),
      inserted("e3", "task.orphaned"),
      woken("w2", "e3"),
      inserted("e4", "task.reassigned"),
      inserted("e5", "task.orphaned"),
      woken("w3", "e5"),
      { type: "agent_end" },
    ];
    expect(violationsOf(records)).toEqual([]);
  });

  test("an event inserted twice is caught", () => {
    expect(violationsOf([inserted("e1"), woken("w1", "e1"), inserted("e1")])).toEqual([
      "pi-tasks-event e1 (task.message) inserted 2 times",
    ]);
  });

  test("a task orphaned a second time without a reassignment in between is caught (each loss reported once)", () => {
    const records = [inserted("o1", "task.orphaned"), woken("w1", "o1"), inserted("o2", "task.orphaned"), woken("w2", "o2")];
    expect(violationsOf(records)).toEqual([`task ${TASK} orphaned twice without a reassignment in between (events o1, o2)`]);
    // Another task's orphan, or an archived reassignment of another task, does not count as this one's.
    const other = [inserted("o1", "task.orphaned"), inserted("r1", "task.reassigned", "task-2"), inserted("o2", "task.orphaned")];
    expect(violationsOf(other)).toHaveLength(1);
    expect(violationsOf([inserted("o1", "task.orphaned"), inserted("o2", "task.orphaned", "task-2")])).toEqual([]);
  });

  test("an extension error is caught, and so is a stdout line that is not JSON", () => {
    expect(violationsOf([inserted("e1"), EXTENSION_ERROR])).toEqual([`extension error: ${JSON.stringify(EXTENSION_ERROR)}`]);
    const [unparsed] = parseJsonLines("this is not JSON");
    expect(violationsOf([unparsed!])).toEqual([`corrupt output: ${JSON.stringify({ type: "unparsed", line: "this is not JSON" })}`]);
  });

  test("an event archived twice, inserted and archived, woken twice or woken without insertion is caught", () => {
    expect(violationsOf([archived("a1"), archived("a1")])).toEqual([
      "pi-tasks-event-record a1 (task.parent_acknowledged) archived 2 times",
    ]);
    expect(violationsOf([inserted("e1"), archived("e1")])).toEqual(["event e1 (task.parent_acknowledged) both inserted and archived"]);
    expect(violationsOf([inserted("e1"), woken("w1", "e1"), woken("w2", "e1")])).toEqual(["event e1 (task.message) woken 2 times"]);
    expect(violationsOf([woken("w1", "e9")])).toEqual(["event e9 woken but never inserted"]);
  });

  test("the opt-out of one process: its extension errors are expected — and their absence is the violation", () => {
    expect(violationsOf([EXTENSION_ERROR], "the test breaks the extension on purpose")).toEqual([]);
    expect(violationsOf([inserted("e1")], "the test breaks the extension on purpose")).toEqual([
      "extension errors were expected (the test breaks the extension on purpose) but none occurred: remove the opt-out",
    ]);
    // Never an opt-out of duplicates.
    expect(violationsOf([EXTENSION_ERROR, inserted("e1"), inserted("e1")], "on purpose")).toEqual([
      "pi-tasks-event e1 (task.message) inserted 2 times",
    ]);
  });
});

describe("the same invariant on a session file, a terminal and stderr", () => {
  test("a session file's custom_message and custom entries: a duplicate insertion and a second orphan are caught", () => {
    const entry = (eventId: string, type: string) => ({
      type: "custom_message",
      customType: EVENT_MESSAGE,
      details: { taskId: TASK, eventId, event: { type } },
    });
    const entries = [entry("o1", "task.orphaned"), entry("m1", "task.message"), entry("m1", "task.message"), entry("o2", "task.orphaned")];
    expect(invariantViolations({ presented: sessionPresentations(entries), problems: [] })).toEqual([
      "pi-tasks-event m1 (task.message) inserted 2 times",
      `task ${TASK} orphaned twice without a reassignment in between (events o1, o2)`,
    ]);
  });

  test("an extension error the TUI drew, between escape sequences and redrawn, is caught once; print mode's stderr line too", () => {
    const drawn = '\x1b[2K\x1b[38;5;196mExtension "/repo/extensions/pi-tasks/index.ts" error: boom\x1b[39m\r\n\x1b[1A\x1b[2K';
    expect(terminalExtensionErrors(`\x1b[?2004h${drawn}${drawn}`)).toEqual([
      { kind: "extension_error", record: 'Extension "/repo/extensions/pi-tasks/index.ts" error: boom' },
    ]);
    expect(terminalExtensionErrors("tasks: planner · idle\r\n")).toEqual([]);
    expect(stderrExtensionErrors("warning: fd not found\nExtension error (/x/index.ts): boom\n")).toEqual([
      { kind: "extension_error", record: "Extension error (/x/index.ts): boom" },
    ]);
  });
});

describe("the teardown check fails the run", () => {
  test("a session continued by a second Pi run is checked whole: an event the second run inserts again is caught, once", () => {
    const dir = mkdtempSync(join(tmpdir(), "pi-tasks-invariant-sessions-"));
    try {
      const file = join(dir, "2026-01-01_session.jsonl");
      const line = JSON.stringify({
        type: "custom_message",
        customType: EVENT_MESSAGE,
        details: { taskId: TASK, eventId: "e1", event: { type: "task.created" } },
      });
      writeFileSync(file, `${JSON.stringify({ type: "session", id: "s" })}\n${line}\n`);
      expect(sessionDirViolations(dir)).toEqual([]);
      // The second run (`--continue`) appends to the same file.
      writeFileSync(file, `${readFileSync(file, "utf8")}${line}\n`);
      expect(sessionDirViolations(dir)).toEqual([`session file ${file}: pi-tasks-event e1 (task.created) inserted 2 times`]);
      expect(sessionDirViolations(dir)).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a watched Pi whose session broke the invariant throws when surfaced, naming the Pi and the fault; once", async () => {
    const records = [inserted("e1"), inserted("e1")];
    await watchPi('RPC Pi "fake" on bun', () => violationsOf(records)).settle();
    expect(() => surfaceTeardownFailures()).toThrow(
      /RPC Pi "fake" on bun, started in tests\/unit\/session-invariant\.test\.ts:\n {2}- pi-tasks-event e1/,
    );
    expect(() => surfaceTeardownFailures()).not.toThrow();
  });

  test("a spawned worker's RPC log in a pi-tasks home is checked; a violation is reported once", async () => {
    const home = mkdtempSync(join(tmpdir(), "pi-tasks-invariant-"));
    try {
      mkdirSync(join(home, "logs"));
      const log = join(home, "logs", "builder-1.log");
      writeFileSync(
        join(home, "logs", "builder-1.rpc.jsonl"),
        `${[inserted("e1"), EXTENSION_ERROR].map((r) => JSON.stringify(r)).join("\n")}\n`,
      );
      // A pid no process has (above the kernel's pid_max): the worker's Pi has exited.
      writeFileSync(`${log}.pi-pid`, "4194305");
      // A line still being written (no newline yet) is not read.
      writeFileSync(
        join(home, "logs", "builder-1.rpc.jsonl"),
        `${readFileSync(join(home, "logs", "builder-1.rpc.jsonl"), "utf8")}{"type":"mess`,
      );
      await checkWorkers(home);
      const surfaced = (() => {
        try {
          surfaceTeardownFailures();
          return "";
        } catch (error) {
          return (error as Error).message;
        }
      })();
      expect(surfaced).toMatch(/worker Pi logs\/builder-1\.rpc\.jsonl .*\n {2}- extension error/);
      expect(surfaced).not.toContain("corrupt output");
      await checkWorkers(home);
      expect(() => surfaceTeardownFailures()).not.toThrow();
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});
