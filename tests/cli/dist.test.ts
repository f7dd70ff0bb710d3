/**
 * `dist/` is the built JavaScript that pi-tasks' own processes run (the relay, the worker holder,
 * the `pi-tasks` bin): Node does not strip TypeScript under node_modules, and a git install gets no
 * build step (src/host/runtime.ts). It is committed, so it must be exactly what `npm run build` makes
 * of the sources now, and it may import nothing but Node's built-ins (what Pi's installer omits —
 * dev and peer dependencies — and Bun are not there on a user's machine).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT } from "../../testkit/relay-process.ts";

const out = mkdtempSync(join(tmpdir(), "pi-tasks-dist-"));
afterAll(() => rmSync(out, { recursive: true, force: true }));

/** The build of package.json's `build` script, into `outdir`. */
function build(outdir: string): void {
  const manifest = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as { scripts: { build: string } };
  const args = manifest.scripts.build.split(/\s+/).slice(1);
  const at = args.indexOf("--outdir");
  args[at + 1] = outdir;
  const done = Bun.spawnSync([process.execPath, ...args], { cwd: REPO_ROOT, stdout: "pipe", stderr: "pipe" });
  if (done.exitCode !== 0) throw new Error(`build failed: ${done.stderr.toString()}`);
}

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
    expect(imported.length).toBeGreaterThan(0);
    expect(imported.filter((name) => !name.startsWith("node:"))).toEqual([]);
    expect(text).not.toMatch(/\brequire\("(?!node:)/);
  });
});
