/**
 * `pi-tasks` command line. One table row per command: its usage, its summary and how it runs.
 * `pi-tasks <command> --help` prints that command's usage and exits 0. Every command prints one
 * JSON object with `--json` (errors as `{ok:false, error:{code, message, retryable, details}}`)
 * and exits non-zero on failure; errors name the command.
 */
import { join } from "node:path";
import { parseArgs } from "node:util";
import { TaskError, toTaskError } from "../protocol/errors.ts";
import { defaultWorkerReadinessTimeoutMs } from "../protocol/limits.ts";
import { DEFAULT_RELAY_PORT, DEFAULT_RELAY_HOST } from "../protocol/names.ts";
import { auditCommand } from "./audit.ts";
import { conformanceCommand } from "./conformance.ts";
import { identityCommand } from "./identity.ts";
import { PEERS_SUBCOMMANDS, peersCommand } from "./peers.ts";
import { fields } from "../host/format.ts";
import { relayCommand } from "./relay.ts";
import { REDIS_PASSWORD_FILE_VARIABLE, REDIS_PASSWORD_VARIABLE } from "../relay-server/store/redis/url.ts";
import { killCommand, listCommand, statusCommand } from "./sessions.ts";
import { PACKAGE_ROOT } from "../host/runtime.ts";
import { spawnWorker } from "../host/spawn.ts";

type Env = Record<string, string | undefined>;
/** A value printed as JSON with `--json`, else as `text` when there is one; or an exit code. */
type Outcome = { value: unknown; json: boolean; text?: string } | number;

interface Command {
  readonly usage: string;
  readonly summary: string;
  /** The environment line of its `--help` (default: ENVIRONMENT). */
  readonly environment?: string;
  /** Subcommands with their own `--help` (`pi-tasks <command> <subcommand> --help`). */
  readonly subcommands?: Readonly<Record<string, { readonly usage: string; readonly summary: string }>>;
  run(args: readonly string[], env: Env): Promise<Outcome>;
}

const ENVIRONMENT = "environment: PI_TASKS_RELAY_URL, WOLFPACK_PORT, WOLFPACK_JWT_SECRET, PI_TASKS_HOME, PI_TASKS_EMBEDDED_RELAY";
const HOME_ENVIRONMENT =
  "environment: PI_TASKS_HOME, the directory of identity.json and peers.json (default $PI_CODING_AGENT_DIR/pi-tasks, else ~/.pi/agent/pi-tasks)";

function usage(message: string): TaskError {
  return new TaskError("CLI_USAGE", { message });
}

function integer(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value)) throw usage(`${flag} must be a whole number`);
  return Number(value);
}

