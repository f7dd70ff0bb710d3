/**
 * The OS sandbox of a granted worker's commands (src/workspace/sandbox.ts, with real bubblewrap) and
 * what a worker Pi's bash makes of its grants (extensions/pi-tasks/sandbox-bash.ts): writable only
 * inside the write scopes, the pi-tasks home and Pi's agent directory hidden, the network cut unless
 * granted; a command with single quotes reaches bash as it was written.
 */
import { afterAll, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { footerLabel } from "../../extensions/pi-tasks/footer.ts";
import { planFor, sandboxLine, sandboxWord, spawnUnderGrants } from "../../extensions/pi-tasks/sandbox-bash.ts";
import { sandboxedCommand, sandboxUnavailable } from "../../src/workspace/sandbox.ts";
import { describeWithPackage } from "../helpers/requires-package.ts";

const root = realpathSync(mkdtempSync(join(tmpdir(), "pi-tasks-sandbox-test-")));
const project = join(root, "project");
const home = join(root, "home");
mkdirSync(join(project, "src"), { recursive: true });
mkdirSync(home);
writeFileSync(join(home, "identity.json"), "the private key");
afterAll(() => rmSync(root, { recursive: true, force: true }));

function run(command: string): { status: number | null; out: string } {
  const result = spawnSync("/bin/bash", ["-c", command], { cwd: project, encoding: "utf8" });
  return { status: result.status, out: `${result.stdout}${result.stderr}` };
}

const plan = { readable: [project], writable: [join(project, "src")], hidden: [home], network: false };

describeWithPackage("the sandbox of a granted worker's commands", "bwrap", "bubblewrap", () => {
  test("writes inside a write scope succeed; outside it, the file system is read-only", () => {
    expect(run(sandboxedCommand("echo in > src/in.txt && cat src/in.txt", plan))).toEqual({ status: 0, out: "in\n" });
    const outside = run(sandboxedCommand("echo out > escaped.txt", plan));
    expect(outside.status).not.toBe(0);
    expect(outside.out).toContain("Read-only file system");
    expect(run("test -e escaped.txt; echo $?").out).toBe("1\n");
  });

  test("the hidden directories are empty inside (no key to read); /tmp is private and writable", () => {
    const read = run(sandboxedCommand(`cat ${join(home, "identity.json")}`, plan));
    expect(read.status).not.toBe(0);
    expect(read.out).toContain("No such file or directory");
    expect(run(sandboxedCommand("echo t > /tmp/scratch && cat /tmp/scratch", plan))).toEqual({ status: 0, out: "t\n" });
  });

  test("the network is cut unless the plan allows it", async () => {
    const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("reached") });
    try {
      const probe = `exec 3<>/dev/tcp/127.0.0.1/${server.port} && echo reached`;
      expect(run(sandboxedCommand(probe, plan)).out).not.toContain("reached");
      // Off the event loop's thread: the server answers while bash connects.
      const allowed = Bun.spawn(["/bin/bash", "-c", sandboxedCommand(probe, { ...plan, network: true })], { cwd: project, stdout: "pipe" });
      expect(await new Response(allowed.stdout).text()).toBe("reached\n");
    } finally {
      server.stop(true);
    }
  });

  test("a grant that restricts no writes: the project and the rest are writable, /dev and /proc are the sandbox's, the home still hidden", () => {
    const open = { ...plan, writable: ["/"] };
    expect(
      run(sandboxedCommand("echo w > anywhere.txt && cat anywhere.txt >/dev/null && ls /proc/self >/dev/null && echo ok", open)),
    ).toEqual({
      status: 0,
      out: "ok\n",
    });
    expect(run(sandboxedCommand(`cat ${join(home, "identity.json")}`, open)).status).not.toBe(0);
  });

  // Issue 37: the built-in reviewer ("reads and reports; never edits files") edited files through bash.
  test("the built-in reviewer's grant (write: []) leaves nothing writable to its commands", () => {
    const reviewer = planFor([{ write: [] }], project, { PI_TASKS_HOME: home });
    expect(reviewer.writable).toEqual([]);
    const edit = run(sandboxedCommand("echo edited > src/a.ts", reviewer));
    expect(edit.status).not.toBe(0);
    expect(edit.out).toContain("Read-only file system");
  });

  // Issue 37: reads only inside the read scopes, plus what the toolchain needs.
  test("with read scopes, only they, the write scopes and the system's directories exist inside", () => {
    writeFileSync(join(project, "README.md"), "outside the read scope");
    writeFileSync(join(project, "src", "code.ts"), "inside");
    const scoped = planFor([{ read: ["src"], write: ["src"] }], project, { PI_TASKS_HOME: home });
    expect(run(sandboxedCommand("cat src/code.ts && git --version >/dev/null && echo tools-ok", scoped))).toEqual({
      status: 0,
      out: "insidetools-ok\n",
    });
    const outside = run(sandboxedCommand("cat README.md", scoped));
    expect(outside.status).not.toBe(0);
    expect(outside.out).toContain("No such file or directory");
    // Nothing else: this checkout's own files (the runtime's directory inside it aside) are not there.
    const elsewhere = join(import.meta.dir, "..", "..", "package.json");
    expect(run(sandboxedCommand(`test -e ${elsewhere}; echo $?`, scoped)).out).toBe("1\n");
  });

  // Worktree × sandbox: a spawned worker's workspace lives in the pi-tasks home, which the sandbox
  // hides — hidden last, the worker's own project vanished inside its sandbox.
  test("a project inside a hidden directory (a worker's own workspace in the pi-tasks home) stays, the rest of the home stays hidden", () => {
    const workspace = join(home, "worktrees", "w1");
    mkdirSync(join(workspace, "src"), { recursive: true });
    writeFileSync(join(workspace, "README"), "the worker's project\n");
    const inside = { readable: [workspace], writable: [join(workspace, "src")], hidden: [home], network: false };
    const shown = spawnSync(
      "/bin/bash",
      ["-c", sandboxedCommand(`cat README && echo w > src/w.txt && cat ${join(home, "identity.json")}`, inside)],
      {
        cwd: workspace,
        encoding: "utf8",
      },
    );
    expect(shown.stdout).toBe("the worker's project\n");
    expect(shown.stderr).toContain("No such file or directory");
    expect(run(`cat ${join(workspace, "src/w.txt")}`).out).toBe("w\n");
    // Everything writable (no write scopes): the home is still hidden, the workspace still there.
    const open = { ...inside, writable: ["/"] };
    const everywhere = spawnSync("/bin/bash", ["-c", sandboxedCommand(`cat README; ls ${home}`, open)], {
      cwd: workspace,
      encoding: "utf8",
    });
    expect(everywhere.stdout).toBe("the worker's project\nworktrees\n");
    // Reading scoped to its src/: the working directory exists, src/ is there, the home's key is not.
    const scoped = { ...inside, visible: [join(workspace, "src")] };
    const read = spawnSync("/bin/bash", ["-c", sandboxedCommand(`cat src/w.txt; ls; cat ${join(home, "identity.json")}`, scoped)], {
      cwd: workspace,
      encoding: "utf8",
    });
    expect(read.stdout).toBe("w\nsrc\n");
    expect(read.stderr).toContain("No such file or directory");
  });

  test("a command with quotes, $ and newlines reaches bash as written", () => {
    expect(run(sandboxedCommand("printf '%s\\n' \"it's\" '$HOME'\necho two", plan)).out).toBe("it's\n$HOME\ntwo\n");
  });
});

