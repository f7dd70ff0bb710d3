/**
 * A workspace per worker seen by the person in the real interactive Pi 1.6 TUI (tmux), on each host:
 * in a git project the origin's model spawns a worker with `worktree: true`; the person reads on the
 * screen the worktree and its new branch, then the completed result naming that branch and the file
 * it changed, then that stopping the worker keeps the worktree (unmerged work) and how to merge it.
 * The project's own tree stays untouched until the person types `/tasks apply <id>`, which brings
 * the worker's change into it.
 */
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT, type RelayProcess, startRelayProcess } from "../../testkit/relay-process.ts";
import { gitProject, removeProjects } from "../helpers/git-project.ts";
import { describeOnHosts } from "../helpers/host-kit.ts";
import { worktreeOriginBrain } from "../helpers/pi-kit.ts";
import { describeWithTmux, startTui, type Tui } from "../helpers/tui-kit.ts";

setDefaultTimeout(120_000);

const WORKER_SCRIPT = join(REPO_ROOT, "src", "demo", "scenarios", "demo-worker.ts");
let relay: RelayProcess | undefined;
afterAll(async () => {
  await relay?.stop();
  removeProjects();
});

describeWithTmux("a worktree per worker in the TUI", () => {
  describeOnHosts("the person sees the worker's branch and what it changed", (host) => {
    test("spawned in a worktree on a new branch; the result names it; stopping keeps the unmerged work", async () => {
      relay ??= await startRelayProcess();
      const cwd = gitProject();
      const name = `tui-tree-${host}`;
      let tui: Tui | undefined;
      try {
        tui = await startTui({
          host,
          cwd,
          relayUrl: relay.url,
          session: `tui-tree-origin-${host}`,
          settings: { tuiMode: "regular" },
          env: { PI_TASKS_WORKER_SCRIPT: WORKER_SCRIPT },
          brain: worktreeOriginBrain(name, { worktree: true, apply: false, last: "The worker's branch is ready to merge." }),
        });
        await tui.submit("Delegate the hello task to a worker in its own worktree.");
        await tui.waitForScreen(/ready to merge/, 90_000);
        const history = await tui.scrollback();
        expect(history).toMatch(/worktree: \S+ on branch pi-tasks\/tui-tree-/);
        const completed = history.slice(history.indexOf("task completed"));
        expect(completed).toMatch(/pi-tasks\/tui-tree-/);
        expect(completed).toContain("hello.txt");
        // The TUI wraps long lines: read the stop's words with the wrapping undone.
        const flat = history.replace(/\s+/g, " ");
        expect(flat).toMatch(/is kept: it has uncommitted changes/);
        expect(flat).toMatch(/git merge pi-tasks\/tui-tree-/);
        expect(existsSync(join(cwd, "hello.txt"))).toBe(false);
        // The person brings the worker's change into the project with /tasks apply.
        const taskId = completed.match(/taskId: ([0-9a-f-]{36})/)![1]!;
        await tui.submit(`/tasks apply ${taskId.slice(0, 8)}`);
        await tui.waitForScreen(/result applied/, 15_000);
        expect(readFileSync(join(cwd, "hello.txt"), "utf8")).toContain("Hello from pi-tasks");
      } finally {
        await tui?.stop();
      }
    });
  });
});
