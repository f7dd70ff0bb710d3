/**
 * The invariant every real-Pi test holds (issue 33, item 6), as pure functions over what a Pi
 * recorded — one piece of code for the RPC stream, a session file and a spawned worker's RPC log:
 *
 * 1. **Each model-visible event is presented once.** No `pi-tasks-event` message twice for one
 *    `details.eventId`, no `pi-tasks-event-record` archive entry twice, no event both inserted and
 *    archived, no event in two `pi-tasks-wake` messages (nor twice in one), no wake of an event that
 *    was not inserted first.
 * 2. **Each loss is reported once.** No second `task.orphaned` event (another event id) for a task
 *    unless a `task.reassigned` event for that task came between them.
 * 3. **No extension error.** No `extension_error` record, no stdout line that is not JSON (RPC),
 *    no `Extension "…" error:` line on the terminal (the interactive TUI shows them only there).
 *
 * `invariantViolations` names each fault in words (empty: the invariant holds). It is used by the
 * teardown check of every Pi a test starts (tests/helpers/teardown-check.ts) and by the explicit
 * `expectEachEventOnce` / `expectNoProblems` of tests/helpers/pi-kit.ts.
 */
import { EVENT_MESSAGE, EVENT_RECORD, WAKE_MESSAGE } from "../../extensions/pi-tasks/presenter.ts";

/** One presentation a session holds, in session order. */
export type Presented =
  | { readonly kind: "inserted" | "archived"; readonly taskId: string; readonly eventId: string; readonly type: string }
  | { readonly kind: "wake"; readonly wakeId: string; readonly eventIds: readonly string[] };

/** What must never appear: an extension error, or output that is not what the mode writes. */
export interface Problem {
  readonly kind: "extension_error" | "corrupt_output";
  /** As recorded (kept whole for the failure message). */
  readonly record: unknown;
}

/** What the invariant reads of one Pi session. */
export interface SessionObservation {
  /** The session's presentations, in order. */
  readonly presented: readonly Presented[];
  readonly problems: readonly Problem[];
}

export interface InvariantOptions {
  /**
   * The opt-out of one process whose test provokes extension errors on purpose: why. Its
   * extension errors are then no violation — and their absence is (a stale opt-out hides the next).
   */
  readonly extensionErrorsExpected?: string;
}

/** The invariant's findings, one list per fault (every list empty: it holds). */
export interface PresentationFaults {
  /** `[eventId, count]` of events inserted more than once. */
  readonly insertedTwice: readonly (readonly [string, number])[];
  readonly archivedTwice: readonly (readonly [string, number])[];
  /** `[eventId, count]` of events named by more than one wake (or twice by one). */
  readonly wokenTwice: readonly (readonly [string, number])[];
  readonly insertedAndArchived: readonly string[];
  readonly wokenNotInserted: readonly string[];
  /** Tasks orphaned again without a reassignment in between: the task and both event ids. */
  readonly orphanedTwice: readonly { readonly taskId: string; readonly eventIds: readonly [string, string] }[];
}

type Json = Record<string, unknown>;

function record(value: unknown): Json {
  return value !== null && typeof value === "object" ? (value as Json) : {};
}

/** An inserted or archived item from its message details or entry data. */
function item(kind: "inserted" | "archived", details: Json): Presented {
  return {
    kind,
    taskId: String(details.taskId),
    eventId: String(details.eventId),
    type: String(record(details.event).type),
  };
}

function wake(details: Json): Presented {
  return { kind: "wake", wakeId: String(details.wakeId), eventIds: Array.isArray(details.eventIds) ? details.eventIds.map(String) : [] };
}

/** A custom message (`customType`, `details`) as a presentation, or undefined when it is none of ours. */
function fromCustomMessage(customType: unknown, details: unknown): Presented | undefined {
  if (customType === EVENT_MESSAGE) return item("inserted", record(details));
  if (customType === WAKE_MESSAGE) return wake(record(details));
  return undefined;
}

