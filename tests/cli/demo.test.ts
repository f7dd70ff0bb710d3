/**
 * `pi-tasks demo`: relay + spawned scripted worker + scripted origin, end to end. Exit 0 only when
 * the origin acknowledged the completed task; every timeline step is measured; nothing it started
 * is left running afterwards (its relay, worker holder, worker Pi and origin Pi all inherit the
 * sandbox marker, so `processes()` sees any of them).
 */
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { DEMO_GREETING } from "../../src/demo/scenarios/demo-origin.ts";
import { type CliRun, type CliSandbox, createCliSandbox, jsonOf } from "../helpers/cli-kit.ts";

/** The timeline the demo promises, in the order it prints it. */
const STEPS = [
  "accepted",
  "receiver_recorded",
  "pi_inserted",
  "wake_accepted",
  "question",
  "answer",
  "done",
  "origin woken",
  "acknowledged",
];
/** Steps whose times must not decrease (receiver_recorded may be implied by a later receipt). */
const ORDERED = ["accepted", "pi_inserted", "wake_accepted", "question", "answer", "done", "origin woken", "acknowledged"];

let sandbox: CliSandbox | undefined;

afterEach(async () => {
  await sandbox?.cleanup();
  sandbox = undefined;
});

/** Nothing the demo started is alive, and its scratch directory (named in its progress lines) is gone. */
function expectNothingLeft(box: CliSandbox, run: CliRun): void {
  const left = box.processes();
  if (left.length > 0) throw new Error(`the demo left processes behind: ${JSON.stringify(left)}\nstderr: ${run.stderr}`);
  const scratch = /\(log (\/.+?)\/state\/logs\//.exec(run.stderr)?.[1];
  expect(scratch).toContain("pi-tasks-demo-");
  expect(existsSync(scratch!)).toBe(false);
}

function expectTextTimeline(run: CliRun): void {
  const lines = run.stdout.trimEnd().split("\n");
  expect(lines).toHaveLength(STEPS.length + 1);
  STEPS.forEach((step, index) => {
    expect(lines[index]).toMatch(new RegExp(`^ *\\d+ ms  ${step}( |$)`));
  });
  expect(lines.at(-1)).toBe(`ok: the origin acknowledged the completed task (hello.txt: "${DEMO_GREETING}")`);
}

describe("pi-tasks demo", () => {
  test("--json: one object, ok, every step timed and in order, the greeting written, nothing left", async () => {
    const box = createCliSandbox();
    sandbox = box;
    const run = await box.run(["demo", "--json"]);
    if (run.code !== 0) throw new Error(`demo exited ${run.code}\nstdout: ${run.stdout}\nstderr: ${run.stderr}`);
    const result = jsonOf(run);
    expect(result.ok).toBe(true);
    expect(result.file).toBe(DEMO_GREETING);
    expect(result.taskId).toMatch(/^[0-9a-f-]{36}$/);
    expect(result.worker.session).toStartWith("demo-worker-");
    expect(result.timeline.map((entry: { step: string }) => entry.step)).toEqual(STEPS);
    const at = new Map<string, number>(result.timeline.map((entry: { step: string; ms: number }) => [entry.step, entry.ms]));
    for (const step of STEPS) {
      const ms = at.get(step);
      expect({ step, finite: typeof ms === "number" && Number.isFinite(ms) && ms >= 0 }).toEqual({ step, finite: true });
    }
    for (let index = 1; index < ORDERED.length; index += 1) {
      const [before, after] = [ORDERED[index - 1]!, ORDERED[index]!];
      expect({ before, after, ordered: at.get(before)! <= at.get(after)! }).toEqual({ before, after, ordered: true });
    }
    // Progress goes to stderr, never into the JSON on stdout.
    expect(run.stderr).toContain("demo: stopped the origin, the worker and the relay");
    expectNothingLeft(box, run);
  }, 60_000);

  test("text mode prints the timeline and an ok: line", async () => {
    const box = createCliSandbox();
    sandbox = box;
    const run = await box.run(["demo"]);
    if (run.code !== 0) throw new Error(`demo exited ${run.code}\nstdout: ${run.stdout}\nstderr: ${run.stderr}`);
    expectTextTimeline(run);
    expectNothingLeft(box, run);
  }, 60_000);

  test("npm run demo works the same", async () => {
    const box = createCliSandbox();
    sandbox = box;
    const run = await box.run(["run", "demo", "--silent"], { command: ["npm"] });
    if (run.code !== 0) throw new Error(`npm run demo exited ${run.code}\nstdout: ${run.stdout}\nstderr: ${run.stderr}`);
    expectTextTimeline(run);
    expectNothingLeft(box, run);
  }, 60_000);
});
