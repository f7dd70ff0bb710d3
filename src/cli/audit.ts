/**
 * `pi-tasks audit TASK_ID [--sessions DIR] [--json]`: one timeline of a task from the Pi session
 * files on this machine, after the fact (the Pis' RAM may be gone).
 *
 * It joins, by event id:
 * - the newest audit report a Pi recorded for the task (`/tasks audit` in the origin's Pi asks the
 *   worker for its view over the relay and keeps the joined report as a `pi-tasks-audit` entry):
 *   its `origin` and `worker` sides and its gaps;
 * - what each session file shows or archived of the task (`pi-tasks-event` messages and
 *   `pi-tasks-event-record` entries), one side per session — partial records, so never named as
 *   missing anything.
 * TASK_ID may be a prefix of at least `minTaskIdPrefixChars` characters. Session files are looked
 * for under --sessions, else under `PI_CODING_AGENT_SESSION_DIR` (or `$PI_CODING_AGENT_DIR/sessions`,
 * else `~/.pi/agent/sessions`) and the sessions of the workers this user spawned (kept apart in the
 * pi-tasks home: src/host/spawned.ts `workerSessionDir`).
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { basename, join } from "node:path";
import { parseArgs } from "node:util";
import { type AuditGap, type AuditReport, type AuditSide, auditLines, joinAudit, taskEntries } from "../core/audit.ts";
import { TaskError } from "../protocol/errors.ts";
import { isKnownEventType } from "../protocol/events.ts";
import { minTaskIdPrefixChars } from "../protocol/limits.ts";
import type { AuditEntry } from "../protocol/schemas.ts";
import { AUDIT_ENTRY, EVENT_MESSAGE, EVENT_RECORD } from "../protocol/session-entries.ts";
import { isRecord } from "../protocol/validate.ts";
import { stateDir, WORKER_SESSIONS_DIR } from "../host/spawned.ts";

type Env = Record<string, string | undefined>;

function usage(message: string): TaskError {
  return new TaskError("CLI_USAGE", { message });
}

export function sessionsDir(env: Env): string {
  const explicit = env.PI_CODING_AGENT_SESSION_DIR?.trim();
  if (explicit) return explicit;
  const agentDir = env.PI_CODING_AGENT_DIR?.trim();
  return join(agentDir ? agentDir : join(homedir(), ".pi", "agent"), "sessions");
}

function sessionFiles(dir: string): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const files: string[] = [];
  for (const name of names) {
    const path = join(dir, name);
    const stat = statSync(path, { throwIfNoEntry: false });
    if (stat?.isDirectory()) files.push(...sessionFiles(path));
    else if (name.endsWith(".jsonl")) files.push(path);
  }
  return files.sort();
}

function entryOf(event: unknown): AuditEntry | undefined {
  if (
    !isRecord(event) ||
    typeof event.eventId !== "string" ||
    !isKnownEventType(event.type) ||
    typeof event.sequence !== "string" ||
    typeof event.occurredAt !== "number"
  )
    return undefined;
  return { eventId: event.eventId, type: event.type, sequence: event.sequence, occurredAt: event.occurredAt };
}

interface SessionRecord {
  readonly label: string;
  readonly taskIds: Set<string>;
  readonly events: Map<string, AuditEntry & { taskId: string }>;
  readonly reports: AuditReport[];
}

/** Which side of the task a Pi session was, as recorded with each event (sessions written before the role was called "worker" say "target"). */
const ROLE_WORDS: Readonly<Record<string, string>> = { origin: "origin's", worker: "worker's", target: "worker's" };

/** A session's label: its side of the task when recorded, where it ran, and its file. */
function sessionLabel(role: string | undefined, cwd: string | undefined, file: string): string {
  const side = role === undefined ? undefined : ROLE_WORDS[role];
  const where = cwd === undefined ? "" : ` in ${basename(cwd)}`;
  return `${side === undefined ? "session" : `${side} Pi session`}${where} (${file})`;
}

