/**
 * Grants in the real Pi 1.6 CLI (`--mode rpc`), on each host: the person's default grant
 * (`PI_TASKS_GRANT`) goes with the task into the signed assignment; the worker's model calls `bash`,
 * whose commands run in an OS sandbox under the grant (bubblewrap, extensions/pi-tasks/sandbox-bash.ts:
 * issue 37 — before it, a granted bash wrote anywhere) — it writes inside its write scope, not
 * outside, and cannot read the pi-tasks home; it keeps calling tools without reporting until its
 * turn budget runs out, and the task ends `failed` with `BUDGET_EXHAUSTED`, reported to the origin.
 *
 * Before that, its first `agent_task_done` names a changed file outside its project and is refused
 * (`INVALID_RESULT_PATH`): it submitted nothing, so the worker's tools stay open to fix the result
 * or ask — its next call is judged by the grant, not locked by the gate.
 */
import { beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { waitForEndpoint } from "../../testkit/session-control.ts";
import { GRANT_VARIABLE } from "../../extensions/pi-tasks/grants.ts";
import { describeOnHosts, type PiHost } from "../helpers/host-kit.ts";
import { callCount, called, EVENT_MESSAGE, field, isCustom, lastSeen, toolCalls, usePiFixture } from "../helpers/pi-kit.ts";
import { type RpcRecord, sharedTestHome } from "../helpers/pi-process.ts";
import { describeWithPackage } from "../helpers/requires-package.ts";

setDefaultTimeout(60_000);

const fx = usePiFixture();
const GRANT = { write: ["src"], maxTurns: 8 };
/**
 * What the worker's model runs through bash, in order: inside its write scope, outside it, the
 * pi-tasks home (its key; pairing a key by writing its peers file), the network (its own relay).
 */
const COMMANDS = [
  "echo inside > src/inside.txt && echo wrote-inside",
  "echo outside > escaped.txt",
  'cat "$PI_TASKS_HOME/identity.json"',
  `echo '{"intruder":"ed25519:AAAA"}' > "$PI_TASKS_HOME/peers.json"; echo pairing-tried`,
  'port="${PI_TASKS_RELAY_URL##*:}"; exec 3<>"/dev/tcp/127.0.0.1/${port%%/*}" && echo reached-the-relay',
];

const isFailed = (record: RpcRecord) =>
  isCustom(record, EVENT_MESSAGE) && String((record.message as { content?: unknown }).content).startsWith("## task failed");

async function granted(host: PiHost) {
  const worker = fx.pi({
    host,
    session: `granted-worker-${host}`,
    worker: true,
    brain: (turn) => {
      const taskId = field(lastSeen(turn, "## task assignment"), "taskId");
      if (taskId === undefined) return { text: "nothing assigned" };
      if (!called(turn, "agent_task_done")) {
        const result = { changedFiles: ["../outside-the-project.txt"] };
        return { tools: [{ name: "agent_task_done", arguments: { taskId, status: "completed", summary: "tidied", result } }] };
      }
      const ran = callCount(turn, "bash");
      if (ran < COMMANDS.length) return { tools: [{ name: "bash", arguments: { command: COMMANDS[ran]! } }] };
      // Its tools closed (the task ended): stop.
      if (turn.messages.at(-1)?.text.includes("PI_TASK_WORKER_ASSIGNMENT_REQUIRED")) return { text: "stopped" };
      // Keeps working without reporting: its turns run out.
      return { tools: [{ name: "ls", arguments: { path: "." } }] };
    },
  });
  await Bun.write(`${worker.cwd}/src/.keep`, "");
  const to = await waitForEndpoint(fx.relay.url, `granted-worker-${host}`);
  const origin = fx.pi({
    host,
    session: `granted-origin-${host}`,
    env: { [GRANT_VARIABLE]: JSON.stringify(GRANT) },
    brain: (turn) =>
      called(turn, "agent_task_send")
        ? { text: "waiting" }
        : { tools: [{ name: "agent_task_send", arguments: { to, task: "Tidy the project." } }] },
  });
  origin.prompt("Delegate the tidying.");
  const failed = await origin.waitFor(isFailed, 40_000).catch(() => undefined);
  return { worker, origin, failed };
}

describeWithPackage("grants in the real Pi", "bwrap", "bubblewrap", () =>
  describeOnHosts("grants that only narrow", (host) => {
    let run: ReturnType<typeof granted>;
    beforeAll(() => {
      run = granted(host);
      run.catch(() => undefined);
    });

    test("the assignment carries the person's grant; bash writes inside its write scope, not outside, and cannot read the pi-tasks home", async () => {
      const { worker } = await run;
      const bash = toolCalls(worker, "bash");
      expect(bash.length).toBe(COMMANDS.length);
      expect(bash[0]!.text).toContain("wrote-inside");
      expect(await Bun.file(`${worker.cwd}/src/inside.txt`).exists()).toBe(true);
      expect(bash[1]!.isError).toBe(true);
      expect(bash[1]!.text).toContain("Read-only file system");
      expect(await Bun.file(`${worker.cwd}/escaped.txt`).exists()).toBe(false);
      expect(bash[2]!.isError).toBe(true);
      expect(bash[2]!.text).toContain("No such file or directory");
    });

    test("from inside its sandbox it can neither pair a key (the home it writes is not the real one) nor reach the network", async () => {
      const { worker } = await run;
      const bash = toolCalls(worker, "bash");
      expect(bash[3]!.text).toContain("pairing-tried");
      const peers = join(sharedTestHome(), "peers.json");
      expect(existsSync(peers) ? readFileSync(peers, "utf8") : "").not.toContain("intruder");
      expect(bash[4]!.isError).toBe(true);
      expect(bash[4]!.text).not.toContain("reached-the-relay");
      // Its own loopback: nothing listens there (the relay does, outside).
      expect(bash[4]!.text).toContain("Connection refused");
    });

    test("a refused agent_task_done (INVALID_RESULT_PATH) submitted nothing and leaves the worker's tools open", async () => {
      const { worker } = await run;
      const done = toolCalls(worker, "agent_task_done");
      expect(done.map((call) => call.isError)).toEqual([true]);
      expect(done[0]!.text).toContain("INVALID_RESULT_PATH");
      // The next call is the grant's to judge, not locked by the gate as if the task were closing.
      const next = toolCalls(worker).find((call) => call.index > done[0]!.index);
      expect(next?.name).toBe("bash");
      expect(next?.text).not.toContain("PI_TASK_WORKER_ASSIGNMENT_REQUIRED");
    });

    test("the turn budget runs out: the task ends failed with BUDGET_EXHAUSTED at the origin", async () => {
      const { worker, failed } = await run;
      expect(failed).toBeDefined();
      const text = String((failed!.message as { content?: unknown }).content);
      expect(text).toContain("BUDGET_EXHAUSTED");
      expect(text).toContain(`turns: ${GRANT.maxTurns} of ${GRANT.maxTurns}`);
      // The worker did not report by itself: its one agent_task_done was refused.
      expect(toolCalls(worker, "agent_task_done").map((call) => call.isError)).toEqual([true]);
    });
  }),
);
