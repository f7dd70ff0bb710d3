/**
 * The one-command demo: a relay on a free loopback port, a worker started through
 * `pi-tasks spawn`, an origin Pi driven over RPC, and a small real task (the worker writes and
 * tests a file in a temporary project, asks one question, the origin answers, verifies and
 * acknowledges). It returns a timeline in milliseconds and cleans up every process it started.
 */
import { EVENT_MESSAGE } from "../protocol/session-entries.ts";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { customAlphabet } from "nanoid";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { awaitRegistration, relayTransport, spawnWorker } from "../host/spawn.ts";
import { rpcLogFile } from "../host/spawned.ts";
import { stopProcess } from "../host/stop.ts";
import { TaskError, toTaskError } from "../protocol/errors.ts";
import { demoTimeoutMs, defaultWorkerReadinessTimeoutMs, workerShutdownGraceMs } from "../protocol/limits.ts";
import { PACKAGE_ROOT } from "../host/pi-cli.ts";
import { type PiRpc, type RpcRecord, startPiRpc } from "./pi-rpc.ts";
import { type RelayProcess, startRelayProcess } from "./relay-process.ts";
import { DEMO_GREETING } from "./scenarios/demo-origin.ts";

export const DEMO_STEPS = [
  "accepted",
  "receiver_recorded",
  "pi_inserted",
  "wake_accepted",
  "question",
  "answer",
  "done",
  "origin woken",
  "acknowledged",
] as const;
export type DemoStep = (typeof DEMO_STEPS)[number];

export interface TimelineEntry {
  readonly step: DemoStep;
  /** Milliseconds since the demo started (undefined when the step was not observed). */
  readonly ms: number | undefined;
  readonly note?: string;
}

export interface DemoResult {
  readonly ok: boolean;
  readonly code?: string;
  readonly message?: string;
  readonly timeline: readonly TimelineEntry[];
  readonly worker?: { readonly session: string; readonly taskEndpoint: unknown };
  readonly taskId?: string;
  readonly file?: string;
}

export interface DemoOptions {
  readonly env: Record<string, string | undefined>;
  /** A configured real model for both sides; omitted = the scripted model. */
  readonly model?: string;
  readonly timeoutMs?: number;
  /** Progress lines (not JSON); the CLI prints them to stderr. */
  readonly progress?: (line: string) => void;
}

const SCENARIOS = join(PACKAGE_ROOT, "src", "demo", "scenarios");
/** Short, readable session-name suffixes. */
const shortName = customAlphabet("0123456789abcdefghijklmnopqrstuvwxyz", 8);

type Message = { role?: string; customType?: string; timestamp?: number; content?: unknown; details?: Record<string, unknown> };

function messageOf(record: RpcRecord): Message | undefined {
  return record.type === "message_end" ? (record.message as Message) : undefined;
}

function toolCalls(message: Message | undefined): { name: string; arguments: Record<string, unknown> }[] {
  if (message?.role !== "assistant" || !Array.isArray(message.content)) return [];
  return message.content
    .filter((part) => part?.type === "toolCall")
    .map((part) => ({ name: String(part.name), arguments: (part.arguments ?? {}) as Record<string, unknown> }));
}

function firstTime(records: readonly RpcRecord[], match: (message: Message) => boolean, after = 0): number | undefined {
  for (const record of records) {
    const message = messageOf(record);
    if (message !== undefined && match(message) && typeof message.timestamp === "number" && message.timestamp >= after)
      return message.timestamp;
  }
  return undefined;
}

function toolResultTime(records: readonly RpcRecord[], tool: string): number | undefined {
  return firstTime(records, (message) => message.role === "toolResult" && (message as { toolName?: unknown }).toolName === tool);
}

function earliest(...times: (number | undefined)[]): number | undefined {
  const known = times.filter((time): time is number => time !== undefined);
  return known.length === 0 ? undefined : Math.min(...known);
}

function callTime(
  records: readonly RpcRecord[],
  tool: string,
  where: (args: Record<string, unknown>) => boolean = () => true,
): number | undefined {
  return firstTime(records, (message) => toolCalls(message).some((call) => call.name === tool && where(call.arguments)));
}

