#!/usr/bin/env bun
/**
 * `pi-tasks` command line. Every command prints JSON with `--json` and fails with a registry code.
 */
import { parseArgs } from "node:util";
import { TaskError, toTaskError } from "../protocol/errors.ts";
import { DEFAULT_RELAY_PORT, relayDefaultHost } from "../protocol/limits.ts";
import { relayCommand } from "./relay.ts";

const USAGE = `usage: pi-tasks <command> [options]

commands:
  relay [--host ${relayDefaultHost}] [--port ${DEFAULT_RELAY_PORT}] [--allow ADDR,…]
                  run the memory-only volatile-v1 relay (--port 0 picks a free port)
  help            show this text
`;

export async function main(argv: readonly string[]): Promise<number> {
  const { positionals } = parseArgs({ args: [...argv], allowPositionals: true, strict: false });
  const command = positionals[0] ?? "help";
  const rest = argv.slice(argv.indexOf(command) + 1);
  try {
    switch (command) {
      case "help":
        process.stdout.write(USAGE);
        return 0;
      case "relay":
        return await relayCommand(rest, { stdout: (line) => process.stdout.write(line), env: process.env });
      default:
        throw new TaskError("CLI_USAGE", { message: `unknown command ${command}`, details: { command } });
    }
  } catch (error) {
    const failure = toTaskError(error);
    const code = failure.code === "TASK_ERROR" && error instanceof TypeError ? "CLI_USAGE" : failure.code;
    const shown = code === failure.code ? failure : new TaskError(code, { message: failure.message });
    process.stderr.write(`${JSON.stringify({ ok: false, error: shown.toJSON() })}\n`);
    if (code === "CLI_USAGE") process.stderr.write(USAGE);
    return code === "CLI_USAGE" ? 2 : 1;
  }
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2));
}
