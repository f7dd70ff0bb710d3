/**
 * Specialists and workflows as the origin's model feels them (issue 39): a real Pi 1.6 CLI (RPC,
 * Bun, the scripted model of bench/scenarios/specialist-origin.ts) on a relay of its own; its model
 * delegates to the built-in `scout` specialist by name, with no spawn of its own. Each figure is
 * from the bench's arrival of the origin's `tool_execution_start` record to the arrival of the
 * record that brings the result into the origin's session:
 * - `cold`: the session's first `agent_task_send {to: "scout"}` — a scout is started for it —
 *   until the `## task completed` event message;
 * - `warm`: a later send, to the same scout kept warm (idle);
 * - `workflowWithStarts`: the first `agent_task_workflow` of four steps (one scout warm, three
 *   started) until its one `pi-tasks-workflow` message;
 * - `workflowWarm`: the same workflow again, its four scouts warm.
 * The scouts (bench/scenarios/specialist-worker.ts) report completed at once: the figure is
 * delegation, not the model's work. Each round is a fresh origin Pi and fresh scouts; medians over
 * the rounds.
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EVENT_MESSAGE } from "../../extensions/pi-tasks/presenter.ts";
import { WORKFLOW_MESSAGE } from "../../extensions/pi-tasks/workflows.ts";
import { type PiRpc, type RpcRecord, startPiRpc } from "../../src/demo/pi-rpc.ts";
import { startRelayProcess } from "../../src/demo/relay-process.ts";
import { listSpawned } from "../../src/host/spawned.ts";
import { stopPids } from "../../src/host/stop.ts";
import { workerShutdownGraceMs } from "../../src/protocol/limits.ts";
import { summarize } from "../lib/stats.ts";
import { benchName } from "../lib/wire.ts";

const ROUNDS = 3;
const QUICK_ROUNDS = 1;
/** Warm sends per round (after the cold one). */
const WARM_SENDS = 3;
/** The longest one delegation may take before the measurement fails (a spawn on a loaded machine included). */
const RESULT_TIMEOUT_MS = 60_000;
/** How long the origin's model may take to settle after a wake. */
const SETTLE_TIMEOUT_MS = 15_000;
/** Characters of a failed tool call's result in the error. */
const ERROR_CHARS = 400;
const ORIGIN_SCRIPT = join(import.meta.dir, "..", "scenarios", "specialist-origin.ts");
const WORKER_SCRIPT = join(import.meta.dir, "..", "scenarios", "specialist-worker.ts");

export interface SpecialistsResult {
  readonly rounds: number;
  readonly coldMs: number;
  readonly warmMs: number;
  readonly workflowWithStartsMs: number;
  readonly workflowWarmMs: number;
}

type Stamped = RpcRecord & { readonly receivedAt: number };

const messageOf = (record: RpcRecord) => record.message as { role?: string; customType?: string; content?: unknown } | undefined;

/** Prompts the origin and times its tool call `tool` to the first record `arrived` matches after it. */
async function timed(origin: PiRpc, prompt: string, tool: string, arrived: (record: RpcRecord) => boolean): Promise<number> {
  const from = origin.records.length;
  origin.prompt(prompt);
  const start = (await origin.waitFor(
    (record) => record.type === "tool_execution_start" && record.toolName === tool,
    RESULT_TIMEOUT_MS,
    from,
  )) as Stamped;
  const at = origin.records.indexOf(start as never);
  const answered = await origin.waitFor(
    (record) => record.type === "tool_execution_end" && record.toolName === tool,
    RESULT_TIMEOUT_MS,
    at,
  );
  if (answered.isError === true) throw new Error(`specialists: ${tool} failed: ${JSON.stringify(answered.result).slice(0, ERROR_CHARS)}`);
  const end = (await origin.waitFor(arrived, RESULT_TIMEOUT_MS, at)) as Stamped;
  await origin.waitFor((record) => record.type === "agent_settled", SETTLE_TIMEOUT_MS, origin.records.indexOf(end as never));
  return end.receivedAt - start.receivedAt;
}

const completed = (record: RpcRecord) =>
  record.type === "message_end" &&
  messageOf(record)?.customType === EVENT_MESSAGE &&
  String(messageOf(record)?.content).startsWith("## task completed");
const workflowEnded = (record: RpcRecord) => record.type === "message_end" && messageOf(record)?.customType === WORKFLOW_MESSAGE;

interface Round {
  readonly cold: number;
  readonly warm: number[];
  readonly workflowWithStarts: number;
  readonly workflowWarm: number;
}

async function round(relayUrl: string, index: number): Promise<Round> {
  const base = mkdtempSync(join(tmpdir(), "pi-tasks-bench-specialists-"));
  // The pi-tasks home apart from the project (a scout's scratch copy never holds the keys).
  const cwd = join(base, "project");
  const home = join(base, "pi-tasks-home");
  mkdirSync(cwd);
  const origin = startPiRpc({
    session: benchName(`specialists-${index}`),
    relayUrl,
    cwd,
    script: ORIGIN_SCRIPT,
    env: { WOLFPACK_JWT_SECRET: "", PI_TASKS_HOME: home, PI_TASKS_WORKER_SCRIPT: WORKER_SCRIPT, PI_TASKS_EMBEDDED_RELAY: "0" },
  });
  try {
    const cold = await timed(origin, "send 0", "agent_task_send", completed);
    const warm: number[] = [];
    for (let send = 1; send <= WARM_SENDS; send += 1) warm.push(await timed(origin, `send ${send}`, "agent_task_send", completed));
    const workflowWithStarts = await timed(origin, "workflow 1", "agent_task_workflow", workflowEnded);
    const workflowWarm = await timed(origin, "workflow 2", "agent_task_workflow", workflowEnded);
    return { cold, warm, workflowWithStarts, workflowWarm };
  } finally {
    await origin.stop(workerShutdownGraceMs).catch(() => undefined);
    // The scouts stop with the origin; any left over is stopped here.
    await stopPids(listSpawned({ PI_TASKS_HOME: home }).map((worker) => worker.pid)).catch(() => undefined);
    rmSync(base, { recursive: true, force: true });
  }
}

const median = (samples: readonly number[]) => summarize(samples).p50;

export async function measureSpecialists(options: { quick?: boolean } = {}): Promise<SpecialistsResult> {
  const rounds = options.quick === true ? QUICK_ROUNDS : ROUNDS;
  const relay = await startRelayProcess();
  try {
    const results: Round[] = [];
    for (let index = 0; index < rounds; index += 1) results.push(await round(relay.url, index));
    return {
      rounds,
      coldMs: median(results.map((result) => result.cold)),
      warmMs: median(results.flatMap((result) => result.warm)),
      workflowWithStartsMs: median(results.map((result) => result.workflowWithStarts)),
      workflowWarmMs: median(results.map((result) => result.workflowWarm)),
    };
  } finally {
    await relay.stop().catch(() => undefined);
  }
}
