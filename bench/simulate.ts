#!/usr/bin/env bun
/**
 * `npm run simulate` — the deterministic simulator (testkit/sim/) from the command line: a long
 * sweep of seeds (`--seeds N`, from `--from S`, default a fresh start) or one seed (`--seed S`,
 * its whole trace printed), with `--steps`, `--sessions` and `--faults name=rate,…` (delay,
 * loseRequest, loseReply, duplicate, partitions, relayRestarts, crashes, restarts, strangers, and
 * the hostile relay's withhold, replay, rewrite, forge, junk). Prints seeds
 * per second, the coverage summary and every failure with its seed, invariant, shortened trace and
 * replay command; exits 1 when an invariant broke, 2 on wrong input.
 */
import { parseArgs } from "node:util";
import { DEFAULT_SIM_OPTIONS, runSeed, type SimOptions } from "../testkit/sim/run.ts";
import { describeFailure, faultRates, shrink, withFaultRates } from "../testkit/sim/shrink.ts";
import { coverageLines, sweep } from "../testkit/sim/sweep.ts";

const USAGE = `usage: npm run simulate -- [--seeds N] [--from S] [--seed S] [--steps N] [--sessions N] [--faults name=rate,...]
  --seeds N      run N seeds in a row (default 100), from --from (default: a fresh start, printed)
  --seed S       run one seed and print its whole trace
  --steps N      steps per seed (default ${DEFAULT_SIM_OPTIONS.steps})
  --sessions N   sessions in the world (default ${DEFAULT_SIM_OPTIONS.sessions})
  --faults ...   rates per request, per step or (the hostile relay's) per receive, e.g. loseRequest=0.1,crashes=0,forge=0.2 (defaults: ${Object.entries(
    faultRates(DEFAULT_SIM_OPTIONS),
  )
    .map(([name, rate]) => `${name}=${rate}`)
    .join(",")})`;

/** Largest seed count, steps and sessions the command takes (a typo should not run for a day). */
const MAX_SEEDS = 1_000_000;
const MAX_STEPS = 10_000;
const MAX_SESSIONS = 12;

function fail(message: string): never {
  process.stderr.write(`simulate: ${message}\n${USAGE}\n`);
  process.exit(2);
}

function wholeNumber(name: string, text: string | undefined, fallback: number, min: number, max: number): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < min || value > max)
    fail(`--${name} must be a whole number from ${min} to ${max}, got "${text}"`);
  return value;
}

function withFaults(options: SimOptions, text: string | undefined): SimOptions {
  if (text === undefined) return options;
  const known = Object.keys(faultRates(options));
  const changes: Record<string, number> = {};
  for (const pair of text.split(",")) {
    const [name = "", rate = ""] = pair.split("=");
    const value = Number(rate);
    if (!known.includes(name)) fail(`unknown fault "${name}" (known: ${known.join(", ")})`);
    if (rate === "" || !(value >= 0 && value <= 1)) fail(`fault ${name} needs a rate from 0 to 1, got "${rate}"`);
    changes[name] = value;
  }
  return withFaultRates(options, changes);
}

function parse() {
  let parsed: ReturnType<typeof parseArgs<{ options: Record<string, { type: "string" | "boolean" }> }>>;
  try {
    parsed = parseArgs({
      options: {
        seeds: { type: "string" },
        from: { type: "string" },
        seed: { type: "string" },
        steps: { type: "string" },
        sessions: { type: "string" },
        faults: { type: "string" },
        help: { type: "boolean" },
      },
      allowPositionals: false,
    });
  } catch (error) {
    fail(error instanceof Error ? error.message : String(error));
  }
  const values = parsed.values as Record<string, string | boolean | undefined>;
  if (values.help === true) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const text = (name: string) => values[name] as string | undefined;
  const options = withFaults(
    {
      ...DEFAULT_SIM_OPTIONS,
      steps: wholeNumber("steps", text("steps"), DEFAULT_SIM_OPTIONS.steps, 1, MAX_STEPS),
      sessions: wholeNumber("sessions", text("sessions"), DEFAULT_SIM_OPTIONS.sessions, 2, MAX_SESSIONS),
    },
    text("faults"),
  );
  const seed = text("seed") === undefined ? undefined : wholeNumber("seed", text("seed"), 0, 0, Number.MAX_SAFE_INTEGER);
  const seeds = wholeNumber("seeds", text("seeds"), 100, 1, MAX_SEEDS);
  const from = wholeNumber("from", text("from"), Date.now() % 1_000_000_000, 0, Number.MAX_SAFE_INTEGER - MAX_SEEDS);
  return { options, seed, seeds, from };
}

async function one(seed: number, options: SimOptions): Promise<number> {
  const result = await runSeed(seed, options);
  process.stdout.write(`${result.trace.join("\n")}\n\n${coverageLines(result.coverage).join("\n")}\n`);
  if (result.violation === undefined) {
    process.stdout.write(`seed ${seed}: every invariant held (${(result.virtualMs / 1000).toFixed(0)} s of virtual time)\n`);
    return 0;
  }
  process.stdout.write(`${describeFailure(result, await shrink(result))}\n`);
  return 1;
}

async function many(from: number, count: number, options: SimOptions): Promise<number> {
  process.stdout.write(`simulating seeds ${from}..${from + count - 1}, ${options.steps} steps each, ${options.sessions} sessions\n`);
  const report = await sweep({ seeds: Array.from({ length: count }, (_, index) => from + index), options, stopAtFailure: false });
  process.stdout.write(
    `${report.seeds} seeds in ${report.seconds.toFixed(1)} s: ${report.seedsPerSecond.toFixed(2)} seeds/s, ${report.virtualSeconds.toFixed(0)} s of virtual time\n`,
  );
  process.stdout.write(
    `coverage:\n${coverageLines(report.coverage)
      .map((line) => `  ${line}`)
      .join("\n")}\n`,
  );
  for (const failure of report.failures) process.stdout.write(`\n${failure.report}\n`);
  process.stdout.write(report.failures.length === 0 ? "every invariant held\n" : `${report.failures.length} seed(s) broke an invariant\n`);
  return report.failures.length === 0 ? 0 : 1;
}

const { options, seed, seeds, from } = parse();
process.exit(seed === undefined ? await many(from, seeds, options) : await one(seed, options));
