/**
 * The layers and the file map of docs/architecture.md, generated from the sources (`npm run docs`).
 * The layers, bottom to top: what each is (the LAYERS table below) and which layers of ours its files
 * import (read from their import lines); then, per layer, one line per file from its header. So the
 * doc cannot drift from the sources: tests/unit/docs-map.test.ts fails while it differs from this output.
 *
 * The rule: a file's header is the doc comment (`/**`) it starts with, after an optional `#!` line;
 * the line the map shows is that comment's first sentence — up to the first `.`, `!` or `?` that ends
 * a sentence, or the end of its first paragraph (a blank line or a list item ends it; a paragraph that
 * leads into a list ends in ` …`).
 */
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { parseSource, sourceFiles as sourceFilesUnder } from "./source-graph.ts";

/** Where the map is written, relative to the repository root. */
export const MAP_DOC = "docs/architecture.md";

/** One layer: a directory of the repository (all of it, subdirectories included) and what it is. */
export interface Layer {
  readonly dir: string;
  readonly what: string;
  /** Only the files directly in `dir`, not its subdirectories (src/ itself holds just the library entry). */
  readonly topOnly?: boolean;
}

/** The layers, bottom to top: a file imports only from its own layer and the layers before it. */
export const LAYERS: readonly Layer[] = [
  {
    dir: "src/protocol",
    what: "the wire and its tables: schemas, limits and names, errors, events, canonical JSON, path containment; no I/O",
  },
  {
    dir: "src/platform",
    what: "file and process primitives: atomic and private files, the file lock, the home directory, isAlive, bounded waits",
  },
  { dir: "src/trust", what: "who signs what: Ed25519 identities and keys, signed bytes, sealing, peers, the relay secret" },
  { dir: "src/store", what: "the generic RAM task store: rows, indexes and tables; no core policy" },
  {
    dir: "src/relay-client",
    what: "the relay session: binding, lease, epoch and fencing, the transport, configuration from the environment",
  },
  { dir: "src/relay-server", what: "the relay: HTTP handling, the wire engine, its sockets and the RelayStore seam (memory and Redis)" },
  { dir: "src/core", what: "the TaskCore of one endpoint lifetime: operations, the refresh pass, the trust gate, liveness, recovery" },
  { dir: "src/workspace", what: "what a worker works in: git worktrees, and the file content a result carries" },
  {
    dir: "src/host",
    what: "processes: the embedded relay, spawned workers and their holder, stopping, the runtime, Pi's CLI, session control",
  },
  { dir: "src/conformance", what: "the relay conformance suite (`pi-tasks/conformance`): checks as data, an in-process runner" },
  { dir: "src/demo", what: "the demo: a scripted model and its scenarios" },
  { dir: "src/cli", what: "the `pi-tasks` commands (only commands: what they run lives in the layers below)" },
  { dir: "src/bin", what: "the two entry points built into dist/ (`npm run build`, committed)" },
  { dir: "extensions/pi-tasks", what: "the Pi adapter (`pi-tasks/extension`): tools, hooks, `/tasks`, the footer" },
  { dir: "src", what: "the library entry (`pi-tasks`, docs/library.md)", topOnly: true },
  { dir: "testkit", what: "shared by tests/ and bench/, and the deterministic simulator (testkit/sim/) (not shipped)" },
  {
    dir: "bench",
    what: "`npm run bench`, `npm run faults`, `npm run scale`, `npm run simulate`: the figures of docs/performance.md, the simulator's command (not shipped)",
  },
  { dir: "scripts", what: "repository tooling: this map (not shipped)" },
];

/** The directories whose source files the map lists (and the layering test checks). */
export const SCANNED = ["src", "extensions", "testkit", "bench", "scripts"];

/** Every TypeScript source file the map covers, relative to `root`, in path order. */
function sourceFiles(root: string): string[] {
  return sourceFilesUnder(SCANNED, root);
}

