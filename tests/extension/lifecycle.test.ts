/**
 * The extension factory and its lifetime in process: a fake Pi API (registration, handlers,
 * sendMessage/appendEntry, UI) around the real factory, against an in-process relay behind the
 * fault proxy, so every relay request is counted and can be held.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import piTasks from "../../extensions/pi-tasks/extension.ts";
import { EVENT_MESSAGE, WAKE_MESSAGE } from "../../extensions/pi-tasks/presenter.ts";
import { createConfiguredTaskCore, type ConfiguredTaskCore } from "../../src/core/configured.ts";
import { idlePollIntervalMs, defaultRequestDeadlineMs } from "../../src/protocol/limits.ts";
import { startRelayServer, type RelayServer } from "../../src/relay-server/server.ts";
import { createFaultProxy, type FaultProxy } from "../../testkit/fault-proxy.ts";
import { eventually, settlesWithin, withUnhandledRejections } from "../../testkit/async.ts";
import { waitForEndpoint } from "../../testkit/session-control.ts";
import { piTasksHome } from "../../src/relay-client/config.ts";
import { homeTrust } from "../../src/core/home-trust.ts";

type Handler = (event: unknown, ctx: unknown) => unknown;

interface FakePi {
  readonly tools: Map<
    string,
    {
      execute(
        id: string,
        params: unknown,
        signal?: AbortSignal,
      ): Promise<{ isError?: boolean; content: { text: string }[]; details: Record<string, unknown> }>;
    }
  >;
  readonly commands: Map<string, { handler(args: string, ctx: unknown): Promise<void> }>;
  /** Everything the extension wrote into Pi, in order. */
  readonly writes: { kind: "message" | "entry" | "status" | "notify" | "widget"; value: unknown }[];
  readonly statuses: (string | undefined)[];
  emit(name: string, event?: Record<string, unknown>): Promise<unknown[]>;
}

const ENV_KEYS = [
  "WOLFPACK_SESSION_NAME",
  "PI_TASKS_RELAY_URL",
  "PI_TASK_WORKER",
  "WOLFPACK_PORT",
  "WOLFPACK_JWT_SECRET",
  "PI_TASKS_EMBEDDED_RELAY",
] as const;

/** Loads the real factory with `env` in `process.env` (read by the factory and at session_start). */
async function loadExtension(env: Partial<Record<(typeof ENV_KEYS)[number], string>>): Promise<FakePi> {
  const saved = Object.fromEntries(ENV_KEYS.map((key) => [key, process.env[key]]));
  for (const key of ENV_KEYS) delete process.env[key];
  // Never start an embedded relay from these tests unless one asks for it.
  Object.assign(process.env, { WOLFPACK_JWT_SECRET: "", PI_TASKS_EMBEDDED_RELAY: "0", ...env });
  const handlers = new Map<string, Handler[]>();
  const branch: unknown[] = [];
  const fake: FakePi = {
    tools: new Map(),
    commands: new Map(),
    writes: [],
    statuses: [],
    async emit(name, event = {}) {
      const results: unknown[] = [];
      for (const handler of handlers.get(name) ?? []) results.push(await handler({ type: name, ...event }, ctx));
      return results;
    },
  };
  const ctx = {
    cwd: "/tmp/lifecycle-project",
    hasUI: true,
    isIdle: () => true,
    hasPendingMessages: () => false,
    abort: () => undefined,
    sessionManager: { getBranch: () => branch },
    ui: {
      setStatus: (_key: string, text: string | undefined) => {
        fake.statuses.push(text);
        fake.writes.push({ kind: "status", value: text });
      },
      notify: (message: string) => fake.writes.push({ kind: "notify", value: message }),
      setWidget: (_key: string, lines: unknown) => fake.writes.push({ kind: "widget", value: lines }),
    },
  };
  const api = {
    registerTool: (definition: { name: string }) => fake.tools.set(definition.name, definition as never),
    registerCommand: (name: string, options: unknown) => fake.commands.set(name, options as never),
    registerEntryRenderer: () => undefined,
    on: (name: string, handler: Handler) => handlers.set(name, [...(handlers.get(name) ?? []), handler]),
    sendMessage: (message: { customType: string; details?: unknown }) => {
      fake.writes.push({ kind: "message", value: message });
      if (message.customType === EVENT_MESSAGE) branch.push({ type: "custom_message", ...message });
      // Pi takes a wake in: its message ends (the presenter observes the wake by it).
      if (message.customType === WAKE_MESSAGE)
        queueMicrotask(() => void fake.emit("message_end", { message: { role: "custom", ...message } }));
    },
    appendEntry: (customType: string, data: unknown) => fake.writes.push({ kind: "entry", value: { customType, data } }),
  };
  try {
    piTasks(api as never);
    await fake.emit("session_start", { reason: "startup" });
  } finally {
    for (const key of ENV_KEYS) {
      if (saved[key] === undefined) delete process.env[key];
      else process.env[key] = saved[key];
    }
  }
  return fake;
}

