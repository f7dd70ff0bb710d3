/**
 * Worker profiles in the real Pi 1.6 CLI (`--mode rpc`), on each host: a profile file in the
 * person's pi-tasks home (front matter: description, grant; body: instructions) is listed by
 * agent_task_workers with the built-in implementer and reviewer; `agent_task_spawn {profile}` starts
 * a worker whose system prompt carries the profile's instructions, and the tasks sent to it carry
 * the profile's grant (its `bash` is refused); an unknown profile is INVALID_PROFILE and starts nothing.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually } from "../../kit/async.ts";
import { REPO_ROOT } from "../../kit/relay-process.ts";
import { describeOnHosts, type PiHost } from "../helpers/host-kit.ts";
import { called, field, lastSeen, toolCalls, usePiFixture } from "../helpers/pi-kit.ts";
import type { RpcRecord } from "../helpers/pi-process.ts";
import { PROFILE_MARKER } from "./scripts/profiled-worker.ts";

setDefaultTimeout(90_000);

const fx = usePiFixture();
const WORKER_SCRIPT = join(REPO_ROOT, "tests", "e2e", "scripts", "profiled-worker.ts");
const homes: string[] = [];
afterAll(() => {
  for (const home of homes) rmSync(home, { recursive: true, force: true });
});

function homeWithProfile(): string {
  const home = mkdtempSync(join(tmpdir(), "pi-tasks-profiles-"));
  homes.push(home);
  mkdirSync(join(home, "profiles"), { recursive: true });
  writeFileSync(
    join(home, "profiles", "checker.md"),
    `---\ndescription: checks, never runs commands\ngrant:\n  bash: false\n---\n${PROFILE_MARKER}: you check what you are given.\n`,
  );
  return home;
}

const isStopped = (record: RpcRecord) => record.type === "tool_execution_end" && record.toolName === "agent_task_stop";

async function profiled(host: PiHost) {
  const origin = fx.pi({
    host,
    session: `profile-origin-${host}`,
    home: homeWithProfile(),
    env: { PI_TASKS_WORKER_SCRIPT: WORKER_SCRIPT },
    brain: (turn) => {
      if (!called(turn, "agent_task_workers")) return { tools: [{ name: "agent_task_workers", arguments: {} }] };
      if (!called(turn, "agent_task_spawn", "nobody"))
        return { tools: [{ name: "agent_task_spawn", arguments: { name: `nobody-${host}`, profile: "nobody" } }] };
      if (!called(turn, "agent_task_spawn", "checker"))
        return { tools: [{ name: "agent_task_spawn", arguments: { name: `checker-${host}`, profile: "checker" } }] };
      const endpoint = field(lastSeen(turn, "## worker started"), "taskEndpoint");
      if (endpoint === undefined) return { text: "no worker" };
      if (!called(turn, "agent_task_send"))
        return { tools: [{ name: "agent_task_send", arguments: { to: JSON.parse(endpoint), task: "Check the files." } }] };
      const taskId = field(lastSeen(turn, "## task completed"), "taskId");
      if (taskId === undefined) return { text: "waiting" };
      if (!called(turn, "agent_task_ack")) return { tools: [{ name: "agent_task_ack", arguments: { taskId } }] };
      if (!called(turn, "agent_task_stop")) return { tools: [{ name: "agent_task_stop", arguments: { name: `checker-${host}` } }] };
      return { text: "done" };
    },
  });
  origin.prompt("Check the files with a checker.");
  // Polled (not a record listener): the scenario's last step is the stop, whatever comes after it.
  const stopped = await eventually(() => origin.records.find(isStopped), 75_000, 50);
  return { origin, stopped };
}

describeOnHosts("worker profiles", (host) => {
  let run: ReturnType<typeof profiled>;
  beforeAll(() => {
    run = profiled(host);
    run.catch(() => undefined);
  });

  test("agent_task_workers lists the profile file and the built-in implementer and reviewer", async () => {
    const { origin } = await run;
    const listed = toolCalls(origin, "agent_task_workers")[0]!;
    expect(listed.text).toContain("## worker profiles");
    expect(listed.text).toMatch(/- checker — checks, never runs commands \(your model, with a grant, .*checker\.md\)/);
    expect(listed.text).toMatch(/- implementer — .*openai-codex\/gpt-5\.6-terra, built-in/);
    expect(listed.text).toMatch(/- reviewer — .*openai-codex\/gpt-5\.6-sol, with a grant, built-in/);
  });

  test("an unknown profile is INVALID_PROFILE and starts nothing", async () => {
    const { origin } = await run;
    const refused = toolCalls(origin, "agent_task_spawn").find((call) => JSON.stringify(call.args).includes("nobody"))!;
    expect(refused.isError).toBe(true);
    expect(refused.text).toContain("INVALID_PROFILE");
  });

  test("a worker spawned with the profile has its instructions, and the task sent to it carries the profile's grant", async () => {
    const { origin, stopped } = await run;
    expect(stopped).toBeDefined();
    const spawned = toolCalls(origin, "agent_task_spawn").find((call) => JSON.stringify(call.args).includes("checker"))!;
    expect(spawned.isError).toBe(false);
    expect(spawned.text).toContain("- profile: checker (tasks sent to it carry its grant)");
    const completed = origin.customMessages().find((message) => String(message.content).startsWith("## task completed"));
    expect(String(completed?.content)).toContain("instructions seen; bash refused by the grant");
  });
});