/** The header comment's text, its `*` margins removed; undefined when the file starts with none. */
export function headerText(source: string): string | undefined {
  const match = /^(?:#!.*\n)?\/\*\*([\s\S]*?)\*\//.exec(source);
  if (match === null) return undefined;
  return match[1]!
    .split("\n")
    .map((line) => line.replace(/^\s*\* ?/, ""))
    .join("\n")
    .trim();
}

/** Abbreviations whose dot ends no sentence. */
const ABBREVIATIONS = /(?:\be\.g|\bi\.e|\betc|\bvs|\bcf)\.$/;

/** The first sentence of a header (or its first paragraph, when that ends sooner). */
export function firstSentence(header: string): string {
  const paragraph: string[] = [];
  for (const line of header.split("\n")) {
    if (line.trim() === "" || /^\s*(?:- |\d+\. )/.test(line)) break;
    paragraph.push(line.trim());
  }
  const text = paragraph.join(" ");
  for (const end of text.matchAll(/[.!?](?=\s|$)/g)) {
    const upTo = text.slice(0, end.index + 1);
    if (!ABBREVIATIONS.test(upTo)) return upTo;
  }
  // A paragraph that leads into a list ends with `:`, `,` or `—`: the list follows in the file.
  return /[:,—]$/.test(text) ? `${text.replace(/\s*[,—]$/, "")} …` : text;
}

/** The layer a file belongs to; undefined when none holds it. */
export function layerOf(file: string): Layer | undefined {
  const holding = LAYERS.filter((layer) => (layer.topOnly ? dirname(file) === layer.dir : file.startsWith(`${layer.dir}/`)));
  return holding.sort((a, b) => b.dir.length - a.dir.length)[0];
}

/** How the map names a layer: its directory, or the one file of a top-only layer. */
function layerName(layer: Layer): string {
  return layer.topOnly ? `${layer.dir}/index.ts` : `${layer.dir}/`;
}

/** The other layers a layer's files import, in layer order. */
function importedLayers(root: string, layer: Layer, files: readonly string[]): string[] {
  const used = new Set<Layer>();
  for (const file of files) {
    for (const imported of parseSource(file, readFileSync(join(root, file), "utf8")).imports) {
      const target = layerOf(imported);
      if (target !== undefined && target !== layer) used.add(target);
    }
  }
  return LAYERS.filter((each) => used.has(each)).map(layerName);
}

/** The files without a header comment (the map cannot say what they are). */
export function missingHeaders(root: string): string[] {
  return sourceFiles(root).filter((file) => headerText(readFileSync(join(root, file), "utf8")) === undefined);
}

/** The files no layer holds. */
export function unlayeredFiles(root: string): string[] {
  return sourceFiles(root).filter((file) => layerOf(file) === undefined);
}

/** Each layer with its files; throws on a file without a header or a layer (the map cannot place it). */
function layeredFiles(root: string): { layer: Layer; files: string[] }[] {
  const problems = [
    ...missingHeaders(root).map((file) => `${file}: no header comment`),
    ...unlayeredFiles(root).map((file) => `${file}: in no layer of scripts/file-map.ts`),
  ];
  if (problems.length > 0) throw new Error(`file map: ${problems.join("; ")}`);
  const all = sourceFiles(root);
  return LAYERS.map((layer) => ({ layer, files: all.filter((file) => layerOf(file) === layer) }));
}

/** The layers, bottom to top, each with what it is and what of ours it imports. */
export function layerTable(root: string): string {
  const rows = layeredFiles(root).map(({ layer, files }) => {
    const imports = importedLayers(root, layer, files);
    return `| ${layerName(layer)} | ${layer.what} | ${imports.length === 0 ? "—" : imports.join(", ")} |`;
  });
  return ["| layer (bottom to top) | what it is | imports of ours |", "| --- | --- | --- |", ...rows].join("\n");
}

/** One heading per layer, then one line per file: its path in the layer and its header's first sentence. */
export function fileMap(root: string): string {
  const sections = layeredFiles(root).map(({ layer, files }) => {
    const lines = files.map((file) => {
      const header = headerText(readFileSync(join(root, file), "utf8")) ?? "";
      return `- \`${relative(layer.dir, file)}\` — ${firstSentence(header)}`;
    });
    return [`### ${layerName(layer)}`, "", ...lines].join("\n");
  });
  return sections.join("\n\n");
}

/** A generated part of the doc: its name (in its markers) and what it holds. */
interface Region {
  readonly name: string;
  readonly render: (root: string) => string;
}

export const REGIONS: readonly Region[] = [
  { name: "layers", render: layerTable },
  { name: "file-map", render: fileMap },
];

/** The markers around a region: what made it, and where it ends. */
function markers(region: Region): { start: string; end: string } {
  return {
    start: `<!-- ${region.name}:start — generated by \`npm run docs\` (scripts/file-map.ts); edit the sources, not this -->`,
    end: `<!-- ${region.name}:end -->`,
  };
}

/** Where a region's text stands in the doc; throws when its markers are missing. */
function regionSpan(doc: string, region: Region): { from: number; to: number } {
  const { start, end } = markers(region);
  const at = doc.indexOf(start);
  const to = doc.indexOf(end);
  if (at < 0 || to < at) throw new Error(`${MAP_DOC} has no ${start} … ${end} markers`);
  return { from: at + start.length, to };
}

/** The region's text as the doc holds it. */
export function committedRegion(doc: string, region: Region): string {
  const { from, to } = regionSpan(doc, region);
  return doc.slice(from, to).trim();
}

/** The doc with every region written afresh from the sources under `root`. */
export function regenerated(doc: string, root: string): string {
  let text = doc;
  for (const region of REGIONS) {
    const { from, to } = regionSpan(text, region);
    text = `${text.slice(0, from)}\n\n${region.render(root)}\n\n${text.slice(to)}`;
  }
  return text;
}

if (import.meta.main) {
  const root = resolve(import.meta.dir, "..");
  const path = join(root, MAP_DOC);
  writeFileSync(path, regenerated(readFileSync(path, "utf8"), root));
  console.log(`${MAP_DOC}: layers and file map written`);
}