function parseLog(path: string): RpcRecord[] {
  let text = "";
  try {
    text = readFileSync(path, "utf8");
  } catch {
    return [];
  }
  return text
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line.startsWith("{"))
    .flatMap((line) => {
      try {
        return [JSON.parse(line) as RpcRecord];
      } catch {
        return [];
      }
    });
}

/** The origin's final `agent_task_status` details, where receipts carry their arrival times. */
function statusReceipts(records: readonly RpcRecord[]): Map<string, number> {
  const stages = new Map<string, number>();
  for (const record of records) {
    if (record.type !== "tool_execution_end" || record.toolName !== "agent_task_status") continue;
    const task =
      (record.result as { details?: { task?: { events?: { type: string; occurredAt: number; payload: { stage?: string } }[] } } })?.details
        ?.task ?? {};
    for (const event of task.events ?? []) {
      if (event.type === "task.delivery_receipt" && event.payload.stage !== undefined && !stages.has(event.payload.stage))
        stages.set(event.payload.stage, event.occurredAt);
    }
  }
  return stages;
}

function timeline(startedAt: number, origin: readonly RpcRecord[], worker: readonly RpcRecord[]): TimelineEntry[] {
  const rel = (at: number | undefined) => (at === undefined ? undefined : at - startedAt);
  const receipts = statusReceipts(origin);
  const inserted = firstTime(worker, (message) => message.role === "custom" && message.customType === EVENT_MESSAGE);
  const woken = firstTime(worker, (message) => message.role === "custom" && message.customType === "pi-tasks-wake");
  const done = callTime(worker, "agent_task_done");
  const recorded = receipts.get("receiver_recorded");
  return [
    // The relay accepted the assignment before the send tool returned — and before the worker got
    // it, which can come first (the doorbell is quicker than the tool's return): the earlier of both.
    { step: "accepted", ms: rel(earliest(toolResultTime(origin, "agent_task_send"), inserted)), note: "relay accepted the assignment" },
    recorded === undefined
      ? { step: "receiver_recorded", ms: rel(inserted), note: "implied: the receipt that reached the origin was a later stage" }
      : { step: "receiver_recorded", ms: rel(recorded), note: "receipt at the origin" },
    { step: "pi_inserted", ms: rel(inserted), note: "pi-tasks-event in the worker's session" },
    { step: "wake_accepted", ms: rel(woken), note: receipts.has("wake_accepted") ? "wake receipt reached the origin" : "worker woken" },
    { step: "question", ms: rel(callTime(worker, "agent_task_message", (args) => args.type === "question")) },
    { step: "answer", ms: rel(callTime(origin, "agent_task_message", (args) => args.type === "answer")) },
    { step: "done", ms: rel(done) },
    {
      step: "origin woken",
      ms: rel(firstTime(origin, (message) => message.role === "custom" && message.customType === "pi-tasks-wake", done ?? 0)),
    },
    { step: "acknowledged", ms: rel(toolResultTime(origin, "agent_task_ack")) },
  ];
}

function originPrompt(model: string | undefined, target: unknown): string {
  if (model === undefined) return "Delegate the hello.txt task to the demo worker.";
  return [
    `Delegate this task with agent_task_send to the worker endpoint ${JSON.stringify(target)}:`,
    `"Create hello.txt in your project directory with the greeting I give you when you ask me (ask with agent_task_message), test it, then finish with agent_task_done and result.changedFiles."`,
    `When the worker asks, answer with agent_task_message type answer, inReplyTo the question's eventId, message "${DEMO_GREETING}".`,
    "When it completes, verify hello.txt yourself with bash, then call agent_task_ack.",
  ].join("\n");
}

