/**
 * Grants: what a task's worker may do, carried in the signed task record (`TaskRecord.grant`).
 *
 * A grant only narrows. The person's defaults, a worker profile and a spawn narrow it at the
 * origin; a sub-delegation's grant is the intersection with its parent task's (`narrowGrant`), so
 * no hop down a chain can widen what the first origin allowed. The worker's extension enforces it
 * fail-closed (`toolVerdict`: a call outside it is refused with a reason the model reads) and ends
 * the task `failed` when a budget runs out (extensions/pi-tasks/budgets.ts).
 *
 * Path scopes are directories or files; a relative one is relative to the worker's project
 * directory. A path is inside a scope when it is the scope or below it, after normalization (no
 * `..` escapes a scope).
 */
import { resolve } from "node:path";
import { isWithin } from "./paths.ts";
import type { Grant, GrantRequest } from "./schemas.ts";

/** Tools that only read files, and the argument naming the path. */
const READ_TOOLS: Readonly<Record<string, readonly string[]>> = {
  read: ["path", "file_path"],
  grep: ["path"],
  find: ["path"],
  ls: ["path"],
};
/** Tools that change files, and the argument naming the path. */
const WRITE_TOOLS: Readonly<Record<string, readonly string[]>> = { write: ["path", "file_path"], edit: ["path", "file_path"] };
/** Tools that run commands: refused by `bash: false`, and (bash aside) allowed only when a grant names them. */
const COMMAND_TOOLS: ReadonlySet<string> = new Set(["bash", "powershell"]);
/** pi-tasks' own tools: the protocol itself, governed by the worker gate, not by grants. */
const PROTOCOL_TOOL_PREFIX = "agent_task_";

function narrowList(child: readonly string[] | undefined, parent: readonly string[] | undefined): string[] | undefined {
  if (parent === undefined) return child === undefined ? undefined : [...child];
  if (child === undefined) return [...parent];
  return child.filter((item) => parent.includes(item));
}

function narrowScopes(child: readonly string[] | undefined, parent: readonly string[] | undefined): string[] | undefined {
  if (parent === undefined) return child === undefined ? undefined : [...child];
  if (child === undefined) return [...parent];
  return child.filter((scope) => parent.some((outer) => isWithin(scope, outer)));
}

/** An allowance granted only when asked for: true only where each side that has a grant says true. */
function narrowAllowance(child: Grant | undefined, parent: Grant | undefined, name: "network"): boolean | undefined {
  if (child === undefined) return parent?.[name];
  if (parent === undefined) return child[name];
  return child[name] === true && parent[name] === true ? true : child[name] === undefined && parent[name] === undefined ? undefined : false;
}

function lower(child: number | undefined, parent: number | undefined): number | undefined {
  if (child === undefined) return parent;
  return parent === undefined ? child : Math.min(child, parent);
}

/** The grant a task may carry when `requested` is asked for under `parent` (either may be absent): never wider than either. */
export function narrowGrant(requested: Grant | undefined, parent: Grant | undefined): Grant | undefined {
  if (requested === undefined && parent === undefined) return undefined;
  const fields = {
    tools: narrowList(requested?.tools, parent?.tools),
    bash: requested?.bash === false || parent?.bash === false ? false : (requested?.bash ?? parent?.bash),
    network: narrowAllowance(requested, parent, "network"),
    read: narrowScopes(requested?.read, parent?.read),
    write: narrowScopes(requested?.write, parent?.write),
    maxTurns: lower(requested?.maxTurns, parent?.maxTurns),
    maxCostUsd: lower(requested?.maxCostUsd, parent?.maxCostUsd),
    maxWallMs: lower(requested?.maxWallMs, parent?.maxWallMs),
  };
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined)) as Grant;
}

function pathArgument(input: unknown, names: readonly string[]): string | undefined {
  if (typeof input !== "object" || input === null) return undefined;
  for (const name of names) {
    const value = (input as Record<string, unknown>)[name];
    if (typeof value === "string") return value;
  }
  return undefined;
}

/** Where a path argument (or a scope) lands: an absolute path. The default reads the text alone; the extension resolves as Pi's tools do. */
export type PathResolver = (raw: string, cwd: string) => string;
const lexicalPath: PathResolver = (raw, cwd) => resolve(cwd, raw);

function pathVerdict(
  kind: "read" | "write",
  scopes: readonly string[] | undefined,
  input: unknown,
  names: readonly string[],
  cwd: string,
  where: PathResolver,
): string | undefined {
  if (scopes === undefined) return undefined;
  const path = where(pathArgument(input, names) ?? ".", cwd);
  if (scopes.some((scope) => isWithin(path, where(scope, cwd)))) return undefined;
  return `${path} is outside the paths this task may ${kind} (${scopes.join(", ")})`;
}

/**
 * Why a tool call is outside the grant, or undefined when it is inside. A tool list, when given,
 * names every tool allowed; `bash: false` refuses every command-running tool even when listed; a
 * tool that runs commands other than bash, or one this check does not know, must be named; file
 * tools must name a path inside the read (or write) scopes, when given — the path as `where`
 * resolves it (the extension: as Pi's tools do, through symbolic links).
 */
export function toolVerdict(
  grant: Grant,
  toolName: string,
  input: unknown,
  cwd: string,
  where: PathResolver = lexicalPath,
): string | undefined {
  if (toolName.startsWith(PROTOCOL_TOOL_PREFIX)) return undefined;
  if (COMMAND_TOOLS.has(toolName) && grant.bash === false)
    return toolName === "bash" ? "bash is not granted for this task" : `${toolName} runs commands, and bash is not granted for this task`;
  if (grant.tools !== undefined && !grant.tools.includes(toolName))
    return `${toolName} is not among the tools granted for this task (${grant.tools.join(", ") || "none"})`;
  const reads = READ_TOOLS[toolName];
  if (reads !== undefined) return pathVerdict("read", grant.read, input, reads, cwd, where);
  const writes = WRITE_TOOLS[toolName];
  if (writes !== undefined) return pathVerdict("write", grant.write, input, writes, cwd, where);
  if (toolName !== "bash" && grant.tools === undefined) return `${toolName} is not a tool this task may use unless its grant names it`;
  return undefined;
}

function union(have: readonly string[] | undefined, asked: readonly string[] | undefined): string[] | undefined {
  if (have === undefined) return undefined;
  return [...new Set([...have, ...(asked ?? [])])];
}

/** What `request` asks for beyond `grant` (no grant: everything is allowed already), as words; empty when nothing. */
export function grantAdditions(grant: Grant | undefined, request: GrantRequest): string[] {
  if (grant === undefined) return [];
  const added = (have: readonly string[] | undefined, asked: readonly string[] | undefined) =>
    have === undefined ? [] : (asked ?? []).filter((item) => !have.includes(item));
  return [
    ...added(grant.tools, request.tools).map((tool) => `tool ${tool}`),
    ...(request.bash === true && grant.bash === false ? ["bash"] : []),
    ...(request.network === true && grant.network !== true ? ["network"] : []),
    ...added(grant.read, request.read).map((path) => `read ${path}`),
    ...added(grant.write, request.write).map((path) => `write ${path}`),
  ];
}

/** `grant` widened by `request` (budgets untouched); the caller narrows it to what its own side holds. */
export function widenGrant(grant: Grant, request: GrantRequest): Grant {
  const fields = {
    ...grant,
    tools: union(grant.tools, request.tools),
    bash: request.bash === true ? true : grant.bash,
    network: request.network === true ? true : grant.network,
    read: union(grant.read, request.read),
    write: union(grant.write, request.write),
  };
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined)) as Grant;
}
