/**
 * `/tasks audit <task id> [--json]`: one timeline of a task joining this side's log with the
 * worker's view, gaps named (src/core/audit.ts). At the origin it asks the worker for its view over
 * the relay and waits up to `auditWaitMs` for the answer; without one the gap says so. A worker
 * prints its own log. The report is also kept in the session (`pi-tasks-audit` entry, never shown
 * to the model) so `pi-tasks audit` can read it later.
 */
import { type AuditReport, auditEntry, auditLines, joinAudit } from "../../src/core/audit.ts";
import type { TaskCore } from "../../src/core/task-core.ts";
import { TaskError } from "../../src/protocol/errors.ts";
import { auditWaitMs } from "../../src/protocol/limits.ts";
import { AUDIT_ENTRY } from "../../src/protocol/session-entries.ts";
import { findTask } from "./short-ids.ts";

/** The custom entry type of a kept audit report. */
export { AUDIT_ENTRY };

export interface AuditDeps {
  readonly current: () => TaskCore;
  readonly requestRefresh: () => void;
  readonly appendEntry: (customType: string, data: unknown) => void;
  /** Test seam: how long to wait for the worker's view (default `auditWaitMs`). */
  readonly waitMs?: number;
}

function usage(problem: string): TaskError {
  return new TaskError("CLI_USAGE", { message: `${problem} — usage: /tasks audit <task id> [--json]` });
}

/** Resolves true once `answered()` holds (checked on every store change), false after `waitMs`. */
function answeredWithin(core: TaskCore, answered: () => boolean, waitMs: number): Promise<boolean> {
  if (answered()) return Promise.resolve(true);
  return new Promise((resolve) => {
    const finish = (result: boolean) => {
      clearTimeout(timer);
      unsubscribe();
      resolve(result);
    };
    const timer = setTimeout(() => finish(false), waitMs);
    const unsubscribe = core.onChange(() => {
      if (answered()) finish(true);
    });
  });
}

export async function auditCommand(words: readonly string[], deps: AuditDeps): Promise<string[]> {
  const json = words.includes("--json");
  const rest = words.filter((word) => word !== "--json");
  const [prefix] = rest;
  if (prefix === undefined || rest.length > 1) throw usage("name the task");
  const core = deps.current();
  const found = findTask(core.listTasks(), prefix);
  let report: AuditReport;
  if (found.role === "origin") {
    const requested = core.requestAudit(found.taskId);
    deps.requestRefresh();
    const waitMs = deps.waitMs ?? auditWaitMs;
    const answered = () =>
      core.getTask(found.taskId).events.some((event) => event.type === "task.audit_view" && event.payload.requestEventId === requested);
    const fresh = await answeredWithin(core, answered, waitMs);
    report = core.audit(found.taskId);
    // A view older than this request is still shown; the gap names the missing fresh one.
    if (!fresh) {
      report = {
        ...report,
        gaps: [
          ...report.gaps.filter((gap) => gap.kind !== "no-view"),
          { kind: "no-view", side: "worker", text: `no fresh view from the worker within ${waitMs} ms (asked; it may be offline)` },
        ],
      };
    }
  } else {
    report = joinAudit(found.taskId, [
      { label: "worker", status: found.status, events: found.events.map(auditEntry) },
      { label: "origin", missing: "only the origin can join both views (run /tasks audit in the origin's Pi)" },
    ]);
  }
  deps.appendEntry(AUDIT_ENTRY, report);
  return json ? [JSON.stringify(report)] : auditLines(report);
}
