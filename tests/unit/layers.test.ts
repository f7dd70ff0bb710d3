/**
 * The layer order (LAYERS in scripts/file-map.ts, shown in docs/architecture.md): every import
 * points down — to its own layer or a lower one — and no files import each other in a circle,
 * type-only imports included. The CLI's modules are commands: only the CLI and the entry points
 * import them. These checks read the source (scripts/source-graph.ts), so an import that points up
 * is stopped here, naming the file.
 */
import { describe, expect, test } from "bun:test";
import { LAYERS, layerOf, SCANNED } from "../../scripts/file-map.ts";
import { type ParsedSource, parseSource, sourceFiles } from "../../scripts/source-graph.ts";

/** The directories whose files are layered (tests/ sit above all of them and are not checked). */
const LAYERED = SCANNED;

/** A file's place in the order (scripts/file-map.ts LAYERS, bottom first). */
function rank(path: string): number {
  const layer = layerOf(path);
  if (layer === undefined) throw new Error(`${path} is in no layer: add its directory to LAYERS in scripts/file-map.ts`);
  return LAYERS.indexOf(layer);
}

function named(path: string): string {
  return LAYERS[rank(path)]!.dir;
}

/** Imports that point up the order, as `file → imported (file's layer → imported's layer)`. */
export function upwardImports(sources: readonly ParsedSource[]): string[] {
  return sources.flatMap((source) =>
    source.imports
      .filter((target) => rank(target) > rank(source.path))
      .map((target) => `${source.path} → ${target} (${named(source.path)} → ${named(target)})`),
  );
}

/** Every circle of imports (Tarjan's strongly connected components of two or more files, or a file importing itself). */
export function importCycles(sources: readonly ParsedSource[]): string[][] {
  const edges = new Map(sources.map((source) => [source.path, source.imports]));
  const order = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (file: string) => {
    order.set(file, order.size);
    low.set(file, order.get(file)!);
    stack.push(file);
    onStack.add(file);
    for (const next of edges.get(file) ?? []) {
      if (!edges.has(next)) continue;
      if (!order.has(next)) {
        visit(next);
        low.set(file, Math.min(low.get(file)!, low.get(next)!));
      } else if (onStack.has(next)) low.set(file, Math.min(low.get(file)!, order.get(next)!));
    }
    if (low.get(file) !== order.get(file)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== file);
    if (component.length > 1 || (edges.get(file) ?? []).includes(file)) cycles.push(component.sort());
  };
  for (const source of sources) if (!order.has(source.path)) visit(source.path);
  return cycles;
}

describe("imports point down the layer order, in no circle", () => {
  const sources = sourceFiles(LAYERED).map((path) => parseSource(path));

  test("every file is in a layer, and no import points up", () => {
    expect(upwardImports(sources)).toEqual([]);
  });

  test("no import cycles, type-only imports included", () => {
    expect(importCycles(sources)).toEqual([]);
  });

  test("src/cli holds commands: nothing outside src/cli and src/bin imports it", () => {
    const offenders = sources
      .filter((source) => !source.path.startsWith("src/cli/") && !source.path.startsWith("src/bin/"))
      .flatMap((source) => source.imports.filter((target) => target.startsWith("src/cli/")).map((target) => `${source.path} → ${target}`));
    expect(offenders).toEqual([]);
  });

  test("the checks see an upward import, a type-only cycle and a dynamic import", () => {
    const file = (path: string, imports: string[]): ParsedSource => ({ path, imports, functions: [] });
    expect(upwardImports([file("src/trust/keys.ts", ["src/core/trust.ts"])])).toEqual([
      "src/trust/keys.ts → src/core/trust.ts (src/trust → src/core)",
    ]);
    expect(upwardImports([file("src/core/trust.ts", ["src/trust/keys.ts", "src/core/pass.ts"])])).toEqual([]);
    const cycle = [
      file("src/store/a.ts", ["src/store/b.ts"]),
      file("src/store/b.ts", ["src/store/c.ts"]),
      file("src/store/c.ts", ["src/store/a.ts"]),
    ];
    expect(importCycles(cycle)).toEqual([["src/store/a.ts", "src/store/b.ts", "src/store/c.ts"]]);
    expect(importCycles([file("src/store/a.ts", ["src/store/b.ts"]), file("src/store/b.ts", [])])).toEqual([]);
    // The parser hands every kind of import to the checks: `import type`, `export … from` and `import("…")`.
    const text = [
      'import type { A } from "../core/a.ts";',
      'import { b, type C } from "./b.ts";',
      'export type { D } from "../store/d.ts";',
      'export * from "./e.ts";',
      'import { parseSync } from "oxc-parser";',
      'const later = () => import("../host/f.ts");',
    ].join("\n");
    expect([...parseSource("src/trust/x.ts", text).imports].sort()).toEqual([
      "src/core/a.ts",
      "src/host/f.ts",
      "src/store/d.ts",
      "src/trust/b.ts",
      "src/trust/e.ts",
    ]);
  });
});
