/**
 * No function over `MAX_FUNCTION_LINES`, counted by span — its first line to its last, braces and
 * blank lines included — in src/, extensions/, the test kit (testkit/) and bench/. Biome's own rule
 * (biome.json) counts fewer lines and looks only at src/ and extensions/; this one reads every
 * function the parser finds (tests/helpers/source-graph.ts), arrow functions and methods included.
 */
import { describe, expect, test } from "bun:test";
import { parseSource, sourceFiles } from "../../scripts/source-graph.ts";

/** The longest a function may be, in lines (TigerStyle aims at 70). */
export const MAX_FUNCTION_LINES = 80;

const CAPPED = ["src", "extensions", "testkit", "bench"];

describe("functions are short", () => {
  test(`no function spans more than ${MAX_FUNCTION_LINES} lines in ${CAPPED.join(", ")}`, () => {
    const long = sourceFiles(CAPPED).flatMap((path) =>
      parseSource(path)
        .functions.filter((fn) => fn.lines > MAX_FUNCTION_LINES)
        .map((fn) => `${path}:${fn.line} spans ${fn.lines} lines`),
    );
    expect(long).toEqual([]);
  });

  test("the count is the span: a brace-only line counts, and the edge is exactly the bound", () => {
    // Brace-only lines in pairs (`{` then `}`), and one empty statement when the count is odd.
    const body = (lines: number) =>
      Array.from({ length: lines }, (_, index) => (index === lines - 1 && lines % 2 === 1 ? "  ;" : index % 2 === 0 ? "  {" : "  }")).join(
        "\n",
      );
    const at = (inner: number) => parseSource("src/x.ts", `function f() {\n${body(inner)}\n}\n`).functions[0]!.lines;
    expect(at(MAX_FUNCTION_LINES - 2)).toBe(MAX_FUNCTION_LINES);
    expect(at(MAX_FUNCTION_LINES - 1)).toBe(MAX_FUNCTION_LINES + 1);
    const arrow = parseSource("src/x.ts", "const g = (a: number) =>\n  a +\n  1;\n").functions[0]!;
    expect(arrow).toEqual({ line: 1, lines: 3 });
  });
});
