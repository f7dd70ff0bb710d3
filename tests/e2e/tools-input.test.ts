/**
 * End to end: every `agent_task_*` tool with invalid input, called by a scripted model in a real
 * Pi, answers a clear error (Pi's validation text, or our `isError` result with a `code`) and
 * changes no state: the inbox stays empty and no envelope reaches the relay (counted at a fault
 * proxy between Pi and the relay).
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { type ConfiguredTaskCore, createConfiguredTaskCore } from "../../src/core/configured.ts";
import {
  maxSummaryChars,
  maxTaskTextChars,
  maxTaskTimeoutMs,
  minTaskTimeoutMs,
  maxWaitTimeoutMs,
  minWaitTimeoutMs,
} from "../../src/protocol/limits.ts";
import { RELAY_ID } from "../../src/protocol/names.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import { createFaultProxy, type FaultProxy } from "../../testkit/fault-proxy.ts";
import { expectNoProblems, field, toolCalls, type ToolCall } from "../helpers/pi-kit.ts";
import { deferred } from "../../testkit/async.ts";
import { waitForEndpoint } from "../../testkit/session-control.ts";
import { type PiProcess, startPi } from "../helpers/pi-process.ts";
import { startRelayProcess, type RelayProcess } from "../../testkit/relay-process.ts";

// The scenarios start in beforeAll and run concurrently; a test waits for its scenario's real processes.
setDefaultTimeout(60_000);

interface Case {
  readonly label: string;
  readonly tool: string;
  readonly args: (to: TaskEndpoint) => Record<string, unknown>;
  /** The error code our tool must answer with, or "validation" (Pi's or ours, either is clear). */
  readonly expect: string;
}

const NO_TASK = "no-such-task";

