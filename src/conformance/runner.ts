/**
 * Runs the conformance checks (./checks.ts) in-process against one relay — on Node or on Bun, with
 * no test framework and no child process — and counts their results.
 *
 * The checks run in list order. Consecutive non-serial checks run concurrently, at most
 * `CONFORMANCE_MAX_CONCURRENT_CHECKS` at a time; a serial check waits until they have all ended and
 * runs alone. Each check has `CONFORMANCE_TEST_TIMEOUT_MS` (or its own `timeoutMs`); one that takes
 * longer fails (its requests are not cancelled). Checks of additions the run does not require are
 * skipped.
 */
import PQueue from "p-queue";
import { conformanceChecks } from "./checks.ts";
import { type ConformanceCheck, type ConformanceKit, checkTitle, createKit, isRequired } from "./kit.ts";
import { CONFORMANCE_MAX_CONCURRENT_CHECKS, CONFORMANCE_TEST_TIMEOUT_MS } from "./timing.ts";

/** `"watch-v1, successor-v1"` → the feature names; empty entries are dropped. */
export function parseFeatures(list: string): string[] {
  return list
    .split(",")
    .map((feature) => feature.trim())
    .filter((feature) => feature.length > 0);
}

export interface ConformanceRequest {
  /** The relay's base URL (its profile is at `RELAY_PROFILE_PATH` below it). */
  readonly url: string;
  /**
   * The additions the relay must have and advertise (`watch-v1`, `successor-v1`,
   * `binding-secret-v1`, `ack-batch-v1`): their checks run, the others are skipped. With any
   * addition required the relay is held to our relay's rules too; with none, only to Wolfpack's wire.
   */
  readonly features: readonly string[];
  /**
   * Receives a report of each check as it ends, one or more lines each ending in a newline:
   * `(pass) group > name [12 ms]`, `(fail) group > name [12 ms]` followed by the failure's message
   * indented, or `(skip) group > name`.
   */
  readonly onOutput?: (text: string) => void;
}

export interface CheckFailure {
  /** `group > name`. */
  readonly name: string;
  /** What was expected and what the relay answered (or why the check could not finish). */
  readonly message: string;
}

export interface ConformanceResult {
  readonly passed: number;
  readonly failed: number;
  readonly skipped: number;
  /** The failed checks, in the order they ended. */
  readonly failures: CheckFailure[];
  readonly elapsedMs: number;
}

interface Outcome {
  readonly ms: number;
  /** Set when the check failed. */
  readonly message?: string;
}

function failureMessage(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  return error.name === "AssertionError" ? error.message : `${error.name}: ${error.message}`;
}

/** Runs one check under its deadline; never throws. */
async function runCheck(check: ConformanceCheck, kit: ConformanceKit): Promise<Outcome> {
  const timeoutMs = check.timeoutMs ?? CONFORMANCE_TEST_TIMEOUT_MS;
  const startedAt = performance.now();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the check did not finish within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    await Promise.race([check.run(kit), deadline]);
    return { ms: Math.round(performance.now() - startedAt) };
  } catch (error) {
    return { ms: Math.round(performance.now() - startedAt), message: failureMessage(error) };
  } finally {
    clearTimeout(timer);
  }
}

/** Counts the outcomes and reports each through `onOutput`. */
class Tally {
  passed = 0;
  skipped = 0;
  readonly failures: CheckFailure[] = [];
  private readonly onOutput: ((text: string) => void) | undefined;

  constructor(onOutput: ((text: string) => void) | undefined) {
    this.onOutput = onOutput;
  }

  skip(check: ConformanceCheck): void {
    this.skipped += 1;
    this.onOutput?.(`(skip) ${checkTitle(check)}\n`);
  }

  record(check: ConformanceCheck, outcome: Outcome): void {
    const line = `${checkTitle(check)} [${outcome.ms} ms]`;
    if (outcome.message === undefined) {
      this.passed += 1;
      this.onOutput?.(`(pass) ${line}\n`);
      return;
    }
    this.failures.push({ name: checkTitle(check), message: outcome.message });
    const indented = outcome.message.replace(/^/gm, "  ");
    this.onOutput?.(`(fail) ${line}\n${indented}\n`);
  }
}

/** Runs every check against the relay at `request.url`; rejects only when its profile cannot be read. */
export async function runConformance(request: ConformanceRequest): Promise<ConformanceResult> {
  const startedAt = performance.now();
  const kit = await createKit(request.url, request.features);
  const tally = new Tally(request.onOutput);
  const queue = new PQueue({ concurrency: CONFORMANCE_MAX_CONCURRENT_CHECKS });
  const run = async (check: ConformanceCheck) => tally.record(check, await runCheck(check, kit));
  /** The non-serial checks started since the last serial one. */
  let batch: Promise<void>[] = [];
  for (const check of conformanceChecks(request.features)) {
    if (!isRequired(check, request.features)) tally.skip(check);
    else if (check.serial === true) {
      await Promise.all(batch);
      batch = [];
      await run(check);
    } else batch.push(queue.add(() => run(check)));
  }
  await Promise.all(batch);
  const { passed, skipped, failures } = tally;
  return { passed, failed: failures.length, skipped, failures, elapsedMs: Math.round(performance.now() - startedAt) };
}
