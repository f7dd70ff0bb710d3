/**
 * Runs the conformance suite (./suite.ts through ./entry.ts) in a `bun test` child process
 * against one relay, and counts its results from bun's summary.
 *
 * The child runs in this directory, so it finds the suite wherever the package lives and no
 * `bunfig.toml` of the caller's working directory (this repository's sets `[test] root`) applies.
 */
import { spawn } from "bun";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { CONFORMANCE_TEST_TIMEOUT_MS } from "./timing.ts";

export const CONFORMANCE_URL_VARIABLE = "PI_TASKS_CONFORMANCE_URL";
/** Comma-separated features the relay must have; empty for none. */
export const CONFORMANCE_FEATURES_VARIABLE = "PI_TASKS_CONFORMANCE_FEATURES";
const ENTRY = fileURLToPath(new URL("./entry.ts", import.meta.url));

export function parseFeatures(list: string): string[] {
  return list
    .split(",")
    .map((feature) => feature.trim())
    .filter((feature) => feature.length > 0);
}

export interface ConformanceRequest {
  readonly url: string;
  readonly features: readonly string[];
  /** The Bun executable. */
  readonly bun: string;
  readonly env: Record<string, string | undefined>;
  /** Receives bun's output as it comes (its per-test lines and failure details). */
  readonly onOutput?: (text: string) => void;
}

export interface ConformanceResult {
  readonly passed: number;
  readonly failed: number;
  readonly skipped: number;
  /** Names of the failed checks, as bun prints them. */
  readonly failures: string[];
  readonly elapsedMs: number;
  /** Exit code of `bun test`. */
  readonly exitCode: number;
  /** bun's complete output (stdout, then stderr). */
  readonly output: string;
}

/** One count of bun's summary (` 12 pass`); `undefined` when bun printed none. */
function count(output: string, label: "pass" | "fail" | "skip"): number | undefined {
  const match = new RegExp(`^\\s*(\\d+) ${label}$`, "m").exec(output);
  return match === null ? undefined : Number(match[1]);
}

async function collect(stream: ReadableStream<Uint8Array>, onOutput: ((text: string) => void) | undefined): Promise<string> {
  const decoder = new TextDecoder();
  let text = "";
  for await (const chunk of stream) {
    const part = decoder.decode(chunk, { stream: true });
    text += part;
    onOutput?.(part);
  }
  return text;
}

export async function runConformance(request: ConformanceRequest): Promise<ConformanceResult> {
  const startedAt = performance.now();
  const child = spawn([request.bun, "test", "--timeout", String(CONFORMANCE_TEST_TIMEOUT_MS), ENTRY], {
    cwd: dirname(ENTRY),
    env: { ...request.env, [CONFORMANCE_URL_VARIABLE]: request.url, [CONFORMANCE_FEATURES_VARIABLE]: request.features.join(",") },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, exitCode] = await Promise.all([collect(child.stdout, request.onOutput), collect(child.stderr, request.onOutput), child.exited]);
  const output = `${stdout}${stderr}`;
  return {
    passed: count(output, "pass") ?? 0,
    failed: count(output, "fail") ?? 0,
    skipped: count(output, "skip") ?? 0,
    failures: output
      .split("\n")
      .filter((line) => line.startsWith("(fail) "))
      .map((line) => line.slice("(fail) ".length).replace(/ \[[\d.]+m?s\]$/, "")),
    elapsedMs: Math.round(performance.now() - startedAt),
    exitCode,
    output,
  };
}