export async function runDemo(options: DemoOptions): Promise<DemoResult> {
  const startedAt = Date.now();
  const progress = options.progress ?? (() => undefined);
  const scratch = mkdtempSync(join(tmpdir(), "pi-tasks-demo-"));
  const projectDir = join(scratch, "project");
  const stateDir = join(scratch, "state");
  const env = { ...options.env, PI_TASKS_HOME: stateDir, WOLFPACK_JWT_SECRET: "" };
  const workerName = `demo-worker-${shortName()}`;
  let relay: RelayProcess | undefined;
  let origin: PiRpc | undefined;
  let workerLog: string | undefined;
  let workerStarted = false;
  let worker: DemoResult["worker"];
  try {
    await Bun.write(join(projectDir, ".keep"), "");
    relay = await startRelayProcess();
    progress(`relay ${relay.url} (epoch ${relay.epoch})`);
    const launch = options.model === undefined ? { script: join(SCENARIOS, "demo-worker.ts") } : { model: options.model };
    workerStarted = true;
    const spawned = await spawnWorker({ name: workerName, projectDir, relay: relay.url, env, ...launch });
    // The worker's RPC stream (its log is the readable transcript beside it).
    workerLog = rpcLogFile(spawned.log);
    worker = { session: spawned.session, taskEndpoint: spawned.taskEndpoint };
    progress(`worker ${spawned.session} registered as ${spawned.taskEndpoint.relay}/${spawned.taskEndpoint.id} (log ${spawned.log})`);
    const originName = `demo-origin-${shortName()}`;
    origin = startPiRpc({
      session: originName,
      relayUrl: relay.url,
      cwd: projectDir,
      env: { ...env, PI_TASKS_DEMO_TARGET: JSON.stringify(spawned.taskEndpoint) },
      ...(options.model === undefined ? { script: join(SCENARIOS, "demo-origin.ts") } : { model: options.model }),
    });
    const transport = relayTransport(relay.url, env);
    const running = origin;
    const registered = await awaitRegistration(
      transport,
      originName,
      defaultWorkerReadinessTimeoutMs,
      () => running.process.exitCode === null,
    ).finally(() => transport.close());
    if (registered === undefined)
      throw new TaskError("TASK_WORKER_NOT_READY", {
        message: "The origin Pi did not register on the relay.",
        details: { session: originName, stderr: running.stderr() },
      });
    origin.prompt(originPrompt(options.model, spawned.taskEndpoint));
    progress("origin prompted; waiting for the acknowledgement");
    const ack = await origin.waitFor(
      (record) => record.type === "tool_execution_end" && record.toolName === "agent_task_ack",
      options.timeoutMs ?? demoTimeoutMs,
    );
    if ((ack as { isError?: unknown }).isError === true)
      throw new TaskError("TASK_ERROR", { message: "agent_task_ack failed", details: { result: ack.result } });
    await origin
      .waitFor((record) => record.type === "agent_settled", options.timeoutMs ?? demoTimeoutMs, origin.records.indexOf(ack as never))
      .catch(() => undefined);
    const file = readFileSync(join(projectDir, "hello.txt"), "utf8").trim();
    const taskId = String((ack.result as { details?: { taskId?: unknown } })?.details?.taskId ?? "");
    return { ok: true, timeline: timeline(startedAt, origin.records, parseLog(workerLog)), worker, taskId, file };
  } catch (error) {
    const failure = toTaskError(error);
    return {
      ok: false,
      code: failure.code,
      message: failure.message,
      timeline: timeline(startedAt, origin?.records ?? [], workerLog === undefined ? [] : parseLog(workerLog)),
      worker,
    };
  } finally {
    await origin?.stop(workerShutdownGraceMs).catch(() => undefined);
    if (workerStarted) await stopProcess(env, workerName).catch(() => undefined);
    await relay?.stop().catch(() => undefined);
    progress("stopped the origin, the worker and the relay");
    rmSync(scratch, { recursive: true, force: true });
  }
}

export function formatTimeline(result: DemoResult): string {
  const lines = result.timeline.map(
    (entry) =>
      `${(entry.ms === undefined ? "—" : `${entry.ms} ms`).padStart(10)}  ${entry.step.padEnd(18)}${entry.note === undefined ? "" : ` ${entry.note}`}`,
  );
  const verdict = result.ok
    ? `ok: the origin acknowledged the completed task (hello.txt: "${result.file}")`
    : `failed: ${result.code}: ${result.message}`;
  return [...lines, verdict].join("\n");
}
