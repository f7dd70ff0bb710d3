/**
 * The library API as a user gets it: `npm pack` this repository, unpack the tarball into a scratch
 * project's node_modules (its dependencies linked from ours — no network), and import every entry
 * point of package.json `exports` by package name from a script run in that project. The script
 * runs a whole task on the in-memory relay through the public API only.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { BUN, REPO_ROOT } from "../../testkit/relay-process.ts";

setDefaultTimeout(60_000);

interface PackageJson {
  readonly dependencies?: Record<string, string>;
  readonly peerDependencies?: Record<string, string>;
  readonly peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  readonly exports: Record<string, string>;
  readonly files: string[];
}

let scratch: string;
let project: string;
let packed: PackageJson;

/** Links `name` and, recursively, its dependencies from this repository's node_modules. */
function linkDependency(modules: string, name: string): void {
  const target = join(modules, name);
  if (existsSync(target)) return;
  const source = join(REPO_ROOT, "node_modules", name);
  if (!existsSync(source)) throw new Error(`dependency ${name} is not installed in this repository`);
  mkdirSync(dirname(target), { recursive: true });
  symlinkSync(source, target, "dir");
  const manifest = JSON.parse(readFileSync(join(source, "package.json"), "utf8")) as PackageJson;
  for (const dependency of Object.keys(manifest.dependencies ?? {})) linkDependency(modules, dependency);
}

function run(args: string[]): { code: number; stdout: string; stderr: string } {
  const child = Bun.spawnSync(args, {
    cwd: project,
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, PI_TASKS_RELAY_URL: undefined },
  });
  return { code: child.exitCode ?? -1, stdout: child.stdout.toString(), stderr: child.stderr.toString() };
}

beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), "pi-tasks-package-"));
  const pack = Bun.spawnSync(["npm", "pack", "--json", "--pack-destination", scratch], { cwd: REPO_ROOT, stdout: "pipe", stderr: "pipe" });
  if (pack.exitCode !== 0) throw new Error(`npm pack failed: ${pack.stderr.toString()}`);
  const [{ filename }] = JSON.parse(pack.stdout.toString()) as [{ filename: string }];
  project = join(scratch, "project");
  const modules = join(project, "node_modules");
  const installed = join(modules, "pi-tasks");
  mkdirSync(installed, { recursive: true });
  const untar = Bun.spawnSync(["tar", "-xzf", join(scratch, filename), "-C", installed, "--strip-components=1"], { stderr: "pipe" });
  if (untar.exitCode !== 0) throw new Error(`tar failed: ${untar.stderr.toString()}`);
  packed = JSON.parse(readFileSync(join(installed, "package.json"), "utf8")) as PackageJson;
  const required = [
    ...Object.keys(packed.dependencies ?? {}),
    ...Object.keys(packed.peerDependencies ?? {}).filter(
      (name) => packed.peerDependenciesMeta?.[name]?.optional !== true && !name.startsWith("@earendil-works/"),
    ),
  ];
  for (const name of required) linkDependency(modules, name);
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "scratch", private: true, type: "module" }));
});

afterAll(() => {
  if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
});

test("the tarball ships the library, the extension, the CLI and the docs, and no tests, kit or bench", () => {
  const installed = join(project, "node_modules", "pi-tasks");
  for (const path of [
    "src/index.ts",
    "src/relay-server/index.ts",
    "src/conformance/index.ts",
    "extensions/pi-tasks/index.ts",
    "src/cli/main.ts",
    "dist/pi-tasks.js",
    "dist/worker-host.js",
    "docs/library.md",
    "README.md",
  ]) {
    expect({ path, shipped: existsSync(join(installed, path)) }).toEqual({ path, shipped: true });
  }
  for (const path of ["tests", "testkit", "bench"])
    expect({ path, shipped: existsSync(join(installed, path)) }).toEqual({ path, shipped: false });
  expect(Object.keys(packed.exports).sort()).toEqual([".", "./cli", "./conformance", "./extension", "./package.json", "./relay"]);
});

test("every entry point imports by package name, and a task runs end to end on the in-memory relay", () => {
  writeFileSync(
    join(project, "main.ts"),
    `
import { createTaskCore, createTaskStore, createVolatileTaskSession, createConfiguredTaskCore, createInMemoryTaskRelay, ERROR_REGISTRY, TASK_EVENT_TYPES, TaskError, limits } from "pi-tasks";
import { startRelayServer, createRelayEngine, createMemoryStore } from "pi-tasks/relay";
import { runConformance, conformanceChecks } from "pi-tasks/conformance";
import manifest from "pi-tasks/package.json";

const relay = await createInMemoryTaskRelay();
const party = async (name: string) => {
  const session = createVolatileTaskSession({ url: relay.url, fetch: relay.fetch, callerSession: name });
  const core = createTaskCore({ store: createTaskStore(), session });
  await core.connect();
  return { core, session };
};
const origin = await party("origin");
const worker = await party("worker");
const created = await origin.core.createTask({ to: worker.core.endpoint(), task: "count the files" });
const delivery = created.delivery;
await worker.core.refresh();
await origin.core.refresh();
await worker.core.refresh();
const assigned = worker.core.getTask(created.taskId).status;
await worker.core.done({ taskId: created.taskId, status: "completed", summary: "42 files" });
await origin.core.refresh();
const finished = origin.core.getTask(created.taskId).status;
let unknownTask = "";
try { origin.core.getTask("nope"); } catch (error) { unknownTask = error instanceof TaskError ? error.code : String(error); }
await origin.core.close();
await worker.core.close();
await relay.stop();
console.log(JSON.stringify({
  delivery, assigned, finished, unknownTask,
  name: manifest.name,
  functions: [createConfiguredTaskCore, startRelayServer, createRelayEngine, createMemoryStore, runConformance, conformanceChecks].map((fn) => typeof fn),
  registry: "UNKNOWN_TASK" in ERROR_REGISTRY,
  events: Object.keys(TASK_EVENT_TYPES).includes("task.created"),
  limits: typeof limits.maxInFlightRequests,
  extension: import.meta.resolve("pi-tasks/extension").endsWith("/extensions/pi-tasks/index.ts"),
  cli: import.meta.resolve("pi-tasks/cli").endsWith("/src/cli/main.ts"),
}));
`,
  );
  const result = run([BUN, "main.ts"]);
  expect({ code: result.code, stderr: result.stderr }).toEqual({ code: 0, stderr: "" });
  expect(JSON.parse(result.stdout.trim())).toEqual({
    delivery: "pending",
    assigned: "active",
    finished: "completed",
    unknownTask: "UNKNOWN_TASK",
    name: "pi-tasks",
    functions: Array(6).fill("function"),
    registry: true,
    events: true,
    limits: "number",
    extension: true,
    cli: true,
  });
});

test("the installed CLI (its built bin) answers --help from the unpacked package", () => {
  const result = run([BUN, join(project, "node_modules", "pi-tasks", "dist", "pi-tasks.js"), "--help"]);
  expect(result.code).toBe(0);
  expect(result.stdout).toContain("conformance");
});
