/**
 * One owner per piece of a core's state (src/core/context.ts): the context holds given dependencies
 * and one object per concern, and only the concern's own file changes that concern's state. These
 * checks read the source, so a newcomer who writes another concern's fields (or adds a mutable
 * field to the shared context) is stopped here, with the line named.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

const root = join(import.meta.dir, "..", "..");
const coreDir = join(root, "src", "core");

/** Each concern of the context, and the one file that may change its state. */
const OWNERS: Readonly<Record<string, string>> = {
  lifetime: "lifetime.ts",
  health: "relay-health.ts",
  sends: "send-registry.ts",
  search: "peer-search.ts",
  progressPacing: "pacer.ts",
  trust: "trust.ts",
  proofs: "proofs.ts",
};

/** Methods that change a Map, Set or array in place. */
const MUTATORS = "set|delete|add|clear|push|pop|shift|unshift|splice|sort|reverse";

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((name) => name.endsWith(".ts"))
    .map((name) => join(dir, name));
}

/** Lines of `text` that change state reached through `context.<concern>.…`, with the concern. */
function concernWrites(text: string): { line: number; concern: string; code: string }[] {
  const found: { line: number; concern: string; code: string }[] = [];
  const write = new RegExp(
    `\\bcontext\\.(\\w+)((?:\\.\\w+)+)\\s*(?:=(?!=)|\\+=|-=|\\+\\+|--)|\\bcontext\\.(\\w+)(?:\\.\\w+)+\\.(?:${MUTATORS})\\(`,
    "g",
  );
  text.split("\n").forEach((code, index) => {
    for (const match of code.matchAll(write)) found.push({ line: index + 1, concern: match[1] ?? match[3]!, code: code.trim() });
  });
  return found;
}

/** Lines that assign a field of the context itself (`context.x = …`). */
function contextAssignments(text: string): { line: number; code: string }[] {
  const assign = /\bcontext\.\w+\s*(?:=(?!=)|\+=|-=|\+\+|--)/;
  return text
    .split("\n")
    .map((code, index) => ({ line: index + 1, code: code.trim() }))
    .filter(({ code }) => assign.test(code));
}

describe("one owner per piece of the core's state", () => {
  const files = [...sourceFiles(coreDir), ...sourceFiles(join(root, "extensions"))];

  test("every field of CoreContext is readonly: concerns change through their functions, never by assignment", () => {
    const text = readFileSync(join(coreDir, "context.ts"), "utf8");
    const body = text.slice(
      text.indexOf("export interface CoreContext {"),
      text.indexOf("\n}\n", text.indexOf("export interface CoreContext {")),
    );
    const fields = body
      .split("\n")
      .slice(1)
      .map((line) => line.trim())
      .filter((line) => line !== "" && !line.startsWith("/") && !line.startsWith("*"));
    expect(fields.length).toBeGreaterThan(5);
    expect(fields.filter((line) => !line.startsWith("readonly "))).toEqual([]);
    // Every concern named in the table is a field, and every non-given field is in the table.
    const given = new Set(["store", "session", "clock", "timers", "host", "requestRefresh", "settings"]);
    const names = fields.map((line) => line.replace(/^readonly (\w+).*$/, "$1"));
    expect(names.filter((name) => !given.has(name)).sort()).toEqual(Object.keys(OWNERS).sort());
  });

  test("no file assigns a field of the context", () => {
    const offenders = files.flatMap((file) =>
      contextAssignments(readFileSync(file, "utf8")).map((hit) => `${file}:${hit.line}: ${hit.code}`),
    );
    expect(offenders).toEqual([]);
  });

  test("state reached through a concern is changed only in the concern's own file", () => {
    const offenders = files.flatMap((file) =>
      concernWrites(readFileSync(file, "utf8"))
        .filter((hit) => !file.endsWith(`/${OWNERS[hit.concern] ?? "(a given dependency)"}`))
        // The given dependencies (store, session, host) are written through their own APIs, not here.
        .filter((hit) => hit.concern in OWNERS)
        .map((hit) => `${file}:${hit.line}: ${hit.code}`),
    );
    expect(offenders).toEqual([]);
  });

  test("the check sees a write from outside the owner, and an assignment to the context", () => {
    expect(concernWrites("  context.search.looking.add(taskId);").map((hit) => hit.concern)).toEqual(["search"]);
    expect(concernWrites("  context.trust.rejections.set(code, 1);").map((hit) => hit.concern)).toEqual(["trust"]);
    expect(concernWrites("  context.proofs.asked = new Map();").map((hit) => hit.concern)).toEqual(["proofs"]);
    expect(concernWrites("  if (context.search.probes.due(key)) context.search.probes.mark(key);")).toEqual([]);
    expect(contextAssignments("  context.hold = undefined;").length).toBe(1);
    expect(contextAssignments("  if (context.hold === undefined) return;").length).toBe(0);
  });
});