/**
 * The presentations of a Pi's RPC stream (`--mode rpc` stdout, or `--mode json`, or a spawned
 * worker's `*.rpc.jsonl`): `message_end` of custom messages, `entry_appended` of archive entries.
 */
export function rpcPresentations(records: readonly Json[]): Presented[] {
  const presented: Presented[] = [];
  for (const entry of records) {
    if (entry.type === "message_end") {
      const message = record(entry.message);
      const found = message.role === "custom" ? fromCustomMessage(message.customType, message.details) : undefined;
      if (found !== undefined) presented.push(found);
    } else if (entry.type === "entry_appended") {
      const appended = record(entry.entry);
      if (appended.type === "custom" && appended.customType === EVENT_RECORD) presented.push(item("archived", record(appended.data)));
    }
  }
  return presented;
}

/** What must never appear in an RPC stream: extension errors and lines that are not JSON. */
export function rpcProblems(records: readonly Json[]): Problem[] {
  return records.flatMap((entry): Problem[] => {
    if (entry.type === "extension_error") return [{ kind: "extension_error", record: entry }];
    return entry.type === "unparsed" ? [{ kind: "corrupt_output", record: entry }] : [];
  });
}

/** An RPC stream's observation (`--mode rpc` or `--mode json` stdout, a worker's `*.rpc.jsonl`). */
export function rpcObservation(records: readonly Json[]): SessionObservation {
  return { presented: rpcPresentations(records), problems: rpcProblems(records) };
}

/** Parses JSONL text as an RPC stream does: a line that is not JSON becomes `{type: "unparsed", line}`. */
export function parseJsonLines(text: string): Json[] {
  const parsed: Json[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line.length === 0) continue;
    try {
      parsed.push(record(JSON.parse(line)));
    } catch {
      parsed.push({ type: "unparsed", line });
    }
  }
  return parsed;
}

/** The presentations of a session's entries (a Pi session file, or RPC `get_entries`), in order. */
export function sessionPresentations(entries: readonly Json[]): Presented[] {
  const presented: Presented[] = [];
  for (const entry of entries) {
    if (entry.type === "custom_message") {
      const found = fromCustomMessage(entry.customType, entry.details);
      if (found !== undefined) presented.push(found);
    } else if (entry.type === "custom" && entry.customType === EVENT_RECORD) {
      presented.push(item("archived", record(entry.data)));
    }
  }
  return presented;
}

/**
 * The violations a Pi session file (JSONL, written whole line by whole line) holds: its
 * presentations, and lines that are not JSON. An unterminated last line is one being written.
 */
export function sessionFileViolations(text: string): string[] {
  const entries = parseJsonLines(text.slice(0, text.lastIndexOf("\n") + 1));
  const corrupt = entries.filter((entry) => entry.type === "unparsed").map((entry): Problem => ({ kind: "corrupt_output", record: entry }));
  return invariantViolations({ presented: sessionPresentations(entries), problems: corrupt });
}

