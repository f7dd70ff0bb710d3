/**
 * `dist/` is the built JavaScript that pi-tasks' own processes run (the relay, the worker holder,
 * the `pi-tasks` bin) and the extension as Pi loads it (`dist/extension.js`, through
 * extensions/pi-tasks/index.ts): Node does not strip TypeScript under node_modules, and a git install gets no
 * build step (src/host/runtime.ts). It is committed, so it must be exactly what `npm run build`
 * (scripts/build.ts) makes of the sources now, and it may import nothing but Node's built-ins and its own chunks (what Pi's
 * installer omits — dev and peer dependencies — and Bun are not there on a user's machine; Pi's
 * own modules reach the extension through its loader). The
 * build is split: what only some commands need (the Redis client of `relay --store`, the demo, the
 * conformance suite) is a chunk of its own, loaded when that command runs.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { isBuiltin } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT } from "../../testkit/relay-process.ts";

const parser = new Bun.Transpiler({ loader: "js" });
/** What a built file imports and requires, as the parser reads it (a `#!` line aside). */
const scanner = { scanImports: (text: string) => parser.scanImports(text.replace(/^#!.*/, "")) };
const out = mkdtempSync(join(tmpdir(), "pi-tasks-dist-"));
afterAll(() => rmSync(out, { recursive: true, force: true }));

/** The build of package.json's `build` script, into `outdir`. */
function build(outdir: string): void {
  const manifest = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as { scripts: { build: string } };
  expect(manifest.scripts.build).toBe("bun scripts/build.ts");
  const done = Bun.spawnSync([process.execPath, "scripts/build.ts", "--outdir", outdir], {
    cwd: REPO_ROOT,
    stdout: "pipe",
    stderr: "pipe",
  });
  if (done.exitCode !== 0) throw new Error(`build failed: ${done.stderr.toString()}`);
}

/**
 * Imports of optional packages: the bundled Redis client's, made only inside a function the
 * store never calls (its `digest()`), in a `try` (left out, they fail that function alone); and
 * OpenTelemetry's, which the extension imports only when traces are asked for
 * (extensions/pi-tasks/traces.ts: missing, the person is told how to install them).
 */
const OPTIONAL_IMPORTS = new Set([
  "@node-rs/xxhash",
  "@opentelemetry/api",
  "@opentelemetry/sdk-trace",
  "@opentelemetry/exporter-trace-otlp-http",
  "@opentelemetry/resources",
]);

describe("dist/", () => {
  build(out);
  const files = readdirSync(join(REPO_ROOT, "dist")).sort();

  test("holds what npm run build makes of the sources now (else: npm run build, and commit dist/)", () => {
    expect(readdirSync(out).sort()).toEqual(files);
    for (const file of files) {
      const fresh = readFileSync(join(out, file), "utf8") === readFileSync(join(REPO_ROOT, "dist", file), "utf8");
      expect({ file, fresh }).toEqual({ file, fresh: true });
    }
  });

  test.each(files)("%s imports only Node's built-ins", (file) => {
    const text = readFileSync(join(REPO_ROOT, "dist", file), "utf8");
    // Static and dynamic imports and (a bundled CommonJS package's) requires, as the parser reads them.
    const imported = scanner.scanImports(text).map((found) => found.path);
    const ownChunk = (name: string) => /^\.\/[\w-]+\.js$/.test(name) && files.includes(name.slice(2));
    expect(
      imported.filter((name) => !name.startsWith("node:") && !isBuiltin(name) && !ownChunk(name) && !OPTIONAL_IMPORTS.has(name)),
    ).toEqual([]);
  });

  test("the scan sees the imports: the entries import Node's built-ins and their chunks", () => {
    for (const entry of ["pi-tasks.js", "worker-host.js", "extension.js"]) {
      const imported = scanner.scanImports(readFileSync(join(REPO_ROOT, "dist", entry), "utf8")).map((found) => found.path);
      expect(imported.some((name) => name.startsWith("node:") || isBuiltin(name))).toBe(true);
      expect(imported.some((name) => name.startsWith("./chunk-"))).toBe(true);
    }
  });
});
