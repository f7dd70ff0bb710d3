/**
 * Every piece of code the docs quote exists: docs/*.md and README.md name no function, type,
 * constant or file that the repository does not have (a rename that forgets a doc fails here).
 *
 * The rule, kept simple:
 * - A code span (text in backticks) that is a name — dotted names allowed, optionally followed by an
 *   argument list: `TaskCore`, `TaskStore.updateTask`, `close()`, `homeTrust(home, {…})` — is code
 *   when it has an argument list, or one of its names is camelCase or PascalCase (a lower-case letter
 *   followed by a capital: `createTask`, `TaskCore`) or has an underscore (`RELAY_RESET`,
 *   `agent_task_send`). Each of its names must occur as a word in the sources: src/, extensions/,
 *   testkit/, bench/, tests/, skills/, scripts/. Other spans (`pi-tasks relay`, `node:http`) are not
 *   checked.
 * - A path, in backticks or not, that starts with one of the repository's directories (src/,
 *   extensions/, testkit/, tests/, bench/, docs/, skills/, scripts/, dist/) must exist; a file name
 *   ending in `.ts` (`core/lifetime.ts`, `./engine.ts`) must be the end of an existing file's path.
 *   Globs (`tools/*.ts`) are not checked.
 * - NOT_OURS lists the few quoted names that are not ours to define, each with the one doc that may
 *   name it and why.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../../testkit/relay-process.ts";

/** Quoted names the repository does not define: the doc that may name each, and why it does. */
const NOT_OURS: Readonly<Record<string, { readonly doc: string; readonly why: string }>> = {
  setTarget: { doc: "docs/library.md", why: "the Wolfpack reference implementation's name, compared with ours" },
  ERR_UNSUPPORTED_NODE_MODULES_TYPE_STRIPPING: {
    doc: "docs/architecture.md",
    why: "Node's error code: why Node does not run our TypeScript",
  },
  OTEL_EXPORTER_OTLP_HEADERS: { doc: "docs/operations.md", why: "read by the OpenTelemetry exporter itself, not by our code" },
  OTEL_EXPORTER_OTLP_TRACES_HEADERS: { doc: "docs/operations.md", why: "read by the OpenTelemetry exporter itself, not by our code" },
};

const SOURCE_DIRS = ["src", "extensions", "testkit", "bench", "tests", "skills", "scripts"];
const PATH_ROOTS = ["src", "extensions", "testkit", "tests", "bench", "docs", "skills", "scripts", "dist"];

/** Every file under the source directories, relative to the repository root. */
function sourceFiles(): string[] {
  const files: string[] = [];
  for (const dir of SOURCE_DIRS) {
    for (const name of readdirSync(join(REPO_ROOT, dir), { recursive: true, encoding: "utf8" })) {
      const path = join(dir, name);
      if (statSync(join(REPO_ROOT, path)).isFile()) files.push(path);
    }
  }
  return files;
}

const files = sourceFiles();
/** The words of the sources, this file's own left out (it quotes a name that must not exist). */
const words = new Set(
  files
    .filter((path) => path !== "tests/unit/docs-identifiers.test.ts")
    .flatMap((path) => readFileSync(join(REPO_ROOT, path), "utf8").match(/[A-Za-z_$][\w$]*/g) ?? []),
);
const docs = [
  ...readdirSync(join(REPO_ROOT, "docs"))
    .filter((name) => name.endsWith(".md"))
    .map((name) => `docs/${name}`),
  "README.md",
];

/** The names of a code span that must exist; none when the span is not code. */
function quotedNames(span: string): string[] {
  const match = /^([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)(\(.*\))?$/.exec(span);
  if (match === null) return [];
  const names = match[1]!.split(".");
  const code = match[2] !== undefined || names.some((name) => /[a-z][A-Z]/.test(name) || name.includes("_"));
  return code ? names : [];
}

/** The code spans of a doc that name something the sources do not have. */
function missingNames(text: string, doc: string): string[] {
  const spans = [...text.matchAll(/`([^`\n]+)`/g)].map((match) => match[1]!);
  const known = (name: string) => words.has(name) || NOT_OURS[name]?.doc === doc;
  return spans.filter((span) => !quotedNames(span).every(known));
}

/** The paths a doc names that do not exist. */
function missingPaths(text: string): string[] {
  const rooted = new RegExp(`(?<![\\w./~:-])((?:${PATH_ROOTS.join("|")})/[\\w./*-]*[\\w/])`, "g");
  const fromRoot = [...text.matchAll(rooted)].map((match) => match[1]!).filter((path) => !path.includes("*"));
  const named = [...text.matchAll(/(?<![\w./~:*-])((?:[\w.-]+\/)*[\w.-]+\.ts)\b/g)].map((match) => match[1]!.replace(/^(?:\.\.?\/)+/, ""));
  const missing = [
    ...fromRoot.filter((path) => !existsSync(join(REPO_ROOT, path))),
    ...named.filter((path) => !files.some((file) => file === path || file.endsWith(`/${path}`))),
  ];
  return [...new Set(missing)];
}

describe("what the docs quote exists", () => {
  test.each(docs)("%s: every quoted code name is in the sources", (doc) => {
    expect(missingNames(readFileSync(join(REPO_ROOT, doc), "utf8"), doc)).toEqual([]);
  });

  test.each(docs)("%s: every path it names exists", (doc) => {
    expect(missingPaths(readFileSync(join(REPO_ROOT, doc), "utf8"))).toEqual([]);
  });

  test("the rule sees code where it should", () => {
    expect(quotedNames("TaskStore.updateTask(taskId, patch)")).toEqual(["TaskStore", "updateTask"]);
    expect(quotedNames("RELAY_RESET")).toEqual(["RELAY_RESET"]);
    expect(quotedNames("close()")).toEqual(["close"]);
    expect(quotedNames("pi-tasks relay")).toEqual([]);
    expect(quotedNames("relay")).toEqual([]);
    expect(missingNames("`noSuchFunctionAnywhere()` and `createTaskCore`", "README.md")).toEqual(["noSuchFunctionAnywhere()"]);
    expect(missingNames("`TaskStore.setTarget`", "docs/architecture.md")).toEqual(["TaskStore.setTarget"]);
    expect(missingPaths("src/core/no-such-file.ts, core/lifetime.ts and `kit/gone.ts`")).toEqual([
      "src/core/no-such-file.ts",
      "kit/gone.ts",
    ]);
  });
});
