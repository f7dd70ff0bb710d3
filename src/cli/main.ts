#!/usr/bin/env bun
/**
 * `pi-tasks` command line. Every command prints JSON with `--json` and fails with a registry code.
 */
import { parseArgs } from "node:util";
import { TaskError, toTaskError } from "../protocol/errors.ts";

const USAGE = `usage: pi-tasks <command> [options]

commands:
  help            show this text
`;

export async function main(argv: readonly string[]): Promise<number> {
  const { positionals } = parseArgs({ args: [...argv], allowPositionals: true, strict: false });
  const command = positionals[0] ?? "help";
  if (command === "help") {
    process.stdout.write(USAGE);
    return 0;
  }
  const error = new TaskError("CLI_USAGE", { message: `unknown command ${command}`, details: { command } });
  process.stderr.write(`${JSON.stringify({ ok: false, error: toTaskError(error).toJSON() })}\n${USAGE}`);
  return 2;
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2));
}
