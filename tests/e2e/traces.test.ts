/**
 * Traces across hops, end to end: three real Pi 1.6 CLIs (`--mode rpc`) on one real relay, scripted
 * brains, each Pi with the standard OpenTelemetry environment pointing at an OTLP/HTTP receiver in
 * this test (extensions/pi-tasks/traces.ts); on both hosts (tests/helpers/host-kit.ts): Pi on Bun
 * from the checkout, and Pi on Node from the packed production install with OpenTelemetry added as the
 * tracer tells a user to (it is an optional peer, not in the default install; there, without it, the
 * person is told the command). A sends a task to B; B (a coordinator) delegates onward
 * to C; C asks, B answers, C completes, B acknowledges and completes A's task, A acknowledges. The
 * Pis then stop, which flushes their spans.
 *
 * What must hold: one span per task, sent by its origin only (A's task by A, B's sub-task by B);
 * both in ONE trace whose id derives from the root task; the sub-task's span has the root task's span
 * as its parent; each span carries its task's events by type; and nothing a person or model wrote
 * (task text, question, answer, summary) is anywhere in what was exported.
 */
import { beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { createHash } from "node:crypto";
import { eventually } from "../../testkit/async.ts";
import { waitForEndpoint } from "../../testkit/session-control.ts";
import {
  bannerWorkerBrain,
  called,
  expectCleanStops,
  field,
  lastSeen,
  scenario,
  sendThenAckBrain,
  stopEach,
  toolCalls,
  usePiFixture,
} from "../helpers/pi-kit.ts";
import type { RpcRecord } from "../helpers/pi-process.ts";
import { describeOnHosts, type PiHost } from "../helpers/host-kit.ts";
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from "../helpers/otlp-receiver.ts";

setDefaultTimeout(60_000);

const fx = usePiFixture();

/** Planted in every text a person or model writes here: it must never reach a span. */
const MARKER = `marker-${crypto.randomUUID()}`;
const ROOT_TASK = `Make a banner for the release (${MARKER}); delegate the painting.`;
const SUB_TASK = `Paint the release banner (${MARKER}).`;
/** bannerWorkerBrain's question (tests/helpers/pi-kit.ts). */
const QUESTION = "Which colour should the banner be?";
const ANSWER = `forest green ${MARKER}`;
const SERVICE = "pi-tasks-traces-e2e";

/** The standard OpenTelemetry environment, pointing at `receiver` (anything inherited that would change it unset). */
const otelEnv = (receiver: OtlpReceiver) => ({
  OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
  OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
  OTEL_SERVICE_NAME: SERVICE,
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: undefined,
  OTEL_SDK_DISABLED: undefined,
  OTEL_TRACES_EXPORTER: undefined,
});

const isParentAcked = (record: RpcRecord) =>
  record.type === "entry_appended" && JSON.stringify(record).includes("task.parent_acknowledged");
const isAckEnd = (record: RpcRecord) => record.type === "tool_execution_end" && record.toolName === "agent_task_ack";

/** Computed here, independently of the product: the ids the spans must carry. */
const sha = (text: string, bytes: number) => createHash("sha256").update(text).digest().subarray(0, bytes).toString("hex");
const expectedTraceId = (rootTaskId: string) => sha(`pi-tasks trace ${rootTaskId}`, 16);
const expectedSpanId = (taskId: string) => sha(`pi-tasks span ${taskId}`, 8);

/** The chain on one host, every Pi exporting to its own receiver; stopped (flushed) before it returns. */
async function chain(host: PiHost) {
  const receiver = startOtlpReceiver();
  fx.defer(() => receiver.stop());
  const env = otelEnv(receiver);
  const names = { a: `traces-a-${host}`, b: `traces-b-${host}`, c: `traces-c-${host}` };
  const c = fx.pi({ session: names.c, host, install: "traces", worker: true, brain: bannerWorkerBrain(), env });
  const toC = await waitForEndpoint(fx.relay.url, names.c);
  const b = fx.pi({
    session: names.b,
    host,
    install: "traces",
    env,
    brain: (turn) => {
      const parentId = field(lastSeen(turn, "## task assignment"), "taskId");
      if (parentId === undefined) return { text: "nothing assigned" };
      if (!called(turn, "agent_task_send")) return { tools: [{ name: "agent_task_send", arguments: { to: toC, task: SUB_TASK } }] };
      const subId = field(lastSeen(turn, "## task sent"), "taskId");
      const question = lastSeen(turn, "## task question");
      if (question !== undefined && !called(turn, "agent_task_message", '"answer"')) {
        const answer = { taskId: subId, type: "answer", inReplyTo: field(question, "eventId"), message: ANSWER };
        return { tools: [{ name: "agent_task_message", arguments: answer }] };
      }
      if (lastSeen(turn, "## task completed") !== undefined && !called(turn, "agent_task_done")) {
        return {
          tools: [
            { name: "agent_task_ack", arguments: { taskId: subId } },
            { name: "agent_task_done", arguments: { taskId: parentId, status: "completed", summary: `banner done ${MARKER}` } },
          ],
        };
      }
      return { text: "waiting for my worker" };
    },
  });
  const toB = await waitForEndpoint(fx.relay.url, names.b);
  const a = fx.pi({ session: names.a, host, install: "traces", env, brain: sendThenAckBrain(toB, ROOT_TASK) });
  a.prompt("Delegate the banner.");
  const acked = await a.waitFor(isAckEnd, 30_000).then(
    () => true,
    () => false,
  );
  await b.waitFor(isParentAcked, 10_000).catch(() => undefined);
  await c.waitFor(isParentAcked, 10_000).catch(() => undefined);
  const rootTaskId = String(toolCalls(a, "agent_task_send")[0]?.details.taskId);
  const subTaskId = String(toolCalls(b, "agent_task_send")[0]?.details.taskId);
  const processes = { a, b, c };
  // Stopping flushes each Pi's spans (session_shutdown): they are in by the time the Pis exited.
  const stopped = await stopEach(processes);
  await eventually(() => receiver.spans.length >= 2 || undefined, 15_000, 50);
  const spansOf = (taskId: string): ReceivedSpan[] => receiver.spans.filter((span) => span.attributes["pi_tasks.task.id"] === taskId);
  return { a, b, c, names, acked, rootTaskId, subTaskId, processes, stopped, receiver, spansOf };
}

describeOnHosts("traces across hops: A → B → C with the OpenTelemetry environment set on all three Pis", (host) => {
  let run: ReturnType<typeof chain>;

  beforeAll(() => {
    run = scenario(() => chain(host));
  });

  test("the chain ran: C asked, B answered, both tasks completed and were acknowledged", async () => {
    const { acked, b, c, a } = await run;
    expect(acked).toBe(true);
    expect(toolCalls(c, "agent_task_done").map((call) => call.isError)).toEqual([false]);
    expect(toolCalls(b, "agent_task_message").map((call) => ({ type: call.args.type, isError: call.isError }))).toEqual([
      { type: "answer", isError: false },
    ]);
    expect(toolCalls(b, "agent_task_ack").map((call) => call.isError)).toEqual([false]);
    expect(toolCalls(a, "agent_task_ack").map((call) => call.isError)).toEqual([false]);
  });

  test("one span per task, exported by its origin only (A's task by A, B's sub-task by B), under OTEL_SERVICE_NAME", async () => {
    const { receiver, spansOf, rootTaskId, subTaskId, names } = await run;
    expect(receiver.refused).toEqual([]);
    expect(spansOf(rootTaskId).length).toBe(1);
    expect(spansOf(subTaskId).length).toBe(1);
    expect(receiver.spans.length).toBe(2);
    expect(receiver.spans.map((span) => span.attributes["pi_tasks.origin.session"]).sort()).toEqual([names.a, names.b]);
    expect(receiver.spans.map((span) => span.resource["service.name"])).toEqual([SERVICE, SERVICE]);
    expect(receiver.spans.map((span) => span.name)).toEqual(["pi-tasks.task", "pi-tasks.task"]);
  });

  test("both spans share ONE trace id, derived from the root task; B→C's parent span is A→B's span", async () => {
    const { spansOf, rootTaskId, subTaskId } = await run;
    const [root] = spansOf(rootTaskId);
    const [sub] = spansOf(subTaskId);
    expect(root?.traceId).toBe(expectedTraceId(rootTaskId));
    expect(sub?.traceId).toBe(root!.traceId);
    expect(root?.spanId).toBe(expectedSpanId(rootTaskId));
    expect(sub?.spanId).toBe(expectedSpanId(subTaskId));
    expect(root?.parentSpanId).toBeUndefined();
    expect(sub?.parentSpanId).toBe(root!.spanId);
  });

  test("span attributes: ids, lineage, sessions, final status and outcome", async () => {
    const { receiver, spansOf, rootTaskId, subTaskId, names } = await run;
    expect(spansOf(rootTaskId)[0]?.attributes).toEqual({
      "pi_tasks.task.id": rootTaskId,
      "pi_tasks.task.root_id": rootTaskId,
      "pi_tasks.task.depth": 2,
      "pi_tasks.origin.session": names.a,
      "pi_tasks.worker.session": names.b,
      "pi_tasks.task.status": "completed",
      "pi_tasks.task.outcome": "succeeded",
      "pi_tasks.task.ended": "acknowledged",
    });
    expect(spansOf(subTaskId)[0]?.attributes).toEqual({
      "pi_tasks.task.id": subTaskId,
      "pi_tasks.task.root_id": rootTaskId,
      "pi_tasks.task.parent_id": rootTaskId,
      "pi_tasks.task.depth": 3,
      "pi_tasks.origin.session": names.b,
      "pi_tasks.worker.session": names.c,
      "pi_tasks.task.status": "completed",
      "pi_tasks.task.outcome": "succeeded",
      "pi_tasks.task.ended": "acknowledged",
    });
    // OTLP's STATUS_CODE_OK.
    expect(receiver.spans.map((span) => span.status.code)).toEqual([1, 1]);
  });

  test("span events are the task's events by type, each with its task id, event id and type only", async () => {
    const { receiver, spansOf, rootTaskId, subTaskId } = await run;
    const names = (taskId: string) => spansOf(taskId)[0]?.events.map((event) => event.name) ?? [];
    expect(names(rootTaskId)).toEqual(expect.arrayContaining(["task.created", "task.completed", "task.parent_acknowledged"]));
    expect(names(subTaskId)).toEqual(
      expect.arrayContaining(["task.created", "task.question", "task.answer", "task.completed", "task.parent_acknowledged"]),
    );
    for (const span of receiver.spans) {
      for (const event of span.events) {
        expect(Object.keys(event.attributes).sort()).toEqual(["pi_tasks.event.id", "pi_tasks.event.type", "pi_tasks.task.id"]);
        expect(event.attributes["pi_tasks.event.type"]).toBe(event.name);
        expect(event.attributes["pi_tasks.task.id"]).toBe(span.attributes["pi_tasks.task.id"]);
      }
    }
  });

  test("nothing anyone wrote was exported: no task text, question, answer or summary in any span", async () => {
    const { receiver } = await run;
    expect(receiver.bodies.length).toBeGreaterThan(0);
    const exported = receiver.bodies.join("\n");
    expect(exported.includes(MARKER)).toBe(false);
    expect(exported.includes(QUESTION)).toBe(false);
    expect(exported.includes("forest green")).toBe(false);
    expect(exported.includes("Paint the release banner")).toBe(false);
  });

  test("all three Pis stopped cleanly with tracing on (no extension error, no stray stdout)", async () => {
    const { processes, stopped } = await run;
    expectCleanStops(processes, stopped);
  });
});

describeOnHosts("traces asked for, OpenTelemetry not installed", (host) => {
  // The checkout (the bun host) has its dev dependencies: nothing is missing there.
  test.skipIf(host === "bun")(
    "the default install has no OpenTelemetry: the person is told once, with the command that installs it",
    async () => {
      const receiver = startOtlpReceiver();
      fx.defer(() => receiver.stop());
      const pi = fx.pi({ session: "traces-missing-node", host, env: otelEnv(receiver), brain: () => ({ text: "ok" }) });
      const told = await pi.waitFor(
        (record) =>
          record.type === "extension_ui_request" && record.method === "notify" && String(record.message).includes("OpenTelemetry"),
        30_000,
      );
      expect(String(told.message)).toMatch(
        /is not installed beside pi-tasks, so no trace is sent\. Install it with: npm install --prefix \S+ --no-save @opentelemetry\/api@/,
      );
      expect(told.notifyType).toBe("warning");
    },
  );
});
