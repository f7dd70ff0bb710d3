/**
 * Worker profiles in the real Pi 1.6 CLI (`--mode rpc`), on each host: a profile file in the
 * person's pi-tasks home (front matter: description, grant; body: instructions) is listed by
 * agent_task_workers with the built-in implementer and reviewer; `agent_task_spawn {profile}` starts
 * a worker whose system prompt carries the profile's instructions, and the tasks sent to it carry
 * the profile's grant (its `bash` is refused); an unknown profile is INVALID_PROFILE and starts nothing.
 * Then the relay restarts: the worker binds a fresh endpoint, the origin's model finds it with
 * agent_task_workers, and the task it sends there carries the profile's grant still.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually } from "../../testkit/async.ts";
import { type RelayProcess, REPO_ROOT, startRelayProcess } from "../../testkit/relay-process.ts";
import { describeOnHosts, type PiHost } from "../helpers/host-kit.ts";
import { allSeen, callCount, called, field, lastSeen, toolCalls, usePiFixture } from "../helpers/pi-kit.ts";
import type { RpcRecord, ScriptReply, ScriptTurn } from "../helpers/pi-process.ts";
import { waitForEndpoint } from "../../testkit/session-control.ts";
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

/** The relay the Pis use now: the fixture's, until a scenario restarts it on the same port. */
let current: RelayProcess | undefined;

/** Restarts the relay on its port: every session's registration is gone, each Pi binds anew. */
async function restartRelay(): Promise<void> {
  const relay = current ?? fx.relay;
  await relay.stop();
  current = await startRelayProcess({ port: relay.port });
  const started = current;
  fx.defer(() => started.stop());
}

/** The taskEndpoint `agent_task_workers` lists for `session` in the newest listing the model saw. */
function listedEndpoint(turn: ScriptTurn, session: string): unknown {
  const line = lastSeen(turn, "## sessions on the relay")
    ?.split("\n")
    .find((text) => text.startsWith(`- ${session} `));
  const json = line?.slice(line.indexOf("taskEndpoint ") + "taskEndpoint ".length);
  return json === undefined ? undefined : JSON.parse(json);
}

/**
 * The origin's model: lists workers, tries an unknown profile, spawns the checker, sends it a task
 * and acknowledges it; after the relay restarted, it looks the checker up again (a new endpoint),
 * sends it a second task, acknowledges that too and stops the worker.
 */
function profiledOrigin(host: PiHost): (turn: ScriptTurn) => ScriptReply {
  const checker = `checker-${host}`;
  return (turn) => {
    if (!called(turn, "agent_task_workers")) return { tools: [{ name: "agent_task_workers", arguments: {} }] };
    if (!called(turn, "agent_task_spawn", "nobody"))
      return { tools: [{ name: "agent_task_spawn", arguments: { name: `nobody-${host}`, profile: "nobody" } }] };
    if (!called(turn, "agent_task_spawn", "checker"))
      return { tools: [{ name: "agent_task_spawn", arguments: { name: checker, profile: "checker" } }] };
    const endpoint = field(lastSeen(turn, "## worker started"), "taskEndpoint");
    if (endpoint === undefined) return { text: "no worker" };
    if (!called(turn, "agent_task_send"))
      return { tools: [{ name: "agent_task_send", arguments: { to: JSON.parse(endpoint), task: "Check the files." } }] };
    const taskId = field(lastSeen(turn, "## task completed"), "taskId");
    if (taskId === undefined) return { text: "waiting" };
    const acks = callCount(turn, "agent_task_ack");
    if (acks === 0) return { tools: [{ name: "agent_task_ack", arguments: { taskId } }] };
    if (lastSeen(turn, "Check again after the restart") === undefined) return { text: "checked once" };
    if (callCount(turn, "agent_task_workers") < 2) return { tools: [{ name: "agent_task_workers", arguments: {} }] };
    if (callCount(turn, "agent_task_send") < 2)
      return { tools: [{ name: "agent_task_send", arguments: { to: listedEndpoint(turn, checker), task: "Check the files again." } }] };
    if (allSeen(turn, "## task completed").length < 2) return { text: "waiting again" };
    if (acks < 2) return { tools: [{ name: "agent_task_ack", arguments: { taskId } }] };
    if (!called(turn, "agent_task_stop")) return { tools: [{ name: "agent_task_stop", arguments: { name: checker } }] };
    return { text: "done" };
  };
}

async function profiled(host: PiHost) {
  const origin = fx.pi({
    host,
    session: `profile-origin-${host}`,
    home: homeWithProfile(),
    env: { PI_TASKS_WORKER_SCRIPT: WORKER_SCRIPT },
    brain: profiledOrigin(host),
  });
  origin.prompt("Check the files with a checker.");
  const acked = (record: RpcRecord) => record.type === "tool_execution_end" && record.toolName === "agent_task_ack";
  await eventually(() => origin.records.find(acked), 75_000, 50);
  // The relay restarts: both Pis bind fresh endpoints; the checker's profile grant must follow it.
  const url = (current ?? fx.relay).url;
  const checkerBefore = await waitForEndpoint(url, `checker-${host}`);
  const originBefore = await waitForEndpoint(url, `profile-origin-${host}`);
  await restartRelay();
  await waitForEndpoint(url, `checker-${host}`, { not: checkerBefore.id, timeoutMs: 45_000 });
  await waitForEndpoint(url, `profile-origin-${host}`, { not: originBefore.id, timeoutMs: 45_000 });
  origin.prompt("Check again after the restart.");
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
    const completed = origin.customMessages().filter((message) => String(message.content).startsWith("## task completed"));
    expect(String(completed[0]?.content)).toContain("instructions seen; bash refused by the grant");
  });

  test("after a relay restart the worker has a new endpoint, and a task sent to it there still carries the profile's grant", async () => {
    const { origin, stopped } = await run;
    expect(stopped).toBeDefined();
    const sent = toolCalls(origin, "agent_task_send");
    expect(sent.map((call) => call.isError)).toEqual([false, false]);
    expect(sent[1]!.args.to).not.toEqual(sent[0]!.args.to);
    const completed = origin.customMessages().filter((message) => String(message.content).startsWith("## task completed"));
    expect(completed).toHaveLength(2);
    expect(String(completed[1]!.content)).toContain("instructions seen; bash refused by the grant");
  });
});