test("a worker's bash: without a granted task a command runs as Pi runs it; the plan is the narrowest of its grants", () => {
  const context = { command: "ls", cwd: project, env: {} };
  expect(spawnUnderGrants(context, [], {})).toBe(context);
  const env = { PI_TASKS_HOME: home };
  const narrow = planFor([{ write: ["src", "docs"], network: true }, { write: ["src/core", "tests"] }], project, env);
  expect(narrow.writable).toEqual([join(project, "src", "core")]);
  expect(planFor([{ write: ["src", "docs"] }, { write: ["."] }], project, env).writable).toEqual([
    join(project, "src"),
    join(project, "docs"),
  ]);
  expect(narrow.network).toBe(false);
  expect(narrow.hidden).toContain(home);
  expect(planFor([{ bash: true }], project, env).writable).toEqual(["/"]);
  expect(planFor([{ network: true }], project, env).network).toBe(true);
});

test("/tasks and the footer say what holds the commands under a grant: the sandbox, the tool checks only, a refusal with its fix, or not sandboxed here", () => {
  const granted = [{ role: "worker", status: "active", events: [], grant: { write: ["src"] } }] as never;
  expect(sandboxLine({ PI_TASK_WORKER: "1" }, [])).toBeUndefined();
  expect(sandboxWord({ PI_TASK_WORKER: "1" }, [])).toBeUndefined();
  expect(sandboxLine({}, granted)).toContain("NOT sandboxed in this Pi");
  expect(sandboxWord({}, granted)).toBe("grant: commands not sandboxed");
  expect(footerLabel("w", granted, {}, undefined, sandboxWord({}, granted))).toBe("tasks: w · 1 active · grant: commands not sandboxed");
  expect(sandboxWord({ PI_TASK_WORKER: "1" }, granted)).toBe(
    sandboxUnavailable() === undefined ? "grant: sandboxed" : "grant: commands refused (no sandbox)",
  );
  if (sandboxUnavailable() !== undefined)
    expect(sandboxWord({ PI_TASK_WORKER: "1", PI_TASKS_SANDBOX: "lexical" }, granted)).toBe("grant: tool checks only");
  const line = sandboxLine({ PI_TASK_WORKER: "1" }, granted);
  expect(line).toBe(
    sandboxUnavailable() === undefined
      ? "commands under a grant: in an OS sandbox (bubblewrap)"
      : `commands under a grant: refused — ${sandboxUnavailable()}. Fix: install bubblewrap, or set PI_TASKS_SANDBOX=lexical`,
  );
});
