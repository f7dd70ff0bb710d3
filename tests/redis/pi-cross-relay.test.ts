/**
 * Two machines' worth of relays, one Redis, real Pi CLIs: an origin Pi whose pi-tasks talks only to
 * relay A delegates to a worker Pi that talks only to relay B (both relays `--store` the same
 * Redis), with scripted models — the worker asks, the origin answers, the worker completes, the
 * origin acknowledges. Every event reaches each Pi once, and both stop cleanly.
 */
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { REDIS_BINARY, REDIS_PACKAGE } from "../../testkit/redis-process.ts";
import { waitForEndpoint } from "../../testkit/session-control.ts";
import { called, eventMessages, expectEachEventOnce, expectNoProblems, field, lastSeen, stopAll } from "../helpers/pi-kit.ts";
import { type PiProcess, startPi } from "../helpers/pi-process.ts";
import { useRedisRelays } from "../helpers/redis-kit.ts";
import { describeWithPackage } from "../helpers/requires-package.ts";

setDefaultTimeout(60_000);

/** How long the scenario may take from the origin's prompt to the worker's archived acknowledgement. */
const SCENARIO_MS = 30_000;

describeWithPackage("real Pi CLIs on two relays sharing one Redis", REDIS_BINARY, REDIS_PACKAGE, () => {
  const fx = useRedisRelays({ relays: 2 });
  const started: PiProcess[] = [];
  afterAll(() => stopAll(started));

  test("a Pi on relay A delegates to a Pi on relay B: question, answer, completion and acknowledgement", async () => {
    const [relayA, relayB] = fx.relays;
    const worker = startPi({
      session: "redis-worker",
      relayUrl: relayB!.url,
      worker: true,
      brain: (turn) => {
        const taskId = field(lastSeen(turn, "## task assignment"), "taskId");
        if (taskId === undefined) return { text: "nothing assigned" };
        if (!called(turn, "agent_task_message", '"question"')) {
          return {
            tools: [{ name: "agent_task_message", arguments: { taskId, type: "question", message: "Which machine should I deploy to?" } }],
          };
        }
        const answer = lastSeen(turn, "## task answer");
        if (answer === undefined) return { text: "waiting for the answer" };
        if (!called(turn, "agent_task_done")) {
          // The origin's answer is quoted: its line starts with "│ " (extensions/pi-tasks/quote.ts).
          const machine = answer
            .split("\n")
            .find((line) => line.startsWith("│ "))
            ?.slice("│ ".length);
          return { tools: [{ name: "agent_task_done", arguments: { taskId, status: "completed", summary: `deployed to ${machine}` } }] };
        }
        return { text: "finished" };
      },
    });
    started.push(worker);
    // The worker registered through relay B; relay A knows it too (one state).
    const to = await waitForEndpoint(relayA!.url, "redis-worker");
    const origin = startPi({
      session: "redis-origin",
      relayUrl: relayA!.url,
      brain: (turn) => {
        if (!called(turn, "agent_task_send"))
          return { tools: [{ name: "agent_task_send", arguments: { to, task: "Deploy the build; ask me where." } }] };
        const question = lastSeen(turn, "## task question");
        if (question !== undefined && !called(turn, "agent_task_message", '"answer"')) {
          const taskId = field(question, "taskId")!;
          return {
            tools: [
              {
                name: "agent_task_message",
                arguments: { taskId, type: "answer", inReplyTo: field(question, "eventId")!, message: "the build box" },
              },
            ],
          };
        }
        const completed = lastSeen(turn, "## task completed");
        if (completed !== undefined && !called(turn, "agent_task_ack"))
          return { tools: [{ name: "agent_task_ack", arguments: { taskId: field(completed, "taskId")! } }] };
        return { text: "ok" };
      },
    });
    started.push(origin);
    origin.prompt("Delegate the deployment.");
    await origin.waitFor((record) => record.type === "tool_execution_end" && record.toolName === "agent_task_ack", SCENARIO_MS);
    await worker.waitFor(
      (record) => record.type === "entry_appended" && JSON.stringify(record).includes("task.parent_acknowledged"),
      SCENARIO_MS,
    );

    expect(eventMessages(origin).map((message) => message.type)).toEqual(["task.question", "task.completed"]);
    expect(eventMessages(origin).find((message) => message.type === "task.completed")!.content).toContain("deployed to the build box");
    expect(eventMessages(worker).map((message) => message.type)).toEqual(["task.created", "task.answer"]);
    await expectEachEventOnce(origin, "origin");
    await expectEachEventOnce(worker, "worker");
    const codes = await stopAll(started.splice(0));
    expect(codes).toEqual([0, 0]);
    expectNoProblems(origin, "origin");
    expectNoProblems(worker, "worker");
  });
});
