/**
 * A workspace per worker in the real Pi 1.6 CLI (`--mode rpc`), on each host: the origin's model
 * spawns a worker in a git project, asking nothing about workspaces (issue 37: one of its own by
 * default), while the person has an uncommitted edit; the worker writes and tests hello.txt in its
 * own worktree, which starts from the person's edit (the project's tree stays untouched); its completed result names the branch and
 * what changed; stopping it keeps the worktree, because it holds unmerged work, and says how to
 * merge or remove it.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { eventually } from "../../testkit/async.ts";
import { REPO_ROOT } from "../../testkit/relay-process.ts";
import { gitProject, removeProjects } from "../helpers/git-project.ts";
import { describeOnHosts, type PiHost } from "../helpers/host-kit.ts";
import { toolCalls, usePiFixture, worktreeOriginBrain } from "../helpers/pi-kit.ts";
import type { RpcRecord } from "../helpers/pi-process.ts";

setDefaultTimeout(90_000);

const fx = usePiFixture();
const WORKER_SCRIPT = join(REPO_ROOT, "src", "demo", "scenarios", "demo-worker.ts");
afterAll(removeProjects);

const isStopped = (record: RpcRecord) => record.type === "tool_execution_end" && record.toolName === "agent_task_stop";

async function inWorktree(host: PiHost) {
  const cwd = gitProject();
  // The person's edit, not committed: the worker starts from it.
  writeFileSync(join(cwd, "README.md"), "project, being edited\n");
  const name = `tree-${host}`;
  // Whether the project's own tree held hello.txt when the worker's result arrived (it must not).
  let inProjectAtCompletion: boolean | undefined;
  const origin = fx.pi({
    host,
    cwd,
    session: `tree-origin-${host}`,
    env: { PI_TASKS_WORKER_SCRIPT: WORKER_SCRIPT },
    brain: worktreeOriginBrain(name, {
      apply: true,
      last: "done",
      onCompleted: () => {
        inProjectAtCompletion ??= existsSync(join(cwd, "hello.txt"));
      },
    }),
  });
  origin.prompt("Delegate the hello task to a worker.");
  // Polled (not a record listener): the scenario's last step is the stop, whatever comes after it.
  const stopped = await eventually(() => origin.records.find(isStopped), 75_000, 50);
  return { origin, cwd, stopped, inProjectAtCompletion };
}

describeOnHosts("a worktree per worker", (host) => {
  let run: ReturnType<typeof inWorktree>;
  beforeAll(() => {
    run = inWorktree(host);
    run.catch(() => undefined);
  });

  test("the worker works in its own worktree on a new branch; the project's tree is untouched", async () => {
    const { origin, inProjectAtCompletion } = await run;
    const spawned = toolCalls(origin, "agent_task_spawn")[0]!;
    expect(spawned.isError).toBe(false);
    expect(spawned.text).toMatch(/- worktree: \S+ on branch pi-tasks\/tree-\w+-\w+/);
    expect(inProjectAtCompletion).toBe(false);
  });

  test("the result carries the change as a patch; agent_task_apply brings it into the origin's checkout", async () => {
    const { origin, cwd } = await run;
    const completed = origin.customMessages().find((message) => String(message.content).startsWith("## task completed"));
    expect(String(completed?.content)).toContain("call agent_task_apply");
    const applied = toolCalls(origin, "agent_task_apply")[0]!;
    expect(applied.isError).toBe(false);
    expect(applied.text).toContain("a patch (git apply)");
    expect(readFileSync(join(cwd, "hello.txt"), "utf8")).toContain("Hello from pi-tasks");
  });

  test("its completed result names the branch and what changed", async () => {
    const { origin } = await run;
    const completed = origin.customMessages().find((message) => String(message.content).startsWith("## task completed"));
    const text = String(completed?.content);
    expect(text).toMatch(/"workspace"/);
    expect(text).toMatch(/pi-tasks\/tree-/);
    expect(text).toContain("hello.txt");
  });

  test("stopping the worker keeps its worktree (unmerged work) and says how to merge or remove it", async () => {
    const { stopped, origin } = await run;
    expect(stopped).toBeDefined();
    const stop = toolCalls(origin, "agent_task_stop")[0]!;
    expect(stop.text).toMatch(/is kept: it has uncommitted changes/);
    expect(stop.text).toMatch(/git merge pi-tasks\/tree-/);
    const kept = stop.text.match(/Its worktree (\S+) /)?.[1];
    expect(kept !== undefined && existsSync(join(kept, "hello.txt"))).toBe(true);
    expect(readFileSync(join(kept!, "README.md"), "utf8")).toBe("project, being edited\n");
  });
});
