/**
 * The bash tool of a worker Pi (`PI_TASK_WORKER=1`): Pi's own bash tool (`createBashToolDefinition`),
 * whose commands run in an OS sandbox (src/workspace/sandbox.ts) while the session works on a task
 * that carries a grant — writable only inside the write scopes every such grant allows, readable only
 * inside its read scopes (and the system's directories) when they are given, the pi-tasks home and
 * Pi's agent directory hidden, no network unless every grant allows it. Without a granted
 * task a command runs as Pi runs it. Where no sandbox can be made the command is not run: it fails
 * with `PI_TASK_SANDBOX_UNAVAILABLE` and the fix, unless the person chose the tools' own checks
 * alone (`PI_TASKS_SANDBOX=lexical`).
 */
import { type BashSpawnContext, createBashToolDefinition, type ExtensionAPI, getAgentDir } from "@earendil-works/pi-coding-agent";
import type { TaskCore, TaskView } from "../../src/core/task-core.ts";
import { dirname } from "node:path";
import { isWithin } from "../../src/protocol/paths.ts";
import type { Grant } from "../../src/protocol/schemas.ts";
import { type Env, piTasksHome } from "../../src/relay-client/config.ts";
import { type SandboxPlan, sandboxedCommand, sandboxUnavailable, shellWord } from "../../src/workspace/sandbox.ts";
import { realPathOf, toolPathOnDisk } from "../../src/workspace/tool-paths.ts";
import { isWorker } from "./gate.ts";
import { openWork } from "./work.ts";

export const SANDBOX_VARIABLE = "PI_TASKS_SANDBOX";

/** Exit status of a command refused because no sandbox could be made (the shell's "cannot execute"). */
const REFUSED_EXIT_STATUS = 126;

/**
 * The scopes of `kind` every grant allows, as real paths — the deeper of each pair that nests — or
 * undefined when no grant restricts that kind.
 */
function allowedScopes(grants: readonly Grant[], kind: "read" | "write", cwd: string): string[] | undefined {
  const restricting = grants.filter((grant) => grant[kind] !== undefined);
  if (restricting.length === 0) return undefined;
  const scopesOf = (grant: Grant) => grant[kind]!.map((scope) => toolPathOnDisk(scope, cwd));
  const [first, ...others] = restricting.map(scopesOf);
  const both = (left: readonly string[], right: readonly string[]) =>
    left.flatMap((a) => right.flatMap((b) => (isWithin(a, b) ? [a] : isWithin(b, a) ? [b] : [])));
  return [...new Set(others.reduce(both, first!))];
}

/** Where this process's runtime lives (node or bun): shown when reading is scoped, so scripts still run. */
const runtimeDir = () => dirname(realPathOf(process.execPath));

/** The sandbox for the grants this session works under now. */
export function planFor(grants: readonly Grant[], cwd: string, env: Env): SandboxPlan {
  const writable = allowedScopes(grants, "write", cwd) ?? ["/"];
  const read = allowedScopes(grants, "read", cwd);
  return {
    readable: [realPathOf(cwd)],
    writable,
    hidden: [realPathOf(piTasksHome(env)), realPathOf(getAgentDir())],
    network: grants.every((grant) => grant.network === true),
    ...(read === undefined ? {} : { visible: [...read, runtimeDir()] }),
  };
}

/** A command that does not run: it says why on stderr and exits `REFUSED_EXIT_STATUS`. */
function refused(context: BashSpawnContext, why: string): BashSpawnContext {
  return { ...context, command: `echo ${shellWord(`PI_TASK_SANDBOX_UNAVAILABLE: ${why}`)} >&2; exit ${REFUSED_EXIT_STATUS}` };
}

/** What a command becomes: sandboxed under a grant, refused without a sandbox, else as it was. Fails closed. */
export function spawnUnderGrants(context: BashSpawnContext, grants: readonly Grant[], env: Env): BashSpawnContext {
  if (grants.length === 0) return context;
  try {
    const missing = sandboxUnavailable();
    if (missing === undefined) return { ...context, command: sandboxedCommand(context.command, planFor(grants, context.cwd, env)) };
    if (env[SANDBOX_VARIABLE] === "lexical") return context;
    return refused(
      context,
      `this task's grant needs an OS sandbox for commands and none can be made here (${missing}). The person may set ${SANDBOX_VARIABLE}=lexical to run commands with the tools' own checks only.`,
    );
  } catch (error) {
    return refused(
      context,
      `the sandbox for this task's grant could not be set up (${error instanceof Error ? error.message : String(error)}).`,
    );
  }
}

/** Registers the worker's bash over Pi's built-in one (same name, same behaviour without a grant). */
export function registerSandboxedBash(pi: ExtensionAPI, deps: { readonly core: () => TaskCore; readonly env: Env }): void {
  const grants = () => {
    let core: TaskCore;
    try {
      core = deps.core();
    } catch {
      return []; // No Pi run (starting or stopped): this session works on nothing.
    }
    return openWork(core).flatMap((task) => (task.grant === undefined ? [] : [task.grant]));
  };
  pi.registerTool(createBashToolDefinition(process.cwd(), { spawnHook: (context) => spawnUnderGrants(context, grants(), deps.env) }));
}

/** What holds the commands of this Pi's model under a grant now. */
type Enforcement = "sandbox" | "lexical" | "refused" | "unsandboxed";

function enforcement(env: Env, tasks: readonly TaskView[]): { kind: Enforcement; missing?: string } | undefined {
  if (!tasks.some((task) => task.role === "worker" && task.status === "active" && task.grant !== undefined)) return undefined;
  if (!isWorker(env)) return { kind: "unsandboxed" };
  const missing = sandboxUnavailable();
  if (missing === undefined) return { kind: "sandbox" };
  return { kind: env[SANDBOX_VARIABLE] === "lexical" ? "lexical" : "refused", missing };
}

/** The footer's word for it (after the counts), or undefined when this Pi works on no granted task. */
const FOOTER_WORDS: Readonly<Record<Enforcement, string>> = {
  sandbox: "grant: sandboxed",
  lexical: "grant: tool checks only",
  refused: "grant: commands refused (no sandbox)",
  unsandboxed: "grant: commands not sandboxed",
};

export function sandboxWord(env: Env, tasks: readonly TaskView[]): string | undefined {
  const found = enforcement(env, tasks);
  return found === undefined ? undefined : FOOTER_WORDS[found.kind];
}

/** What holds the commands of this Pi's model under a grant, in words (for /tasks), or undefined when it works on no granted task. */
export function sandboxLine(env: Env, tasks: readonly TaskView[]): string | undefined {
  const found = enforcement(env, tasks);
  if (found === undefined) return undefined;
  switch (found.kind) {
    case "unsandboxed":
      return "commands under a grant: NOT sandboxed in this Pi (only a spawned worker's are); the grant's tool checks apply";
    case "sandbox":
      return "commands under a grant: in an OS sandbox (bubblewrap)";
    case "lexical":
      return `commands under a grant: the tool checks only (${SANDBOX_VARIABLE}=lexical; ${found.missing})`;
    case "refused":
      return `commands under a grant: refused — ${found.missing}. Fix: install bubblewrap, or set ${SANDBOX_VARIABLE}=lexical`;
  }
}