const COMMANDS: Readonly<Record<string, Command>> = {
  relay: {
    usage: `pi-tasks relay [--host ${DEFAULT_RELAY_HOST}] [--port ${DEFAULT_RELAY_PORT}] [--allow ADDR,…] [--secret-file PATH] [--store redis://HOST:PORT[/DB] [--allow-persistent-store]]\n       pi-tasks relay stop [--port ${DEFAULT_RELAY_PORT}] [--json]`,
    summary:
      "run the memory-only volatile-v1 relay (--port 0 picks a free port; --secret-file admits only clients that hold that relay secret, docs/security.md; --store redis://… shares its state with relays on other machines, docs/multi-machine.md), or stop the relay pi-tasks started on a port",
    environment: `${ENVIRONMENT}, ${REDIS_PASSWORD_FILE_VARIABLE} (a 0600 file holding the Redis password) or ${REDIS_PASSWORD_VARIABLE} (the password itself; a URL never carries one)`,
    run: (args, env) =>
      relayCommand(args, { stdout: (line) => process.stdout.write(line), stderr: (line) => process.stderr.write(line), env }),
  },
  spawn: {
    usage: `pi-tasks spawn --task-worker --name NAME --project-dir DIR [--model provider/id] [--relay URL]\n       [--readiness-timeout-ms ${defaultWorkerReadinessTimeoutMs}] [--script MODULE] [--json]`,
    summary: "start a Pi task worker and wait until its endpoint is registered",
    async run(args, env) {
      const { values, positionals } = parseArgs({
        args: [...args],
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
        allowPositionals: true,
        strict: true,
      });
      if (positionals.length > 0) throw usage(`unexpected argument ${positionals[0]}`);
      if (values["task-worker"] !== true) throw usage("spawn starts task workers only: pass --task-worker");
      if (values.name === undefined || values["project-dir"] === undefined) throw usage("spawn needs --name and --project-dir");
      const result = await spawnWorker({
        name: values.name,
        projectDir: values["project-dir"],
        env,
        ...(values.model === undefined ? {} : { model: values.model }),
        ...(values.script === undefined ? {} : { script: values.script }),
        ...(values.relay === undefined ? {} : { relay: values.relay }),
        ...(values["readiness-timeout-ms"] === undefined
          ? {}
          : { readinessTimeoutMs: integer(values["readiness-timeout-ms"], "--readiness-timeout-ms") }),
      });
      const text = fields([
        ["worker", result.session],
        ["endpoint", result.taskEndpoint.id],
        ["relay", result.relay],
        ["project", result.projectDir],
        ["pid", String(result.pid)],
        ["log", result.log],
      ]);
      return { value: result, json: values.json === true, text: `${text}\nStop it with: pi-tasks kill ${result.session}` };
    },
  },
  status: {
    usage: "pi-tasks status NAME [--relay URL] [--json]",
    summary: "a session's task endpoint",
    async run(args, env) {
      const { values, name } = namedSession(args, "status");
      return { ...(await statusCommand(name, env, values.relay)), json: values.json === true };
    },
  },
  list: {
    usage: "pi-tasks list [--relay URL] [--json]",
    summary: "registered sessions (and the workers pi-tasks spawned)",
    async run(args, env) {
      const { values, positionals } = parseArgs({
        args: [...args],
        options: { relay: { type: "string" }, json: { type: "boolean" } },
        allowPositionals: true,
        strict: true,
      });
      if (positionals.length > 0) throw usage("list takes no session name");
      return { ...(await listCommand(env, values.relay)), json: values.json === true };
    },
  },
  kill: {
    usage: "pi-tasks kill NAME [--json]",
    summary: "stop a worker pi-tasks spawned and confirm it is gone",
    async run(args, env) {
      const { values, name } = namedSession(args, "kill", false);
      return { ...(await killCommand(name, env)), json: values.json === true };
    },
  },
  demo: {
    usage: "pi-tasks demo [--model provider/id] [--json]",
    summary: "an origin Pi and a worker Pi delegate a real task end to end",
    run: (args, env) => runDemoCommand(args, env),
  },
  conformance: {
    usage: "pi-tasks conformance URL [--features watch-v1,successor-v1] [--json]",
    summary: "check a relay against the volatile-v1 wire (docs/wire.md); exits 0 only when every check passes",
    run: (args, env) => conformanceCommand(args, env),
  },
  audit: {
    usage: "pi-tasks audit TASK_ID [--sessions DIR] [--json]",
    summary:
      "one timeline of a task from this machine's Pi session files: both sides' views joined (from /tasks audit in the origin's Pi), gaps named",
    environment: "environment: PI_CODING_AGENT_SESSION_DIR, else PI_CODING_AGENT_DIR/sessions, else ~/.pi/agent/sessions",
    run: (args, env) => auditCommand(args, env, (text) => process.stdout.write(text)),
  },
  identity: {
    usage: "pi-tasks identity [--json]",
    summary: "this installation's identity (created on first use): public key, fingerprint, and how a peer pairs with it",
    environment: HOME_ENVIRONMENT,
    run: (args, env) => identityCommand(args, env),
  },
  peers: {
    usage: Object.values(PEERS_SUBCOMMANDS)
      .map((sub) => sub.usage)
      .join("\n       "),
    summary: "the peers this identity trusts: pair (add), unpair (remove), list",
    environment: HOME_ENVIRONMENT,
    subcommands: PEERS_SUBCOMMANDS,
    run: (args, env) => peersCommand(args, env),
  },
  help: {
    usage: "pi-tasks help [COMMAND]",
    summary: "show this text, or one command's usage",
    async run(args) {
      const topic = args[0];
      if (topic !== undefined && !Object.hasOwn(COMMANDS, topic)) throw usage(`unknown command ${topic}`);
      process.stdout.write(topic === undefined ? overview() : commandHelp(topic, args.slice(1)));
      return 0;
    },
  },
};

