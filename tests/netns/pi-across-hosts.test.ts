/**
 * A result that travels as content, between real Pis on two machines (network namespaces, relays
 * sharing one Redis on a third): the worker Pi on host `b` works in a git worktree of the project
 * (the origin cannot read its files); it asks, writes and tests hello.txt and completes. Its result
 * carries the change as a patch; the origin Pi on host `a`, in its own clone of the project, applies
 * it with agent_task_apply, checks hello.txt itself and acknowledges. Each Pi has its own identity,
 * paired with the other. On each host: Pi on Bun from this checkout, and Pi on Node from a packed
 * install with no bun on its PATH.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../../testkit/relay-process.ts";
import { WORKTREE_BASE_ENV, WORKTREE_BRANCH_ENV } from "../../src/workspace/worktree.ts";
import { DEMO_GREETING } from "../../src/demo/scenarios/demo-origin.ts";
import { git, gitProject, removeProjects, scratchDir } from "../helpers/git-project.ts";
import { describeOnHosts, type PiHost } from "../helpers/host-kit.ts";
import { stopAll, toolCalls } from "../helpers/pi-kit.ts";
import { type PiProcess, type RpcRecord, startPi } from "../helpers/pi-process.ts";
import { describeWithNetns, hostEndpoint, pairedHomes, useMachines } from "../helpers/netns-kit.ts";

setDefaultTimeout(120_000);

const WORKER_SCRIPT = join(REPO_ROOT, "src", "demo", "scenarios", "demo-worker.ts");
const ORIGIN_SCRIPT = join(REPO_ROOT, "tests", "e2e", "scripts", "apply-origin.ts");
const isAcked = (record: RpcRecord) => record.type === "tool_execution_end" && record.toolName === "agent_task_ack";

describeWithNetns("a result that travels between Pis on two machines", () => {
  const machines = useMachines();
  const pis: PiProcess[] = [];
  let homes: Awaited<ReturnType<typeof pairedHomes>>;
  const runs = new Map<PiHost, ReturnType<typeof scenario>>();

  /** The project (one commit), a worktree of it on a branch (the worker's machine), and a clone (the origin's). */
  function project(): { worktree: string; checkout: string; base: string; branch: string } {
    const dir = scratchDir("pi-tasks-hosts-");
    const repo = join(dir, "repo");
    mkdirSync(repo);
    gitProject(repo);
    const base = git(repo, "rev-parse", "HEAD").stdout;
    const branch = `pi-tasks/hosts-worker-${crypto.randomUUID().slice(0, 8)}`;
    git(repo, "worktree", "add", "-q", "-b", branch, join(dir, "worktree"), base);
    spawnSync("git", ["clone", "-q", repo, join(dir, "checkout")]);
    return { worktree: join(dir, "worktree"), checkout: join(dir, "checkout"), base, branch };
  }

  async function scenario(host: PiHost) {
    const { worktree, checkout, base, branch } = project();
    const worker = startPi({
      script: WORKER_SCRIPT,
      worker: true,
      host,
      session: `hosts-worker-${host}`,
      cwd: worktree,
      home: homes.b,
      relayUrl: machines.relays.b.url,
      wrap: machines.net.host("b").wrap([]),
      env: { [WORKTREE_BRANCH_ENV]: branch, [WORKTREE_BASE_ENV]: base },
    });
    pis.push(worker);
    const to = await hostEndpoint(machines.net.host("b"), machines.relays.b.url, `hosts-worker-${host}`);
    const origin = startPi({
      script: ORIGIN_SCRIPT,
      host,
      session: `hosts-origin-${host}`,
      cwd: checkout,
      home: homes.a,
      relayUrl: machines.relays.a.url,
      wrap: machines.net.host("a").wrap([]),
      env: { PI_TASKS_DEMO_TARGET: JSON.stringify(to) },
    });
    pis.push(origin);
    origin.prompt("Delegate hello.txt to the worker on the other machine.");
    const acked = await origin.waitFor(isAcked, 90_000).catch(() => undefined);
    return { origin, checkout, acked };
  }

  beforeAll(async () => {
    homes = await pairedHomes();
  });
  afterAll(async () => {
    await stopAll(pis);
    homes?.remove();
    removeProjects();
  });

  describeOnHosts("on each host", (host) => {
    beforeAll(() => {
      const run = scenario(host);
      run.catch(() => undefined);
      runs.set(host, run);
    });

    test("the worker's patch crosses the hosts and applies in the origin's own checkout; the origin acknowledges", async () => {
      const { origin, checkout, acked } = await runs.get(host)!;
      const applied = toolCalls(origin, "agent_task_apply")[0];
      expect(applied?.isError).toBe(false);
      expect(applied?.text).toContain("a patch (git apply)");
      expect(existsSync(join(checkout, "hello.txt"))).toBe(true);
      expect(readFileSync(join(checkout, "hello.txt"), "utf8").trim()).toBe(DEMO_GREETING);
      expect(acked).toBeDefined();
      expect(origin.problems()).toEqual([]);
    });
  });
});
