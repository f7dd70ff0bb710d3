/**
 * `pi-tasks audit`: the origin asks the worker for its view over a real relay (src/core/audit.ts),
 * the joined report is kept in the origin's session file as the extension keeps it, the worker's
 * session file holds what its model was shown; the CLI joins them after the fact.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { AuditReport } from "../../src/core/audit.ts";
import type { PresentationItem } from "../../src/core/host.ts";
import { drain } from "../../testkit/drain.ts";
import { closeParties, createParty, type Party } from "../../testkit/party.ts";
import { type CliSandbox, createCliSandbox, jsonOf } from "../helpers/cli-kit.ts";
import { useRelayFixture } from "../helpers/relay-fixture.ts";

const fx = useRelayFixture({ proxy: false });
let sandbox: CliSandbox | undefined;

afterEach(async () => {
  await sandbox?.cleanup();
  sandbox = undefined;
});

async function parties(): Promise<[Party, Party]> {
  const origin = await createParty({ url: fx.relay.url });
  const worker = await createParty({ url: fx.relay.url });
  fx.defer(() => closeParties([origin, worker]));
  return [origin, worker];
}

/** A Pi session file as Pi writes it: a header, then entries (events shown or archived, audit reports). */
function sessionFile(dir: string, name: string, items: readonly PresentationItem[], reports: readonly AuditReport[] = []): void {
  const lines = [
    // Both Pis ran in the same project directory (a spawned worker's default).
    { type: "session", id: name, cwd: "/projects/app", timestamp: new Date(0).toISOString() },
    ...items.map((item) =>
      item.visible
        ? {
            type: "custom_message",
            customType: "pi-tasks-event",
            content: "…",
            display: true,
            details: { taskId: item.taskId, eventId: item.eventId, role: item.role, event: item.event },
          }
        : {
            type: "custom",
            customType: "pi-tasks-event-record",
            data: { taskId: item.taskId, eventId: item.eventId, role: item.role, event: item.event },
          },
    ),
    ...reports.map((report) => ({ type: "custom", customType: "pi-tasks-audit", data: report })),
  ];
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `${name}.jsonl`), `${lines.map((line) => JSON.stringify(line)).join("\n")}\nnot json\n`);
}

describe("pi-tasks audit", () => {
  test("joins the recorded report and both session files: one timeline, no gaps; --json gives the report", async () => {
    const [origin, worker] = await parties();
    const created = await origin.core.createTask({ to: worker.core.endpoint()!, task: "audit me" });
    await drain([origin, worker]);
    await worker.core.message({ taskId: created.taskId, type: "question", message: "which one?" });
    await drain([origin, worker]);
    await worker.core.done({ taskId: created.taskId, status: "completed", summary: "done" });
    await drain([origin, worker]);
    // Before the worker answered, the report names the missing view.
    origin.core.requestAudit(created.taskId);
    expect(origin.core.audit(created.taskId).gaps.map((gap) => gap.kind)).toEqual(["no-view"]);
    await drain([origin, worker]);
    const report = origin.core.audit(created.taskId);
    expect(report.gaps).toEqual([]);
    const byType = Object.fromEntries(report.timeline.map((line) => [line.type, line.heldBy]));
    expect(byType["task.created"]).toEqual(["origin", "worker"]);
    expect(byType["task.question"]).toEqual(["origin", "worker"]);
    expect(byType["task.completed"]).toEqual(["origin", "worker"]);
    // The origin's own records never travel: held by the origin alone, and no gap for it.
    expect(byType["task.delivery_receipt"]).toEqual(["origin"]);

    sandbox = createCliSandbox();
    const sessions = join(sandbox.agentDir, "sessions", "--projects--");
    sessionFile(sessions, "origin-session", [...origin.host.inserted, ...origin.host.archived], [report]);
    sessionFile(sessions, "worker-session", [...worker.host.inserted, ...worker.host.archived]);
    const text = await sandbox.run(["audit", created.taskId.slice(0, 8)]);
    expect({ code: text.code, stderr: text.stderr }).toEqual({ code: 0, stderr: "" });
    const lines = text.stdout.trimEnd().split("\n");
    // Each session is labelled with its side of the task, so two Pis in one directory read apart.
    const sides = "origin, worker, origin's Pi session in app (origin-session), worker's Pi session in app (worker-session)";
    expect(lines[0]).toBe(`audit of task ${created.taskId} — sides: ${sides}`);
    const completedRow = lines.find((line) => line.includes(" task.completed "))!;
    expect(completedRow).toContain(`held by ${sides}`);
    // Numbered 1, 2, 3… in order; the audit's own request is not a line of the task's timeline.
    const rows = lines.slice(1, -1);
    expect(rows.map((line) => line.trim().split(".")[0])).toEqual(rows.map((_, index) => String(index + 1)));
    expect(text.stdout).not.toContain("task.audit_requested");
    expect(lines.at(-1)).toBe("no gaps: every side holds what it should");

    const json = jsonOf(await sandbox.run(["audit", created.taskId, "--json"]));
    expect(json.taskId).toBe(created.taskId);
    expect(json.gaps).toEqual([]);
    expect(json.timeline.map((line: { eventId: string }) => line.eventId)).toEqual(report.timeline.map((line) => line.eventId));
  });

  test("without a recorded report the gap says how to get one; the session files are still joined", async () => {
    const [origin, worker] = await parties();
    const created = await origin.core.createTask({ to: worker.core.endpoint()!, task: "never audited" });
    await drain([origin, worker]);
    sandbox = createCliSandbox();
    sessionFile(join(sandbox.agentDir, "sessions", "--w--"), "worker-only", worker.host.inserted);
    const run = await sandbox.run(["audit", created.taskId, "--json"]);
    expect(run.code).toBe(0);
    const json = jsonOf(run);
    expect(json.gaps.map((gap: { kind: string; text: string }) => [gap.kind, gap.text.includes("/tasks audit")])).toEqual([
      ["no-view", true],
    ]);
    expect(json.timeline.map((line: { type: string }) => line.type)).toEqual(["task.created"]);
  });

  test("bad input: no task id, a short prefix, an unknown task — typed errors, exit 2 or 1", async () => {
    sandbox = createCliSandbox();
    const missing = await sandbox.run(["audit"]);
    expect({ code: missing.code, said: missing.stderr.includes("CLI_USAGE: audit needs exactly one TASK_ID") }).toEqual({
      code: 2,
      said: true,
    });
    const short = jsonOf(await sandbox.run(["audit", "abc", "--json"]));
    expect(short.error.code).toBe("CLI_USAGE");
    const unknown = await sandbox.run(["audit", "0123456789abcdef", "--json"]);
    expect(unknown.code).toBe(1);
    // Looked for in the person's sessions and in the sessions of the workers this user spawned.
    const sessions = [join(sandbox.agentDir, "sessions"), join(sandbox.stateDir, "sessions")];
    expect(jsonOf(unknown).error).toMatchObject({ code: "UNKNOWN_TASK", details: { sessions } });
  });
});
