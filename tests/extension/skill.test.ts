/**
 * The skill teaches the model tool calls by example (`agent_task_x {field: value, …}`): every one
 * of them must be accepted by that tool's schema, with the placeholders filled in and the literal
 * values (strings, booleans) kept as written. A misspelled field (`withdrawn` for `withdraw`) or a
 * value the schema refuses fails here.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { PACKAGE_ROOT } from "../../src/host/pi-cli.ts";
import { TOOL_PARAMETERS, type ToolName } from "../../src/protocol/schemas.ts";
import { firstError } from "../../src/protocol/validate.ts";

const SKILL = readFileSync(join(PACKAGE_ROOT, "skills", "pi-task-delegation", "SKILL.md"), "utf8");
const ID = "3f2a91c0-5b6d-4e7f-8a9b-0c1d2e3f4a5b";
const ENDPOINT = { relay: "wolfpack-pi-tasks-v2", id: "d5703d6a-1111-4222-8333-944455556666" };

/** A plausible value for a placeholder, by field name. */
const SAMPLES: Readonly<Record<string, unknown>> = {
  taskId: ID,
  taskIds: [ID],
  to: ENDPOINT,
  task: "Write hello.txt",
  timeoutMs: 600_000,
  message: "text",
  inReplyTo: ID,
  raisesQuestion: ID,
  supersedes: ID,
  reason: "not needed",
  name: "builder",
  status: "completed",
  summary: "done",
  result: { changedFiles: ["hello.txt"] },
  error: { code: "TESTS_FAILED", message: "it broke", retryable: false },
  artifacts: [{ path: "out.txt" }],
  steps: [
    { to: "scout", task: "Find the bug." },
    { to: ENDPOINT, task: "Fix it." },
  ],
};

interface Example {
  readonly tool: string;
  readonly text: string;
  readonly args: Record<string, unknown>;
}

/** A value as written: a quoted string, true/false, a number, or a placeholder (undefined). */
function literal(text: string): unknown {
  const value = text.trim();
  if (/^"[^"]*"$/.test(value)) return value.slice(1, -1);
  if (value === "true" || value === "false") return value === "true";
  if (/^\d+$/.test(value)) return Number(value);
  return undefined;
}

function examples(): Example[] {
  return [...SKILL.matchAll(/(agent_task_[a-z]+) \{([^}]*)\}/g)].map((match) => {
    const args: Record<string, unknown> = {};
    for (const part of match[2]!
      .split(",")
      .map((item) => item.trim())
      .filter(Boolean)) {
      const [rawKey, ...rest] = part.split(":");
      const key = rawKey!.trim().replace(/\?$/, "");
      const written = rest.length === 0 ? undefined : literal(rest.join(":"));
      args[key] = written ?? SAMPLES[key];
    }
    return { tool: match[1]!, text: match[0], args };
  });
}

/** Every field any tool takes. */
function toolFields(): Set<string> {
  return new Set(
    Object.values(TOOL_PARAMETERS).flatMap((schema) => Object.keys((schema as { properties?: Record<string, unknown> }).properties ?? {})),
  );
}

describe("the skill's tool calls", () => {
  test("every `field: value` the skill's prose shows is a field of a tool", () => {
    const fields = toolFields();
    const shown = [...SKILL.matchAll(/`([a-zA-Z]+): [^`]*`/g)].map((match) => match[1]!);
    expect(shown.filter((field) => !fields.has(field))).toEqual([]);
  });

  const found = examples();

  test("the skill shows calls of most tools (the examples are found)", () => {
    expect(new Set(found.map((example) => example.tool)).size).toBeGreaterThanOrEqual(10);
  });

  test.each(found.map((example) => [example.text, example] as const))("%s is accepted by its tool's schema", (_text, example) => {
    expect(Object.hasOwn(TOOL_PARAMETERS, example.tool)).toBe(true);
    for (const [key, value] of Object.entries(example.args)) expect({ key, value }).not.toEqual({ key, value: undefined });
    expect(firstError(TOOL_PARAMETERS[example.tool as ToolName], example.args)).toBeUndefined();
  });
});
