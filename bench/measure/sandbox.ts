/**
 * What the OS sandbox of a granted worker's commands costs (src/workspace/sandbox.ts): the same
 * command run as Pi's bash runs it (`bash -c`) and inside the sandbox a grant makes, interleaved,
 * each timed from spawn to exit; the per-call cost and the ratio. There is no per-worker start: a
 * sandbox is made per command. Skipped where no sandbox can be made.
 */
import { spawnSync } from "node:child_process";
import { performance } from "node:perf_hooks";
import { type SandboxPlan, sandboxedCommand, sandboxUnavailable } from "../../src/workspace/sandbox.ts";
import { REPO_ROOT } from "../../testkit/relay-process.ts";
import { round, summarize } from "../lib/stats.ts";

/** Calls timed per variant (quick: the smoke test's). */
const SANDBOX_CALLS = 40;
const SANDBOX_QUICK_CALLS = 4;
/** The command: a typical tool call of a coding agent, short enough that the sandbox's own cost shows. */
const SANDBOX_COMMAND = "git status --porcelain >/dev/null && ls src >/dev/null";

export interface SandboxResult {
  readonly skipped?: string;
  readonly calls: number;
  readonly plainP50Ms: number;
  readonly sandboxedP50Ms: number;
}

function timed(command: string): number {
  const started = performance.now();
  const run = spawnSync("/bin/bash", ["-c", command], { cwd: REPO_ROOT, stdio: "ignore" });
  if (run.status !== 0) throw new Error(`bench sandbox: \`${command.slice(0, 80)}\` exited ${run.status}`);
  return performance.now() - started;
}

export async function measureSandbox(options: { readonly quick: boolean }): Promise<SandboxResult> {
  const missing = sandboxUnavailable();
  if (missing !== undefined) return { skipped: missing, calls: 0, plainP50Ms: 0, sandboxedP50Ms: 0 };
  const plan: SandboxPlan = { readable: [REPO_ROOT], writable: [`${REPO_ROOT}/src`], hidden: [], network: false };
  const sandboxed = sandboxedCommand(SANDBOX_COMMAND, plan);
  const calls = options.quick ? SANDBOX_QUICK_CALLS : SANDBOX_CALLS;
  const plain: number[] = [];
  const boxed: number[] = [];
  for (let call = 0; call < calls; call += 1) {
    plain.push(timed(SANDBOX_COMMAND));
    boxed.push(timed(sandboxed));
  }
  return { calls, plainP50Ms: round(summarize(plain).p50), sandboxedP50Ms: round(summarize(boxed).p50) };
}