/** Strips terminal control sequences (CSI, OSC, single escapes) and carriage returns. */
export function stripAnsi(text: string): string {
  return text.replace(/\x1b\[[0-9;?<=>]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[P^_][^\x1b]*\x1b\\|\x1b[@-Z\\-_]|\r/g, "\n");
}

/**
 * Extension errors the interactive TUI showed: its `Extension "<path>" error: <message>` lines
 * (Pi's `showExtensionError`), from what Pi wrote to its terminal. Each distinct line once.
 */
export function terminalExtensionErrors(terminalOutput: string): Problem[] {
  const found = new Set<string>();
  for (const line of stripAnsi(terminalOutput).split("\n")) {
    const match = line.match(/Extension "[^"]*" error:.*/);
    if (match !== null) found.add(match[0].trim());
  }
  return [...found].map((line) => ({ kind: "extension_error", record: line }));
}

/** Extension errors print and json modes wrote to stderr (`Extension error (<path>): <message>`). */
export function stderrExtensionErrors(stderr: string): Problem[] {
  return stderr
    .split("\n")
    .filter((line) => line.startsWith("Extension error ("))
    .map((line) => ({ kind: "extension_error", record: line }));
}

function duplicates(ids: readonly string[]): [string, number][] {
  const counts = new Map<string, number>();
  for (const id of ids) counts.set(id, (counts.get(id) ?? 0) + 1);
  return [...counts].filter(([, count]) => count > 1);
}

/** Tasks orphaned twice (distinct event ids) with no `task.reassigned` for the task in between. */
function orphanedTwice(presented: readonly Presented[]): { taskId: string; eventIds: [string, string] }[] {
  const open = new Map<string, string>();
  const faults: { taskId: string; eventIds: [string, string] }[] = [];
  for (const entry of presented) {
    if (entry.kind === "wake") continue;
    if (entry.type === "task.reassigned") open.delete(entry.taskId);
    if (entry.type !== "task.orphaned") continue;
    const earlier = open.get(entry.taskId);
    // The same event again is a duplicate presentation, reported as such.
    if (earlier !== undefined && earlier !== entry.eventId) faults.push({ taskId: entry.taskId, eventIds: [earlier, entry.eventId] });
    open.set(entry.taskId, entry.eventId);
  }
  return faults;
}

/** The invariant's findings for a session's presentations. */
export function presentationFaults(presented: readonly Presented[]): PresentationFaults {
  const ids = (kind: "inserted" | "archived") => presented.flatMap((entry) => (entry.kind === kind ? [entry.eventId] : []));
  const inserted = ids("inserted");
  const archived = ids("archived");
  const woken = presented.flatMap((entry) => (entry.kind === "wake" ? entry.eventIds : []));
  const insertedSet = new Set(inserted);
  const archivedSet = new Set(archived);
  return {
    insertedTwice: duplicates(inserted),
    archivedTwice: duplicates(archived),
    wokenTwice: duplicates(woken),
    insertedAndArchived: [...insertedSet].filter((id) => archivedSet.has(id)),
    wokenNotInserted: [...new Set(woken)].filter((id) => !insertedSet.has(id)),
    orphanedTwice: orphanedTwice(presented),
  };
}

/** The problems that break the invariant, in words, given the process's opt-out. */
function problemViolations(problems: readonly Problem[], options: InvariantOptions): string[] {
  const expected = options.extensionErrorsExpected;
  const counted = expected === undefined ? problems : problems.filter((problem) => problem.kind !== "extension_error");
  const words = counted.map((problem) => `${problem.kind.replace("_", " ")}: ${JSON.stringify(problem.record)}`);
  if (expected !== undefined && counted.length === problems.length)
    words.push(`extension errors were expected (${expected}) but none occurred: remove the opt-out`);
  return words;
}

/** Each fault of a session in words; empty when the invariant holds. */
export function invariantViolations(observation: SessionObservation, options: InvariantOptions = {}): string[] {
  const faults = presentationFaults(observation.presented);
  const typeOf = new Map<string, string>();
  for (const entry of observation.presented) if (entry.kind !== "wake") typeOf.set(entry.eventId, entry.type);
  const named = (id: string) => `${id} (${typeOf.get(id) ?? "unknown type"})`;
  return [
    ...faults.insertedTwice.map(([id, count]) => `pi-tasks-event ${named(id)} inserted ${count} times`),
    ...faults.archivedTwice.map(([id, count]) => `pi-tasks-event-record ${named(id)} archived ${count} times`),
    ...faults.wokenTwice.map(([id, count]) => `event ${named(id)} woken ${count} times`),
    ...faults.insertedAndArchived.map((id) => `event ${named(id)} both inserted and archived`),
    ...faults.wokenNotInserted.map((id) => `event ${id} woken but never inserted`),
    ...faults.orphanedTwice.map(
      ({ taskId, eventIds }) => `task ${taskId} orphaned twice without a reassignment in between (events ${eventIds.join(", ")})`,
    ),
    ...problemViolations(observation.problems, options),
  ];
}
