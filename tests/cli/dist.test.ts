/**
 * `dist/` is the built JavaScript that pi-tasks' own processes run (the relay, the worker holder,
 * the `pi-tasks` bin): Node does not strip TypeScript under node_modules, and a git install gets no
 * build step (src/host/runtime.ts). It is committed, so it must be exactly what `npm run build` makes
 * of the sources now, and it may import nothing but Node's built-ins and its own chunks (what Pi's
 * installer omits — dev and peer dependencies — and Bun are not there on a user's machine). The
 * build is split: what only some commands need (the Redis client of `relay --store`, the demo, the
 * conformance suite) is a chunk of its own, loaded when that command runs.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { isBuiltin } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT } from "../../testkit/relay-process.ts";

const out = mkdtempSync(join(tmpdir(), "pi-tasks-dist-"));
afterAll(() => rmSync(out, { recursive: true, force: true }));

/** The build of package.json's `build` script, into `outdir`. */
function build(outdir: string): void {
  const manifest = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as { scripts: { build: string } };
  const args = manifest.scripts.build
    .replace(/^rm -rf dist && /, "")
    .split(/\s+/)
    .slice(1);
  const at = args.indexOf("--outdir");
  args[at + 1] = outdir;
  const done = Bun.spawnSync([process.execPath, ...args], { cwd: REPO_ROOT, stdout: "pipe", stderr: "pipe" });
  if (done.exitCode !== 0) throw new Error(`build failed: ${done.stderr.toString()}`);
}

/**
 * Imports of optional packages that the bundled Redis client makes only inside a function the
 * store never calls (its `digest()`), in a `try`: left out, they fail that function alone.
 */
const OPTIONAL_IMPORTS = new Set(["@node-rs/xxhash"]);

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
    // The build is minified: a real import is `from"x"`, `import"x"` or `import("x")`, with no space
    // (text such as `… from "0"` in a message is not one).
    const imported = [...text.matchAll(/(?:\bfrom|\bimport\(?)"([^"]+)"/g)].map((match) => match[1]!);
    // A bundled CommonJS package (the Redis client) requires built-ins by their bare names.
    const required = [...text.matchAll(/\brequire\("([^"]+)"\)/g)].map((match) => match[1]!);
    const ownChunk = (name: string) => /^\.\/[\w-]+\.js$/.test(name) && files.includes(name.slice(2));
    expect(imported.length + required.length).toBeGreaterThan(0);
    expect(
      [...imported, ...required].filter(
        (name) => !name.startsWith("node:") && !isBuiltin(name) && !ownChunk(name) && !OPTIONAL_IMPORTS.has(name),
      ),
    ).toEqual([]);
  });
});