const CASES: readonly Case[] = [
  { label: "send: unknown field", tool: "agent_task_send", args: (to) => ({ to, task: "x", priority: 1 }), expect: "validation" },
  {
    label: "send: unknown field inside the endpoint",
    tool: "agent_task_send",
    args: (to) => ({ to: { ...to, alias: "w" }, task: "x" }),
    expect: "validation",
  },
  // A name is a specialist's (a worker profile): a name no profile has is refused by name, nothing started.
  {
    label: "send: a name that is no profile",
    tool: "agent_task_send",
    args: () => ({ to: "the-worker", task: "x" }),
    expect: "INVALID_PROFILE",
  },
  { label: "send: wrong type (a list)", tool: "agent_task_send", args: () => ({ to: ["the-worker"], task: "x" }), expect: "validation" },
  { label: "send: missing task", tool: "agent_task_send", args: (to) => ({ to }), expect: "validation" },
  { label: "send: empty task", tool: "agent_task_send", args: (to) => ({ to, task: "" }), expect: "validation" },
  {
    label: "send: task too long",
    tool: "agent_task_send",
    args: (to) => ({ to, task: "x".repeat(maxTaskTextChars + 1) }),
    expect: "validation",
  },
  {
    label: "send: timeoutMs below the minimum",
    tool: "agent_task_send",
    args: (to) => ({ to, task: "x", timeoutMs: minTaskTimeoutMs - 1 }),
    expect: "validation",
  },
  {
    label: "send: timeoutMs above the maximum",
    tool: "agent_task_send",
    args: (to) => ({ to, task: "x", timeoutMs: maxTaskTimeoutMs + 1 }),
    expect: "validation",
  },
  {
    label: "send: unregistered target",
    tool: "agent_task_send",
    args: () => ({ to: { relay: RELAY_ID, id: "00000000-0000-4000-8000-00000000dead" }, task: "x" }),
    expect: "TARGET_NOT_REGISTERED",
  },
  {
    label: "message: unknown taskId",
    tool: "agent_task_message",
    args: () => ({ taskId: NO_TASK, type: "question", message: "?" }),
    expect: "UNKNOWN_TASK",
  },
  {
    label: "message: unknown type",
    tool: "agent_task_message",
    args: () => ({ taskId: NO_TASK, type: "shout", message: "?" }),
    expect: "validation",
  },
  {
    label: "message: missing message",
    tool: "agent_task_message",
    args: () => ({ taskId: NO_TASK, type: "question" }),
    expect: "validation",
  },
  {
    label: "message: unknown field",
    tool: "agent_task_message",
    args: () => ({ taskId: NO_TASK, type: "question", message: "?", urgent: true }),
    expect: "validation",
  },
  {
    label: "done: unknown taskId",
    tool: "agent_task_done",
    args: () => ({ taskId: NO_TASK, status: "completed", summary: "s" }),
    expect: "UNKNOWN_TASK",
  },
  {
    label: "done: unknown status",
    tool: "agent_task_done",
    args: () => ({ taskId: NO_TASK, status: "finished", summary: "s" }),
    expect: "validation",
  },
  {
    label: "done: summary too long",
    tool: "agent_task_done",
    args: () => ({ taskId: NO_TASK, status: "completed", summary: "s".repeat(maxSummaryChars + 1) }),
    expect: "validation",
  },
  { label: "done: missing summary", tool: "agent_task_done", args: () => ({ taskId: NO_TASK, status: "completed" }), expect: "validation" },
  {
    label: "done: unknown field",
    tool: "agent_task_done",
    args: () => ({ taskId: NO_TASK, status: "completed", summary: "s", files: [] }),
    expect: "validation",
  },
  { label: "ack: unknown taskId", tool: "agent_task_ack", args: () => ({ taskId: NO_TASK }), expect: "UNKNOWN_TASK" },
  { label: "ack: missing taskId", tool: "agent_task_ack", args: () => ({}), expect: "validation" },
  { label: "ack: wrong type", tool: "agent_task_ack", args: () => ({ taskId: { id: NO_TASK } }), expect: "validation" },
  { label: "cancel: unknown taskId", tool: "agent_task_cancel", args: () => ({ taskId: NO_TASK }), expect: "UNKNOWN_TASK" },
  { label: "cancel: unknown field", tool: "agent_task_cancel", args: () => ({ taskId: NO_TASK, force: true }), expect: "validation" },
  { label: "status: unknown taskId", tool: "agent_task_status", args: () => ({ taskId: NO_TASK }), expect: "UNKNOWN_TASK" },
  { label: "status: missing taskId", tool: "agent_task_status", args: () => ({}), expect: "validation" },
  { label: "inbox: unknown field", tool: "agent_task_inbox", args: () => ({ ack: true }), expect: "validation" },
  {
    label: "wait: unknown taskId",
    tool: "agent_task_wait",
    args: () => ({ taskId: NO_TASK, timeoutMs: minWaitTimeoutMs }),
    expect: "UNKNOWN_TASK",
  },
  {
    label: "wait: timeoutMs below the minimum",
    tool: "agent_task_wait",
    args: () => ({ taskId: NO_TASK, timeoutMs: minWaitTimeoutMs - 1 }),
    expect: "validation",
  },
  {
    label: "wait: timeoutMs above the maximum",
    tool: "agent_task_wait",
    args: () => ({ taskId: NO_TASK, timeoutMs: maxWaitTimeoutMs + 1 }),
    expect: "validation",
  },
];

let relay: RelayProcess;
let gate: FaultProxy;
let target: ConfiguredTaskCore;
let origin: PiProcess;
let outcome: Promise<{
  calls: ToolCall[];
  inbox: ToolCall;
  relayOperations: string[];
  targetMail: number;
  fractional: ToolCall;
  code: number;
}>;

