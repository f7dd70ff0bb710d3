/**
 * Worker profiles: named definitions of a worker — its model, its grant (src/protocol/grant.ts)
 * and extra instructions — that `agent_task_spawn {profile}` starts and `agent_task_workers` lists.
 *
 * A profile is a Markdown file with front matter (`name`, `description`, `model`, `grant`,
 * `worktree`), its body
 * the instructions appended to the worker's system prompt:
 *
 *     ---
 *     name: reviewer
 *     description: reads and reports, never edits
 *     model: anthropic/claude-sonnet-4-5
 *     grant: { tools: [read, grep, find, ls, bash], write: [] }
 *     ---
 *     Review the change you are given; report findings with agent_task_done.
 *
 * They are read from this Pi's pi-tasks home (`<PI_TASKS_HOME>/profiles/*.md`) and from the project
 * (`.pi/pi-tasks/profiles/*.md`) — the project's only when the person trusts the project in Pi, as
 * Pi does with a project's own resources; a project profile wins over a home one of the same name.
 * Built-ins: `implementer` and `reviewer` map the Wolfpack workflow's roles, with the models of
 * `WOLFPACK_IMPLEMENTER_MODEL` / `WOLFPACK_REVIEWER_MODEL` (their documented defaults otherwise);
 * `scout` and `researcher` read and never edit, on the origin's own model. A file of the same name
 * replaces a built-in. Each is also a specialist: `agent_task_send {to: "<name>"}` (specialists.ts). A profile that cannot be read is listed with its problem and
 * refused on spawn (`INVALID_PROFILE`); nothing else is affected.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { basename, join } from "node:path";
import { parseFrontmatter } from "@earendil-works/pi-coding-agent";
import { TaskError } from "../../src/protocol/errors.ts";
import { maxWorkerProfileBytes, maxWorkerProfiles } from "../../src/protocol/limits.ts";
import { Grant, WorkerName } from "../../src/protocol/schemas.ts";
import { assertValid } from "../../src/protocol/validate.ts";
import { type Env, piTasksHome } from "../../src/relay-client/config.ts";

export interface WorkerProfile {
  readonly name: string;
  readonly description?: string;
  readonly model?: string;
  readonly grant?: Grant;
  /** The worker gets its own git worktree by default. */
  readonly worktree?: boolean;
  readonly instructions: string;
  /** Where it comes from: a file, or `built-in`. */
  readonly source: string;
  /** Why it cannot be used, when it cannot. */
  readonly problem?: string;
}

/** The Wolfpack workflow's default models for its two roles (used when the environment names none). */
const DEFAULT_IMPLEMENTER_MODEL = "openai-codex/gpt-5.6-terra";
const DEFAULT_REVIEWER_MODEL = "openai-codex/gpt-5.6-sol";
const MODEL_PATTERN = /^[^/\s]+\/\S+$/;

function builtIns(env: Env): WorkerProfile[] {
  return [
    {
      name: "implementer",
      description: "makes the change it is given and tests it",
      model: env.WOLFPACK_IMPLEMENTER_MODEL?.trim() || DEFAULT_IMPLEMENTER_MODEL,
      instructions: "You implement the change your task describes, test it, and report with agent_task_done.",
      source: "built-in",
    },
    {
      name: "reviewer",
      description: "reads and reports; never edits files",
      model: env.WOLFPACK_REVIEWER_MODEL?.trim() || DEFAULT_REVIEWER_MODEL,
      grant: { write: [] },
      instructions: "You review what your task names and report your findings with agent_task_done. You do not edit files.",
      source: "built-in",
    },
    // The origin's own model (none named): a scout and a researcher read; they never edit.
    {
      name: "scout",
      description: "finds where things are in the project and reports paths and facts; never edits files",
      grant: { write: [] },
      instructions:
        "You explore the project to answer what your task asks: find the files, symbols and facts it needs, and report them (paths with line numbers, short quotes) with agent_task_done. Be quick and precise. You do not edit files.",
      source: "built-in",
    },
    {
      name: "researcher",
      description: "answers a question from the code, the docs and the network; never edits files",
      grant: { write: [], network: true },
      instructions:
        "You research the question your task asks — in the project's code and docs, and on the network when it helps — and report a sourced answer with agent_task_done: what you found, where, and how sure you are. You do not edit files.",
      source: "built-in",
    },
  ];
}

/** The profile a file defines, or the same with the problem that makes it unusable. */
export function readProfile(file: string): WorkerProfile {
  const fallback = basename(file, ".md");
  try {
    if (statSync(file).size > maxWorkerProfileBytes) throw new Error(`larger than ${maxWorkerProfileBytes} bytes`);
    const { frontmatter, body } = parseFrontmatter(readFileSync(file, "utf8"));
    const name = assertValid(WorkerName, frontmatter.name ?? fallback, { subject: "name" });
    const model = frontmatter.model;
    if (model !== undefined && (typeof model !== "string" || !MODEL_PATTERN.test(model))) throw new Error("model must be provider/id");
    const grant = frontmatter.grant === undefined ? undefined : assertValid(Grant, frontmatter.grant, { subject: "grant" });
    const description = typeof frontmatter.description === "string" ? frontmatter.description : undefined;
    const worktree = frontmatter.worktree;
    if (worktree !== undefined && typeof worktree !== "boolean") throw new Error("worktree must be true or false");
    return {
      name,
      ...(description === undefined ? {} : { description }),
      ...(worktree === undefined ? {} : { worktree }),
      ...(model === undefined ? {} : { model }),
      ...(grant === undefined ? {} : { grant }),
      instructions: body.trim(),
      source: file,
    };
  } catch (error) {
    return { name: fallback, instructions: "", source: file, problem: error instanceof Error ? error.message : String(error) };
  }
}

function profileFiles(dir: string): string[] {
  try {
    return readdirSync(dir)
      .filter((name) => name.endsWith(".md"))
      .sort()
      .map((name) => join(dir, name));
  } catch {
    return [];
  }
}

/** Where profiles are read: this Pi's home, then the project when the person trusts it. */
export function profileDirs(env: Env, cwd: string, projectTrusted: boolean): string[] {
  return [join(piTasksHome(env), "profiles"), ...(projectTrusted ? [join(cwd, ".pi", "pi-tasks", "profiles")] : [])];
}

/** Every profile by name (later directories win; files win over built-ins), at most `maxWorkerProfiles`. */
export function loadProfiles(env: Env, cwd: string, projectTrusted: boolean): WorkerProfile[] {
  const byName = new Map<string, WorkerProfile>();
  for (const profile of builtIns(env)) byName.set(profile.name, profile);
  for (const dir of profileDirs(env, cwd, projectTrusted)) {
    for (const file of profileFiles(dir)) {
      const profile = readProfile(file);
      byName.set(profile.name, profile);
    }
  }
  return [...byName.values()].slice(0, maxWorkerProfiles);
}

/** The named profile, usable; `INVALID_PROFILE` when it is unknown or cannot be read. */
export function findProfile(profiles: readonly WorkerProfile[], name: string): WorkerProfile {
  const profile = profiles.find((each) => each.name === name);
  if (profile === undefined)
    throw new TaskError("INVALID_PROFILE", {
      message: `no worker profile named ${name}`,
      details: { profile: name, known: profiles.map((each) => each.name) },
    });
  if (profile.problem !== undefined)
    throw new TaskError("INVALID_PROFILE", {
      message: `the worker profile ${name} cannot be used: ${profile.problem}`,
      details: { profile: name, source: profile.source },
    });
  return profile;
}
