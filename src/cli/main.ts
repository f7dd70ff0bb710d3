#!/usr/bin/env bun
/**
 * `pi-tasks` command line. Every command prints one JSON object with `--json` (errors as
 * `{ok:false, error:{code, message, retryable, details}}`) and exits non-zero on failure.
 */
import { parseArgs } from "node:util";
import { TaskError, toTaskError } from "../protocol/errors.ts";
import { DEFAULT_RELAY_PORT, relayDefaultHost, workerReadinessTimeoutDefaultMs } from "../protocol/limits.ts";
import { demoCommand } from "./demo.ts";
import { relayCommand } from "./relay.ts";
import { killSession, sessionList, sessionStatus } from "./sessions.ts";
import { spawnWorker } from "./spawn.ts";

const USAGE = `usage: pi-tasks <command> [options]

commands:
  relay [--host ${relayDefaultHost}] [--port ${DEFAULT_RELAY_PORT}] [--allow ADDR,…]
        run the memory-only volatile-v1 relay (--port 0 picks a free port)
  spawn --task-worker --name NAME --project-dir DIR [--model provider/id] [--relay URL]
        [--readiness-timeout-ms ${workerReadinessTimeoutDefaultMs}] [--script MODULE] [--json]
        start a Pi task worker and wait until its endpoint is registered
  status NAME [--relay URL] [--json]   a session's task endpoint
  list [--relay URL] [--json]          registered sessions (and workers this CLI spawned)
  kill NAME [--json]                   stop a worker this CLI spawned and confirm it is gone
  demo [--model provider/id] [--json]  origin + worker delegate a real task end to end
  help                                 show this text

environment: PI_TASKS_RELAY_URL, WOLFPACK_PORT, WOLFPACK_JWT_SECRET, PI_TASKS_STATE_DIR
`;

function usage(message: string): TaskError {
  return new TaskError("CLI_USAGE", { message });
}

function print(value: unknown, json: boolean): void {
  if (json) process.stdout.write(`${JSON.stringify(value)}\n`);
  else process.stdout.write(`${typeof value === "string" ? value : JSON.stringify(value, null, 2)}\n`);
}

function integer(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value)) throw usage(`${flag} must be a whole number`);
  return Number(value);
}

async function run(command: string, rest: readonly string[], env: Record<string, string | undefined>): Promise<{ value: unknown; json: boolean } | number> {
  switch (command) {
    case "help":
      process.stdout.write(USAGE);
      return 0;
    case "relay":
      return relayCommand(rest, { stdout: (line) => process.stdout.write(line), env });
    case "spawn": {
      const { values } = parseArgs({
        args: [...rest],
        options: {
          "task-worker": { type: "boolean" },
          name: { type: "string" },
          "project-dir": { type: "string" },
          model: { type: "string" },
          relay: { type: "string" },
          "readiness-timeout-ms": { type: "string" },
          script: { type: "string" },
          json: { type: "boolean" },
        },
        strict: true,
      });
      if (values["task-worker"] !== true) throw usage("spawn starts task workers only: pass --task-worker");
      if (values.name === undefined || values["project-dir"] === undefined) throw usage("spawn needs --name and --project-dir");
      const result = await spawnWorker({
        name: values.name,
        projectDir: values["project-dir"],
        env,
        ...(values.model === undefined ? {} : { model: values.model }),
        ...(values.script === undefined ? {} : { script: values.script }),
        ...(values.relay === undefined ? {} : { relay: values.relay }),
        ...(values["readiness-timeout-ms"] === undefined ? {} : { readinessTimeoutMs: integer(values["readiness-timeout-ms"], "--readiness-timeout-ms") }),
      });
      return { value: result, json: values.json === true };
    }
    case "status":
    case "list":
    case "kill": {
      const { values, positionals } = parseArgs({ args: [...rest], options: { relay: { type: "string" }, json: { type: "boolean" } }, allowPositionals: true, strict: true });
      const json = values.json === true;
      if (command === "list") {
        if (positionals.length > 0) throw usage("list takes no session name");
        return { value: await sessionList(env, values.relay), json };
      }
      const name = positionals[0];
      if (name === undefined || positionals.length > 1) throw usage(`${command} needs exactly one session NAME`);
      if (command === "status") return { value: await sessionStatus(name, env, values.relay), json };
      return { value: await killSession(name, env), json };
    }
    case "demo":
      return demoCommand(rest, env);
    default:
      throw usage(`unknown command ${command}`);
  }
}

export async function main(argv: readonly string[]): Promise<number> {
  const command = argv[0] ?? "help";
  const json = argv.includes("--json");
  try {
    const outcome = await run(command, argv.slice(1), process.env);
    if (typeof outcome === "number") return outcome;
    print(outcome.value, outcome.json);
    return 0;
  } catch (error) {
    const parseProblem = error instanceof TypeError && "code" in error && String((error as { code?: unknown }).code).startsWith("ERR_PARSE_ARGS");
    const failure = parseProblem ? usage((error as Error).message) : toTaskError(error);
    const body = { ok: false, error: failure.toJSON() };
    if (json) process.stdout.write(`${JSON.stringify(body)}\n`);
    // The relay's stdout carries only its readiness line; its failures are one JSON line on stderr.
    else if (command === "relay") process.stderr.write(`${JSON.stringify(body)}\n`);
    else process.stderr.write(`pi-tasks: ${failure.code}: ${failure.message}\n`);
    if (failure.code === "CLI_USAGE" && !json && command !== "relay") process.stderr.write(USAGE);
    return failure.code === "CLI_USAGE" ? 2 : 1;
  }
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2));
}