function readSession(path: string, matches: (taskId: string) => boolean): SessionRecord {
  const file = basename(path, ".jsonl");
  const record: SessionRecord = { label: sessionLabel(undefined, undefined, file), taskIds: new Set(), events: new Map(), reports: [] };
  let cwd: string | undefined;
  let role: string | undefined;
  for (const line of readFileSync(path, "utf8").split("\n")) {
    let entry: unknown;
    try {
      entry = JSON.parse(line);
    } catch {
      continue;
    }
    if (!isRecord(entry)) continue;
    if (entry.type === "session" && typeof entry.cwd === "string") cwd = entry.cwd;
    const body = entry.type === "custom_message" ? entry.details : entry.type === "custom" ? entry.data : undefined;
    if (!isRecord(body) || typeof body.taskId !== "string" || !matches(body.taskId)) continue;
    if (entry.customType === AUDIT_ENTRY && Array.isArray(body.timeline) && Array.isArray(body.gaps)) {
      record.reports.push(body as unknown as AuditReport);
      record.taskIds.add(body.taskId);
    } else if (entry.customType === EVENT_MESSAGE || entry.customType === EVENT_RECORD) {
      const event = entryOf(body.event);
      if (event === undefined) continue;
      record.events.set(event.eventId, { ...event, taskId: body.taskId });
      record.taskIds.add(body.taskId);
      if (typeof body.role === "string") role = body.role;
    }
  }
  return { ...record, label: sessionLabel(role, cwd, file) };
}

/** The sides of a recorded report (its timeline says who held what). */
function reportSides(report: AuditReport): AuditSide[] {
  return report.sides
    .map((label) => ({ label, events: report.timeline.filter((line) => line.heldBy.includes(label)), partial: true }))
    .filter((side) => side.events.length > 0);
}

/** Joins everything the session files hold about one task. */
export function auditFromSessions(taskIdOrPrefix: string, dirs: string | readonly string[]): AuditReport {
  if (taskIdOrPrefix.length < minTaskIdPrefixChars) throw usage(`give at least ${minTaskIdPrefixChars} characters of the task id`);
  const all = typeof dirs === "string" ? [dirs] : dirs;
  const records = all.flatMap(sessionFiles).map((path) => readSession(path, (taskId) => taskId.startsWith(taskIdOrPrefix)));
  const taskIds = new Set(records.flatMap((record) => [...record.taskIds]));
  if (taskIds.size === 0)
    throw new TaskError("UNKNOWN_TASK", {
      message: `no Pi session under ${all.join(" or ")} recorded task ${taskIdOrPrefix}`,
      details: { taskId: taskIdOrPrefix, sessions: all },
    });
  if (taskIds.size > 1) throw usage(`${taskIdOrPrefix} matches ${taskIds.size} tasks; give more of the id`);
  const [taskId] = [...taskIds] as [string];
  const report = records.flatMap((record) => record.reports).at(-1);
  const sides: AuditSide[] = [
    ...(report === undefined ? [] : reportSides(report)),
    ...records
      .filter((record) => record.events.size > 0)
      .map((record) => ({
        label: record.label,
        events: taskEntries([...record.events.values()].map(({ taskId: _task, ...entry }) => entry)),
        partial: true,
      })),
  ];
  const joined = joinAudit(taskId, sides);
  const noReport: AuditGap = {
    kind: "no-view",
    side: "audit",
    text: "no audit was recorded for this task: run /tasks audit <id> in the origin's Pi (it asks the worker for its view over the relay)",
  };
  return { ...joined, gaps: report === undefined ? [noReport] : report.gaps };
}

export async function auditCommand(
  args: readonly string[],
  env: Env,
  stdout: (text: string) => void,
): Promise<number | { value: unknown; json: boolean }> {
  const { values, positionals } = parseArgs({
    args: [...args],
    options: { sessions: { type: "string" }, json: { type: "boolean" } },
    allowPositionals: true,
    strict: true,
  });
  const [taskId] = positionals;
  if (taskId === undefined || positionals.length > 1) throw usage("audit needs exactly one TASK_ID");
  const report = auditFromSessions(taskId, values.sessions ?? [sessionsDir(env), join(stateDir(env), WORKER_SESSIONS_DIR)]);
  if (values.json === true) return { value: report, json: true };
  stdout(`${auditLines(report).join("\n")}\n`);
  return 0;
}