async function probe() {
  const checked = deferred();
  const to = await target.run((current) => current.connect());
  origin = startPi({
    session: "input-origin",
    relayUrl: gate.url,
    brain: async (turn) => {
      const calls = turn.messages.filter((message) => message.role === "assistant").length;
      if (calls === 0) return { tools: CASES.map((entry) => ({ name: entry.tool, arguments: entry.args(to) })) };
      if (calls === 1) return { tools: [{ name: "agent_task_inbox", arguments: {} }] };
      if (calls === 2) {
        await checked.promise;
        return { tools: [{ name: "agent_task_send", arguments: { to, task: "fractional timeout", timeoutMs: minTaskTimeoutMs + 0.5 } }] };
      }
      return { text: "done probing" };
    },
  });
  await waitForEndpoint(relay.url, "input-origin");
  await Bun.sleep(300);
  gate.resetStats();
  origin.prompt("Probe the task tools.");
  await origin.waitFor((record) => record.type === "tool_execution_end" && record.toolName === "agent_task_inbox", 20_000);
  // One more background pass: nothing the refused calls queued may leave later.
  await Bun.sleep(1_200);
  const relayOperations = gate.requests().map((request) => request.operation);
  await target.refresh();
  const targetMail = target.current().listTasks().length;
  checked.resolve();
  await origin.waitFor((record) => record.type === "agent_settled", 20_000);
  const all = toolCalls(origin);
  const calls = all.slice(0, CASES.length).sort((a, b) => Number(a.toolCallId.split("-").at(-1)) - Number(b.toolCallId.split("-").at(-1)));
  const inbox = all[CASES.length]!;
  const fractional = all[CASES.length + 1]!;
  const code = await origin.stop();
  return { calls, inbox, relayOperations, targetMail, fractional, code };
}

beforeAll(async () => {
  relay = await startRelayProcess();
  gate = createFaultProxy({ target: relay.url });
  target = createConfiguredTaskCore({ url: relay.url, callerSession: "input-target" });
  outcome = probe();
  outcome.catch(() => undefined);
});

afterAll(async () => {
  await origin?.stop();
  await target?.close();
  await gate?.stop();
  await relay?.stop();
});

describe("every tool with invalid input", () => {
  for (const [index, entry] of CASES.entries()) {
    test(`${entry.label} → ${entry.expect === "validation" ? "a validation error" : entry.expect}`, async () => {
      const { calls } = await outcome;
      const call = calls[index]!;
      expect(call.name).toBe(entry.tool);
      expect(call.isError).toBe(true);
      const piValidation = call.text.startsWith(`Validation failed for tool "${entry.tool}"`);
      const ours = field(call.text, "code");
      if (entry.expect === "validation") {
        // Either Pi's validator refused it (with the offending field), or our strict check did.
        expect(piValidation || ours === "INVALID_REQUEST").toBe(true);
        if (!piValidation) expect(call.details).toMatchObject({ error: { code: "INVALID_REQUEST", retryable: false } });
      } else {
        expect(piValidation).toBe(false);
        expect(ours).toBe(entry.expect);
        expect(call.details).toMatchObject({ error: { code: entry.expect, retryable: false } });
      }
    });
  }

  // Pi coerces `integer` fields by truncation; the tool schemas declare whole numbers as
  // `number` + `multipleOf: 1`, so a fraction is refused instead of silently truncated.
  test("send: fractional timeoutMs → a validation error", async () => {
    const { fractional } = await outcome;
    expect(fractional.name).toBe("agent_task_send");
    expect(fractional.isError).toBe(true);
  });

  test("changes no state: the inbox stays empty, only the unregistered send reaches the relay (refused), the target gets nothing", async () => {
    const { inbox, relayOperations, targetMail, code } = await outcome;
    expect(inbox.name).toBe("agent_task_inbox");
    expect(inbox.isError).toBe(false);
    expect(inbox.text).toContain("(no tasks)");
    expect(inbox.details.tasks).toEqual([]);
    // Only the send to the unregistered target reached the relay (refused: no task is created), and
    // nothing was looked up separately (createTask is one round trip).
    expect(relayOperations.filter((operation) => operation === "send")).toHaveLength(1);
    expect(relayOperations.filter((operation) => operation === "resolve")).toEqual([]);
    expect(targetMail).toBe(0);
    expect(code).toBe(0);
    expectNoProblems(origin, "origin");
  });
});
