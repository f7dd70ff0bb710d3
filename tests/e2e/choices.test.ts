/**
 * A question with choices in the real Pi 1.6 CLI (`--mode rpc`), on each host: the worker's model
 * asks with choices and a suggested one; the origin's model is shown the choices; the person
 * answers with `/tasks answer <id>`, which opens a select dialog (an RPC `extension_ui_request`)
 * listing the choices, the suggested one first; the picked choice reaches the worker as the answer.
 */
import { beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { waitForEndpoint } from "../../testkit/session-control.ts";
import { describeOnHosts, type PiHost } from "../helpers/host-kit.ts";
import { called, choiceWorkerBrain, EVENT_MESSAGE, field, isCustom, usePiFixture } from "../helpers/pi-kit.ts";
import type { RpcRecord } from "../helpers/pi-process.ts";

setDefaultTimeout(60_000);

const fx = usePiFixture();
const CHOICES = ["red", "forest green", "blue"];
const PICKED = "forest green";

const isEvent = (title: string) => (record: RpcRecord) =>
  isCustom(record, EVENT_MESSAGE) && String((record.message as { content?: unknown }).content).startsWith(title);
const isSelect = (record: RpcRecord) => record.type === "extension_ui_request" && record.method === "select";

async function choose(host: PiHost) {
  const worker = fx.pi({
    host,
    session: `choosing-worker-${host}`,
    worker: true,
    brain: choiceWorkerBrain(CHOICES, "blue"),
  });
  const to = await waitForEndpoint(fx.relay.url, `choosing-worker-${host}`);
  // The origin's model leaves the question to its person.
  const origin = fx.pi({
    host,
    session: `choosing-origin-${host}`,
    brain: (turn) =>
      called(turn, "agent_task_send")
        ? { text: "my person answers" }
        : { tools: [{ name: "agent_task_send", arguments: { to, task: "Paint the banner." } }] },
  });
  origin.prompt("Delegate the banner.");
  const question = await origin.waitFor(isEvent("## task question"), 30_000);
  const questionId = field(String((question.message as { content?: unknown }).content), "eventId")!;
  const from = origin.records.length;
  origin.prompt(`/tasks answer ${questionId.slice(0, 8)}`);
  const select = await origin.waitFor(isSelect, 10_000, from);
  origin.command({ type: "extension_ui_response", id: select.id, value: PICKED });
  const answered = await worker.waitFor(isEvent("## task answer"), 20_000).catch(() => undefined);
  return { question, select, answered };
}

describeOnHosts("a question with choices", (host) => {
  let run: ReturnType<typeof choose>;
  beforeAll(() => {
    run = choose(host);
    run.catch(() => undefined);
  });

  test("the origin's model is shown the choices and the suggested one", async () => {
    const { question } = await run;
    const text = String((question.message as { content?: unknown }).content);
    expect(text).toContain("choices (answer with exactly one of them, as written):");
    expect(text).toContain('  2. "forest green"');
    expect(text).toContain('- suggested: "blue"');
  });

  test("/tasks answer opens a select dialog of the choices (the suggested one first); the pick reaches the worker as the answer", async () => {
    const { select, answered } = await run;
    expect(select.options).toEqual(["blue", "red", "forest green"]);
    expect(answered).toBeDefined();
    expect(String((answered!.message as { content?: unknown }).content)).toContain(PICKED);
  });
});
