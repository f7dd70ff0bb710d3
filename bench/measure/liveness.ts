/**
 * A lost worker, as the origin's person and model meet it: a real worker Pi 1.6 (RPC, under Bun,
 * the bench's scripted model) holds an active task and heartbeats; it is SIGKILLed — no goodbye, its
 * registration lives on until its lease ends. The origin (a TaskCore on the same relay, passes every
 * `activePollIntervalMs` as the extension's scheduler runs them) must have the task orphaned from
 * the missed heartbeats, report it once and wake its model once, however long it keeps running.
 *
 * Figures per run: kill → orphaned (ms, by the origin's clock at the pass that declared it), how many
 * `task.orphaned` events the origin recorded and presented for the one loss, and how many wakes named
 * them, over an observation of `OBSERVE_AFTER_MS` after the orphan (more than one probe interval and
 * one silence window: a repeat report would show).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startPiRpc } from "../../src/demo/pi-rpc.ts";
import { startRelayProcess } from "../../src/demo/relay-process.ts";
import { activePollIntervalMs, heartbeatSilenceMs, orphanProbeIntervalMs } from "../../src/protocol/limits.ts";
import { homeTrust } from "../../src/core/home-trust.ts";
import { closeParties, createParty } from "../../testkit/party.ts";
import { waitForEndpoint } from "../../testkit/session-control.ts";
import { proveEndpoint, requireSentAtOnce } from "../lib/proofs.ts";
import { benchName } from "../lib/wire.ts";

const RUNS = 3;
const REGISTRATION_TIMEOUT_MS = 30_000;
/** How long a run waits for the first heartbeat, and then for the orphan (a budget, not a goal). */
const STEP_TIMEOUT_MS = 60_000;
/** Watched after the orphan: a repeat report would come within a probe interval or a silence window. */
const OBSERVE_AFTER_MS = orphanProbeIntervalMs + heartbeatSilenceMs;
const SCENARIO = join(import.meta.dir, "..", "scenarios", "bench-worker.ts");

export interface LivenessRun {
  readonly killToOrphanMs: number;
  /** `task.orphaned` events the origin recorded for the one loss. */
  readonly orphanEvents: number;
  /** Of those, how many the origin's host had inserted, and how many wakes named them. */
  readonly presented: number;
  readonly wakes: number;
}

export interface LivenessResult {
  readonly runs: readonly LivenessRun[];
  /** Why no run was made (the quick run: the figure takes half a minute of real time). */
  readonly skipped?: string;
}

/** Runs origin passes at the scheduler's active cadence until `done` or the budget ends. */
async function passUntil(pass: () => Promise<unknown>, done: () => boolean, budgetMs: number): Promise<boolean> {
  const deadline = Date.now() + budgetMs;
  while (Date.now() < deadline) {
    await pass().catch(() => undefined);
    if (done()) return true;
    await Bun.sleep(activePollIntervalMs);
  }
  return done();
}

async function oneRun(relayUrl: string): Promise<LivenessRun> {
  const cwd = mkdtempSync(join(tmpdir(), "pi-tasks-bench-liveness-"));
  const home = join(cwd, "pi-tasks-home");
  const workerName = benchName("live-worker");
  const worker = startPiRpc({
    session: workerName,
    relayUrl,
    worker: true,
    cwd,
    script: SCENARIO,
    env: { WOLFPACK_JWT_SECRET: "", PI_TASKS_HOME: home },
  });
  const party = await createParty({ url: relayUrl, name: benchName("live-origin"), connect: false, trust: homeTrust(home) });
  const origin = party.core;
  try {
    const to = await waitForEndpoint(relayUrl, workerName, { timeoutMs: REGISTRATION_TIMEOUT_MS, pollMs: 20 });
    await origin.connect();
    await proveEndpoint(() => origin, to, { pass: () => origin.refresh(), timeoutMs: REGISTRATION_TIMEOUT_MS, pollMs: 20 });
    const created = await origin.createTask({ to, task: "hold this task and wait" });
    requireSentAtOnce(created, "liveness");
    const taskId = created.taskId;
    if (
      !(await passUntil(
        () => origin.refresh(),
        () => origin.getTask(taskId).activity !== undefined,
        STEP_TIMEOUT_MS,
      ))
    )
      throw new Error("liveness: the worker never reported its activity");
    worker.process.kill("SIGKILL");
    const killedAt = Date.now();
    if (
      !(await passUntil(
        () => origin.refresh(),
        () => origin.getTask(taskId).attention === "orphaned",
        STEP_TIMEOUT_MS,
      ))
    )
      throw new Error("liveness: the killed worker's task was never orphaned");
    const orphaned = origin.getTask(taskId).events.find((event) => event.type === "task.orphaned")!;
    await passUntil(
      () => origin.refresh(),
      () => false,
      OBSERVE_AFTER_MS,
    );
    const events = origin
      .getTask(taskId)
      .events.filter((event) => event.type === "task.orphaned")
      .map((event) => event.eventId);
    return {
      killToOrphanMs: orphaned.occurredAt - killedAt,
      orphanEvents: events.length,
      presented: party.host.inserted.filter((item) => events.includes(item.eventId)).length,
      wakes: party.host.wakes.filter((wake) => wake.some((item) => events.includes(item.eventId))).length,
    };
  } finally {
    await closeParties([party]);
    await worker.stop(1_000).catch(() => undefined);
    rmSync(cwd, { recursive: true, force: true });
  }
}

export async function measureLiveness(options: { quick?: boolean } = {}): Promise<LivenessResult> {
  if (options.quick === true)
    return { runs: [], skipped: "quick run: a loss takes a silence window to judge (tests/e2e/activity.test.ts checks the behaviour)" };
  const relay = await startRelayProcess();
  try {
    // The runs go side by side (each its own worker Pi and origin): a loss is judged per task.
    return { runs: await Promise.all(Array.from({ length: RUNS }, () => oneRun(relay.url))) };
  } finally {
    await relay.stop().catch(() => undefined);
  }
}