let relay: RelayServer;
let proxy: FaultProxy;
const loaded: FakePi[] = [];
const cores: ConfiguredTaskCore[] = [];

beforeAll(async () => {
  relay = await startRelayServer({ host: "127.0.0.1", port: 0, env: {} });
  proxy = createFaultProxy({ target: relay.url });
});

afterEach(async () => {
  for (const fake of loaded.splice(0)) await fake.emit("session_shutdown", { reason: "quit" });
  await Promise.all(cores.splice(0).map((core) => core.close()));
  proxy.clear();
  proxy.release();
});

afterAll(async () => {
  await proxy.stop();
  await relay.stop();
});

async function load(env: Parameters<typeof loadExtension>[0]): Promise<FakePi> {
  const fake = await loadExtension(env);
  loaded.push(fake);
  return fake;
}

/** Requests of `session`'s process reaching the relay from index `from` on. */
function operationsSince(from: number): string[] {
  return proxy
    .requests()
    .slice(from)
    .map((request) => request.operation);
}

const registered = (session: string) => waitForEndpoint(relay.url, session, { timeoutMs: 3_000, pollMs: 20 });

describe("the factory", () => {
  test("registers sixteen tools, /tasks and its handlers, and starts nothing before session_start", async () => {
    proxy.resetStats();
    const handlers: string[] = [];
    const tools: string[] = [];
    piTasks({
      registerTool: (definition: { name: string }) => tools.push(definition.name),
      registerCommand: (name: string) => handlers.push(`/${name}`),
      registerEntryRenderer: () => undefined,
      on: (name: string) => handlers.push(name),
      sendMessage: () => {
        throw new Error("Extension runtime not initialized");
      },
      appendEntry: () => {
        throw new Error("Extension runtime not initialized");
      },
    } as never);
    expect(tools.sort()).toEqual([
      "agent_task_ack",
      "agent_task_apply",
      "agent_task_cancel",
      "agent_task_done",
      "agent_task_inbox",
      "agent_task_message",
      "agent_task_reassign",
      "agent_task_request_grant",
      "agent_task_revise",
      "agent_task_send",
      "agent_task_spawn",
      "agent_task_status",
      "agent_task_stop",
      "agent_task_wait",
      "agent_task_workers",
      "agent_task_workflow",
    ]);
    expect(handlers.sort()).toEqual(
      [
        "/tasks",
        "agent_end",
        "agent_settled",
        "agent_start",
        "message_end",
        "session_shutdown",
        "session_start",
        "tool_call",
        "tool_execution_end",
        "tool_execution_start",
        "turn_end",
      ].sort(),
    );
    await Bun.sleep(100);
    expect(proxy.requests()).toEqual([]);
  });
});

