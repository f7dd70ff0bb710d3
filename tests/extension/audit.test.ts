/**
 * `/tasks audit` (extensions/pi-tasks/audit.ts) on real cores over the real relay: it asks the
 * worker for a fresh view and waits for the answer to *this* request; without one within the wait
 * the report says so (an older view is still joined); the report is kept as a session entry.
 */
import { describe, expect, test } from "bun:test";
import { AUDIT_ENTRY, auditCommand } from "../../extensions/pi-tasks/audit.ts";
import type { AuditReport } from "../../src/core/audit.ts";
import { drain } from "../../testkit/drain.ts";
import { closeParties, createParty, type Party } from "../../testkit/party.ts";
import { failure } from "../../testkit/async.ts";
import { useRelayFixture } from "../helpers/relay-fixture.ts";

const fx = useRelayFixture({ proxy: false });
/** Short enough for a test, long enough for two in-process passes. */
const WAIT_MS = 1_500;
const OFFLINE_WAIT_MS = 200;

async function pair(): Promise<[Party, Party, string]> {
  const origin = await createParty({ url: fx.relay.url });
  const worker = await createParty({ url: fx.relay.url });
  fx.defer(() => closeParties([origin, worker]));
  const { taskId } = await origin.core.createTask({ to: worker.core.endpoint()!, task: "audit me" });
  await drain([origin, worker]);
  return [origin, worker, taskId];
}

function deps(origin: Party, parties: readonly Party[], waitMs: number) {
  const entries: { type: string; data: AuditReport }[] = [];
  return {
    entries,
    deps: {
      current: () => origin.core,
      // What the extension's scheduler does on a request: passes soon after.
      requestRefresh: () => void drain(parties).catch(() => undefined),
      appendEntry: (type: string, data: unknown) => entries.push({ type, data: data as AuditReport }),
      waitMs,
    },
  };
}

describe("/tasks audit", () => {
  test("asks the worker and waits for the answer to this request: one timeline held by both sides, no gaps; kept as a session entry", async () => {
    const [origin, worker, taskId] = await pair();
    const { deps: d, entries } = deps(origin, [origin, worker], WAIT_MS);
    const lines = await auditCommand([taskId.slice(0, 8)], d);
    expect(lines[0]).toBe(`audit of task ${taskId} — sides: origin, worker`);
    expect(lines.at(-1)).toBe("no gaps: every side holds what it should");
    expect(lines.find((line) => line.includes(" task.created "))).toContain("held by origin, worker");
    expect(entries.map((entry) => [entry.type, entry.data.taskId, entry.data.gaps.length])).toEqual([[AUDIT_ENTRY, taskId, 0]]);
    // --json gives the same report as one line.
    const json = JSON.parse((await auditCommand([taskId, "--json"], d))[0]!) as AuditReport;
    expect({ taskId: json.taskId, gaps: json.gaps }).toEqual({ taskId, gaps: [] });
  });

  test("a worker that does not answer within the wait: the gap says so, and an older view is still joined", async () => {
    const [origin, worker, taskId] = await pair();
    await auditCommand([taskId], deps(origin, [origin, worker], WAIT_MS).deps);
    await worker.core.close();
    const { deps: d } = deps(origin, [origin], OFFLINE_WAIT_MS);
    const report = JSON.parse((await auditCommand([taskId, "--json"], d))[0]!) as AuditReport;
    expect(report.gaps.map((gap) => [gap.kind, gap.text.includes("no fresh view")])).toEqual([["no-view", true]]);
    expect(report.timeline.find((line) => line.type === "task.created")?.heldBy).toEqual(["origin", "worker"]);
  });

  test("bad input: no task, an unknown prefix — a usage error naming the command", async () => {
    const [origin, worker] = await pair();
    const { deps: d, entries } = deps(origin, [origin, worker], WAIT_MS);
    expect((await failure(auditCommand([], d))).message).toContain("usage: /tasks audit <task id> [--json]");
    expect((await failure(auditCommand(["ffffffff"], d))).message).toContain("no task ffffffff");
    expect(entries).toEqual([]);
  });
});
