/**
 * docs/library.md names every value the package's entry points export (package.json `exports`: the
 * library, the relay, the conformance suite, the extension, the CLI), so no export is there without
 * a word on what it is. A name counts when it stands in backticks in the doc, as a whole word
 * (`createTaskCore`, `createTaskCore(options)`, `limits.maxInFlightRequests`). Types are not values
 * and are not checked.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../../testkit/relay-process.ts";

const manifest = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as {
  exports: Record<string, string | Record<string, string>>;
};
const doc = readFileSync(join(REPO_ROOT, "docs", "library.md"), "utf8");
/** Every word inside a backtick span of the doc. */
const quoted = new Set([...doc.matchAll(/`([^`\n]+)`/g)].flatMap((match) => match[1]!.match(/[A-Za-z_$][\w$]*/g) ?? []));

/** The entry points as source modules (the `source` condition of a compiled one; not package.json itself). */
const entries = Object.entries(manifest.exports)
  .map(([name, target]): [string, string] => [name, typeof target === "string" ? target : target.source!])
  .filter(([, path]) => path?.endsWith(".ts"));

describe("docs/library.md", () => {
  test("the package has source entry points to check", () => {
    expect(entries.map(([name]) => name)).toContain(".");
  });

  test.each(entries)("names every value %s exports", async (_name, path) => {
    const module = (await import(join(REPO_ROOT, path))) as Record<string, unknown>;
    const values = Object.keys(module);
    expect(values.length).toBeGreaterThan(0);
    expect(values.filter((value) => !quoted.has(value))).toEqual([]);
  });
});
