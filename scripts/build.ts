#!/usr/bin/env bun
/**
 * `npm run build`: `dist/`, the built JavaScript pi-tasks runs where TypeScript is not stripped — the
 * `pi-tasks` command and the worker holder (src/bin/), and the extension as Pi loads it
 * (`dist/extension.js`, from extensions/pi-tasks/extension.ts; extensions/pi-tasks/index.ts loads
 * it). One split build: what several entries share is a chunk of its own. In the extension, each
 * import of a value from a Pi host package reads it from what the loader handed over
 * (extensions/pi-tasks/pi-host.ts); a host package the loader does not hand over fails the build.
 * `--outdir D` builds into D instead (tests/cli/dist.test.ts compares the two).
 */
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { join, relative } from "node:path";
import { parseArgs } from "node:util";
import type { BunPlugin } from "bun";
import { PI_HOST_KEY, PI_HOST_PACKAGES } from "../extensions/pi-tasks/pi-host.ts";

const ROOT = join(import.meta.dir, "..");
const ENTRIES = ["src/bin/pi-tasks.ts", "src/bin/worker-host.ts", "extensions/pi-tasks/extension.ts"];
/** Where the extension's sources are, to read which host values they import. */
const SOURCE_DIRS = ["extensions", "src"];
/**
 * Optional packages the extension imports only when asked for (OpenTelemetry, extensions/pi-tasks/traces.ts):
 * never bundled into it. (The metrics library of the relay requires OpenTelemetry's API, bundled as before.)
 */
const EXTENSION_OPTIONAL = /^@opentelemetry\//;
const EXTENSION_SOURCES = join(ROOT, "extensions");

/** The names each host package's value imports take, from the sources (`import type` and `type` members aside). */
function hostImports(): Map<string, Set<string>> {
  const names = new Map<string, Set<string>>();
  const files = SOURCE_DIRS.flatMap((dir) =>
    readdirSync(join(ROOT, dir), { recursive: true, encoding: "utf8" })
      .filter((file) => file.endsWith(".ts"))
      .map((file) => join(ROOT, dir, file)),
  );
  for (const file of files)
    for (const match of readFileSync(file, "utf8").matchAll(/^import \{([^}]*)\} from "(@earendil-works\/[^"]+)";/gm)) {
      const taken = match[1]!
        .split(",")
        .map((name) => name.trim())
        .filter((name) => name !== "" && !name.startsWith("type "));
      const set = names.get(match[2]!) ?? new Set<string>();
      for (const name of taken) set.add(name.split(/\s+as\s+/)[0]!);
      names.set(match[2]!, set);
    }
  return names;
}

/** Each import of a Pi host package becomes a read of what the loader handed over. */
function piHostPlugin(): BunPlugin {
  const imports = hostImports();
  return {
    name: "pi-host",
    setup(build) {
      build.onResolve({ filter: /^@earendil-works\// }, (args) => ({ path: args.path, namespace: "pi-host" }));
      build.onResolve({ filter: EXTENSION_OPTIONAL }, (args) =>
        args.importer.startsWith(EXTENSION_SOURCES) ? { path: args.path, external: true } : undefined,
      );
      build.onLoad({ filter: /.*/, namespace: "pi-host" }, (args) => {
        if (!(PI_HOST_PACKAGES as readonly string[]).includes(args.path))
          throw new Error(`the extension imports ${args.path}, which extensions/pi-tasks/index.ts does not hand over (pi-host.ts)`);
        const names = [...(imports.get(args.path) ?? [])].sort();
        const host = `globalThis[Symbol.for(${JSON.stringify(PI_HOST_KEY)})]?.[${JSON.stringify(args.path)}]`;
        const contents = [
          `const host = ${host};`,
          `if (host === undefined) throw new Error("pi-tasks: dist/extension.js is loaded by extensions/pi-tasks/index.ts, which hands it Pi's modules");`,
          ...names.map((name) => `export const ${name} = host.${name};`),
        ].join("\n");
        return { contents, loader: "js" };
      });
    },
  };
}

const { values } = parseArgs({ options: { outdir: { type: "string" } } });
const outdir = values.outdir ?? join(ROOT, "dist");
rmSync(outdir, { recursive: true, force: true });
const result = await Bun.build({
  entrypoints: ENTRIES.map((entry) => join(ROOT, entry)),
  outdir,
  target: "node",
  splitting: true,
  naming: { entry: "[name].[ext]" },
  minify: { syntax: true, whitespace: true },
  plugins: [piHostPlugin()],
});
if (!result.success) {
  for (const log of result.logs) console.error(log);
  process.exit(1);
}
for (const output of result.outputs) console.error(`${relative(ROOT, output.path)}  ${output.size} B`);
