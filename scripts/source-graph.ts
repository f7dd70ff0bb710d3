/**
 * The repository's TypeScript sources as a parser reads them (oxc-parser, a dev dependency): each
 * file's relative imports — type-only, re-exports and dynamic `import("…")` included — resolved to
 * repository paths, and its functions with the lines they span. The layer table of the generated
 * map (file-map.ts) and the layering and function-length tests (tests/unit/layers.test.ts,
 * tests/unit/function-spans.test.ts) read the code through this.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { parseSync, Visitor } from "oxc-parser";

export const REPO_ROOT = resolve(import.meta.dir, "..");

/** Every `.ts` file under those of the given directories that exist below `root`, as paths relative to it (`src/core/pass.ts`). */
export function sourceFiles(directories: readonly string[], root = REPO_ROOT): string[] {
  return directories
    .filter((directory) => existsSync(join(root, directory)))
    .flatMap((directory) =>
      readdirSync(join(root, directory), { recursive: true, encoding: "utf8" })
        .filter((name) => name.endsWith(".ts"))
        .map((name) => join(directory, name))
        .sort(),
    );
}

export interface ParsedSource {
  readonly path: string;
  /** Repository paths this file imports (relative specifiers only; packages are not the layers' concern). */
  readonly imports: readonly string[];
  /** Each function (declaration, expression, arrow) with its first line and its span in lines, braces included. */
  readonly functions: readonly { readonly line: number; readonly lines: number }[];
}

/** Parses `path` (relative to the repository; `text` defaults to the file's); a file that does not parse throws, naming it. */
export function parseSource(path: string, text = readFileSync(join(REPO_ROOT, path), "utf8")): ParsedSource {
  const parsed = parseSync(path, text);
  if (parsed.errors.length > 0) throw new Error(`${path} does not parse: ${parsed.errors[0]!.message}`);
  const specifiers = [
    ...parsed.module.staticImports.map((entry) => entry.moduleRequest.value),
    ...parsed.module.staticExports.flatMap((entry) => entry.entries.flatMap((item) => item.moduleRequest?.value ?? [])),
    ...parsed.module.dynamicImports.map((entry) => text.slice(entry.moduleRequest.start + 1, entry.moduleRequest.end - 1)),
  ];
  const imports = [...new Set(specifiers.filter((specifier) => specifier.startsWith(".")))].map((specifier) =>
    relative(REPO_ROOT, resolve(REPO_ROOT, dirname(path), specifier)),
  );
  return { path, imports, functions: functionSpans(parsed.program, text) };
}

function functionSpans(program: Parameters<Visitor["visit"]>[0], text: string): ParsedSource["functions"] {
  const lineStarts = [0];
  for (let index = text.indexOf("\n"); index !== -1; index = text.indexOf("\n", index + 1)) lineStarts.push(index + 1);
  const lineOf = (offset: number) => {
    let low = 0;
    let high = lineStarts.length - 1;
    while (low < high) {
      const middle = Math.ceil((low + high) / 2);
      if (lineStarts[middle]! <= offset) low = middle;
      else high = middle - 1;
    }
    return low + 1;
  };
  const found: { line: number; lines: number }[] = [];
  const record = (node: { start: number; end: number }) => {
    const line = lineOf(node.start);
    found.push({ line, lines: lineOf(node.end) - line + 1 });
  };
  new Visitor({ FunctionDeclaration: record, FunctionExpression: record, ArrowFunctionExpression: record }).visit(program);
  return found;
}