/**
 * The demo starts Pis and a relay with Bun's process API: it runs from a checkout under Bun
 * (`npm run demo`), and is loaded only then (the built command line does not carry it).
 */
async function runDemoCommand(args: readonly string[], env: Env): Promise<number> {
  if (process.versions.bun === undefined) {
    throw new TaskError("CLI_USAGE", { message: "the demo runs from a checkout of pi-tasks under Bun: npm install && npm run demo" });
  }
  const module = (await import(join(PACKAGE_ROOT, "src", "cli", "demo.ts"))) as typeof import("./demo.ts");
  return module.demoCommand(args, env);
}

function namedSession(args: readonly string[], command: string, withRelay = true) {
  const options: Record<string, { type: "string" | "boolean" }> = {
    json: { type: "boolean" },
    ...(withRelay ? { relay: { type: "string" } } : {}),
  };
  const { values, positionals } = parseArgs({ args: [...args], options, allowPositionals: true, strict: true });
  const name = positionals[0];
  if (name === undefined || positionals.length > 1) throw usage(`${command} needs exactly one session NAME`);
  return { values: values as { relay?: string; json?: boolean }, name };
}

function overview(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((name) => name.length));
  const rows = Object.entries(COMMANDS).map(([name, command]) => `  ${name.padEnd(width)} ${command.summary}`);
  return [
    `usage: pi-tasks <command> [options]   (pi-tasks <command> --help for one command)`,
    "",
    "commands:",
    ...rows,
    "",
    ENVIRONMENT,
    "",
  ].join("\n");
}

/** A command's usage, or its subcommand's when `args` starts with one. */
function commandHelp(name: string, args: readonly string[] = []): string {
  const command = COMMANDS[name]!;
  const first = args[0];
  const sub =
    first !== undefined && command.subcommands !== undefined && Object.hasOwn(command.subcommands, first)
      ? command.subcommands[first]!
      : command;
  return [`usage: ${sub.usage}`, "", sub.summary, "", command.environment ?? ENVIRONMENT, ""].join("\n");
}

function isParseError(error: unknown): error is Error {
  return error instanceof TypeError && "code" in error && String((error as { code?: unknown }).code).startsWith("ERR_PARSE_ARGS");
}

export async function main(argv: readonly string[]): Promise<number> {
  const name = argv[0] ?? "help";
  const args = argv.slice(1);
  const json = argv.includes("--json");
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  try {
    if (name === "--help" || name === "-h") return await COMMANDS.help!.run([], process.env).then(() => 0);
    if (command === undefined) throw usage(`unknown command ${name}`);
    if (args.includes("--help") || args.includes("-h")) {
      process.stdout.write(commandHelp(name, args));
      return 0;
    }
    const outcome = await command.run(args, process.env);
    if (typeof outcome === "number") return outcome;
    process.stdout.write(`${outcome.json ? JSON.stringify(outcome.value) : (outcome.text ?? JSON.stringify(outcome.value, null, 2))}\n`);
    return 0;
  } catch (error) {
    const failure = isParseError(error) ? usage(error.message) : toTaskError(error);
    const body = { ok: false, command: name, error: failure.toJSON() };
    if (json) process.stdout.write(`${JSON.stringify(body)}\n`);
    // The relay's stdout carries only its readiness line; its failures are one JSON line on stderr.
    else if (name === "relay") process.stderr.write(`${JSON.stringify(body)}\n`);
    else process.stderr.write(`pi-tasks${command === undefined ? "" : ` ${name}`}: ${failure.code}: ${failure.message}\n`);
    if (failure.code === "CLI_USAGE" && !json && name !== "relay")
      process.stderr.write(command === undefined ? overview() : commandHelp(name, args));
    return failure.code === "CLI_USAGE" ? 2 : 1;
  }
}