describe("immediate refreshes (history #2 at the hook boundary)", () => {
  for (const hook of ["turn_end", "agent_end", "agent_settled"]) {
    test(`${hook} runs a pass at once, not at the ${idlePollIntervalMs} ms idle cadence`, async () => {
      const session = `hook-${hook}`;
      const fake = await load({ WOLFPACK_SESSION_NAME: session, PI_TASKS_RELAY_URL: proxy.url });
      await registered(session);
      await proxy.waitFor((stats) => (stats.operations.receive?.forwarded ?? 0) >= 1);
      // Let the start-up pass finish; an idle non-worker now waits the idle cadence.
      await Bun.sleep(250);
      const from = proxy.requests().length;
      const results = await fake.emit(hook);
      expect(results).toEqual([undefined]);
      // A wait with a budget below the idle cadence (the next timer-driven pass), generous for a loaded machine.
      await proxy.waitFor(() => operationsSince(from).includes("receive"), idlePollIntervalMs / 2);
    });
  }

  test("handlers never throw or return a rejection while the relay is down", async () => {
    const fake = await load({ WOLFPACK_SESSION_NAME: "down", PI_TASKS_RELAY_URL: "http://127.0.0.1:9" });
    const rejections = await withUnhandledRejections(async () => {
      for (const hook of ["turn_end", "agent_end", "agent_settled", "message_end"]) {
        for (const result of await fake.emit(hook, { message: { role: "assistant" } })) expect(result).toBeUndefined();
      }
    }, 300);
    expect(rejections).toEqual([]);
    expect(
      await eventually(
        () =>
          fake.statuses.some((text) =>
            /^tasks: down · unavailable \(RELAY_UNAVAILABLE\) on \w+ — relay unreachable at http:\/\/127\.0\.0\.1:9; retrying$/.test(
              text ?? "",
            ),
          ),
        3_000,
      ),
    ).toBe(true);
  });
});

describe("history #7: shutdown in the middle of a pass", () => {
  test("session_shutdown returns promptly although the pass's receive is held; afterwards nothing is written or sent", async () => {
    const fake = await load({ WOLFPACK_SESSION_NAME: "held-worker", PI_TASKS_RELAY_URL: proxy.url, PI_TASK_WORKER: "1" });
    const to = await registered("held-worker");
    await Bun.sleep(250);
    proxy.push({ operation: "receive", kind: "hold", times: Infinity });
    // Mail waits: the doorbell (or the 1 s worker cadence) starts a pass that gets held.
    const origin = createConfiguredTaskCore({ url: relay.url, callerSession: "held-origin" });
    cores.push(origin);
    await origin.run((core) => core.createTask({ to, task: "arrives during shutdown" }));
    await proxy.waitFor((stats) => stats.held >= 1, 15_000);
    const writes = fake.writes.length;
    const from = proxy.requests().length;
    // The held request ends only by an abort or at the request deadline: a wait with a budget below
    // that deadline (and far above an in-process shutdown on a loaded machine) shows which.
    await settlesWithin(
      fake.emit("session_shutdown", { reason: "quit" }),
      "session_shutdown (waiting for the held request would take the request deadline)",
      (defaultRequestDeadlineMs * 3) / 4,
    );
    loaded.splice(loaded.indexOf(fake), 1);
    // The held request now reaches the relay (the client gave up on it); give any survivor time.
    proxy.release();
    await Bun.sleep(1_500);
    expect(fake.writes.slice(writes)).toEqual([]);
    // Releasing the lease is the only request after shutdown began: no receipt, ACK or receive.
    expect(operationsSince(from).filter((operation) => operation !== "disconnect")).toEqual([]);
    // The tools know there is no lifetime any more.
    const inbox = await fake.tools.get("agent_task_inbox")!.execute("call", {});
    expect(inbox.isError).toBe(true);
    expect(inbox.details).toMatchObject({ error: { code: "TASKS_NOT_RUNNING" } });
    // Late handlers stay harmless.
    expect(await fake.emit("agent_settled")).toEqual([undefined]);
    await Bun.sleep(100);
    expect(operationsSince(from).filter((operation) => operation !== "disconnect")).toEqual([]);
  });
});

