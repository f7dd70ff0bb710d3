/**
 * `/tasks help` (extensions/pi-tasks/commands.ts) lists every subcommand, then names the pi-tasks
 * command of the install Pi loaded — Pi's installer puts no bin on PATH (issue 40) — and that
 * command runs as written.
 */
import { expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { helpLines, TASKS_DESCRIPTION } from "../../extensions/pi-tasks/commands.ts";
import { REPO_ROOT } from "../../testkit/relay-process.ts";
import { runToExit } from "../helpers/run-to-exit.ts";
import { NODE_BINARY, nodeHostMissingReason } from "../helpers/host-kit.ts";

test("/tasks help lists the subcommands and ends with this install's pi-tasks command, which runs as written", async () => {
  const lines = helpLines();
  for (const name of ["answer", "grant", "cancel", "stop", "reassign", "relay", "help"]) expect(TASKS_DESCRIPTION).toContain(name);
  expect(lines.some((line) => line.startsWith("/tasks cancel <task or workflow id>"))).toBe(true);
  const last = lines.at(-1)!;
  const command = /^The pi-tasks command \(relay, spawn, list, conformance, …\) of this install: node (\S+)$/.exec(last)?.[1];
  expect(command).toMatch(/dist\/pi-tasks\.js$/);
  expect(existsSync(command!)).toBe(true);
  if (nodeHostMissingReason() !== undefined) return;
  const help = await runToExit([NODE_BINARY, command!, "--help"], { cwd: REPO_ROOT, env: process.env, timeoutMs: 30_000 });
  expect(help.code).toBe(0);
  expect(help.stdout).toContain("conformance");
});