describe("the footer: what matters most first", () => {
  /** Runs `/tasks` in the fake Pi (an RPC client's notification) and returns its lines. */
  async function board(fake: FakePi): Promise<string[]> {
    const shown: string[] = [];
    const ctx = { hasUI: true, mode: "rpc", ui: { notify: (text: string) => shown.push(text) } };
    await fake.commands.get("tasks")!.handler("", ctx);
    return shown.join("\n").split("\n");
  }

  test("a failing pass adds its failure after the counts (never in their place), /tasks names it with the fix, and both clear when it does", async () => {
    const session = "footer-counts";
    const fake = await load({ WOLFPACK_SESSION_NAME: session, PI_TASKS_RELAY_URL: proxy.url });
    const to = await registered(session);
    // An origin of the same identity asks this Pi's session a question on a task it assigned: 1
    // active, 1 question waiting.
    const trust = homeTrust(piTasksHome(process.env));
    const origin = createConfiguredTaskCore({ url: relay.url, callerSession: "footer-origin", env: {}, trust });
    cores.push(origin);
    const { taskId } = await origin.run((core) => core.createTask({ to, task: "counted on the footer" }));
    const counts = `tasks: ${session} · 1 active · 1 question waiting`;
    let asked = false;
    const shown = await eventually(async () => {
      await origin.refresh();
      if (!asked && origin.current().getTask(taskId).deliveryEvidence.relayAcceptance === "accepted") {
        await origin.run((core) => core.message({ taskId, type: "question", message: "which colour?" }));
        asked = true;
      }
      return fake.statuses.at(-1) === counts;
    }, 10_000);
    expect({ shown, last: fake.statuses.at(-1) }).toEqual({ shown: true, last: counts });
    expect((await board(fake)).some((line) => line.startsWith("problem"))).toBe(false);

    // The relay stops answering this Pi's receives: the failure follows the counts.
    const unavailable = { ok: false, profile: "volatile-v1", error: { code: "RELAY_UNAVAILABLE", message: "down", retryable: true } };
    const rule = proxy.push({ operation: "receive", kind: "reply", status: 503, body: unavailable, times: Infinity });
    const failing = `${counts} · unavailable (RELAY_UNAVAILABLE) on receive — relay unreachable at ${proxy.url}; retrying`;
    await eventually(() => fake.statuses.at(-1) === failing, 10_000);
    expect(fake.statuses.at(-1)).toBe(failing);
    const lines = await board(fake);
    expect(lines).toContain(
      `problem (on the footer): unavailable (RELAY_UNAVAILABLE) on receive — relay unreachable at ${proxy.url}; retrying`,
    );
    expect(lines.find((line) => line.startsWith("  fix: "))).toContain("pi-tasks retries by itself");

    // It answers again: the failure goes from the footer and from /tasks.
    rule.cancel();
    expect(await eventually(() => fake.statuses.at(-1) === counts, 10_000)).toBe(true);
    expect((await board(fake)).some((line) => line.startsWith("problem"))).toBe(false);
  }, 40_000);
});

describe("the tool_call gate handler", () => {
  test("a worker's bash is blocked with the gate's reason before any assignment; an ordinary Pi's is not", async () => {
    const worker = await load({ WOLFPACK_SESSION_NAME: "gate-fake-worker", PI_TASKS_RELAY_URL: proxy.url, PI_TASK_WORKER: "1" });
    const [verdict] = await worker.emit("tool_call", { toolName: "bash", input: { command: "ls" } });
    expect(verdict).toMatchObject({ block: true });
    expect(String((verdict as { reason: string }).reason).startsWith("PI_TASK_WORKER_ASSIGNMENT_REQUIRED")).toBe(true);
    expect(await worker.emit("tool_call", { toolName: "agent_task_inbox", input: {} })).toEqual([undefined]);
    const ordinary = await load({ WOLFPACK_SESSION_NAME: "gate-fake-ordinary", PI_TASKS_RELAY_URL: proxy.url });
    expect(await ordinary.emit("tool_call", { toolName: "bash", input: { command: "ls" } })).toEqual([undefined]);
  });
});

describe("without WOLFPACK_SESSION_NAME", () => {
  test("a generated name from the project directory works, and the footer shows it with the counts", async () => {
    const fake = await load({ PI_TASKS_RELAY_URL: proxy.url });
    const named = await eventually(() => fake.statuses.find((text) => text?.startsWith("tasks: lifecycle-project-")), 3_000);
    expect(named).toMatch(/^tasks: lifecycle-project-[0-9a-z]{6} · idle$/);
    const session = named!.slice("tasks: ".length, -" · idle".length);
    const endpoint = await registered(session);
    const inbox = await fake.tools.get("agent_task_inbox")!.execute("call", {});
    expect(inbox.isError).toBeUndefined();
    expect(endpoint.id.length).toBeGreaterThan(0);
    // A /reload (this instance shut down, a fresh one started in the same Pi process) keeps the name.
    await fake.emit("session_shutdown", { reason: "reload" });
    const reloaded = await load({ PI_TASKS_RELAY_URL: proxy.url });
    const renamed = await eventually(() => reloaded.statuses.find((text) => text?.startsWith("tasks: lifecycle-project-")), 3_000);
    expect(renamed).toBe(`tasks: ${session} · idle`);
  });
});
