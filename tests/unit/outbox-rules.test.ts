/**
 * The outbox rules and the presentation bounds at their edges, on virtual time with the in-memory
 * relay fake (unit tests only): per-target FIFO in one place, what a refused send means for its
 * envelope (quarantine, configuration hold), the wake receipt withheld while its wake is observed,
 * the pass deadline in presentation, the foreground old-work window, and evidence that a later
 * confirmation wins over an earlier blocked insertion.
 */
import { coreInternals, createCoreContext } from "../../src/core/task-core.ts";
import { describe, expect, test } from "bun:test";
import type { CoreBook } from "../../src/core/bookkeeping.ts";
import type { CoreContext } from "../../src/core/context.ts";
import { attemptSend, sendInOrder } from "../../src/core/outbox.ts";
import { createTaskWorkScope } from "../../src/core/scope.ts";
import type { TaskCore } from "../../src/core/task-core.ts";
import { TaskError } from "../../src/protocol/errors.ts";
import { configHoldInitialMs, maxConfigHoldMs, passDeadlineMs, wakeObservationMs } from "../../src/protocol/limits.ts";
import { createTaskStore, type TaskStore } from "../../src/store/task-store.ts";
import { encodeEnvelope, makeIntent } from "../../src/core/envelopes.ts";
import { createMemoryHost, type MemoryHost } from "../../testkit/memory-host.ts";
import { settleVirtually, type VirtualPair, virtualPair } from "../helpers/virtual-pair.ts";
import { deferred, failure } from "../../testkit/async.ts";
import { clearPayload } from "../../testkit/sealed.ts";

type Pair = VirtualPair;
const pair = virtualPair;
const run = settleVirtually;

type Body = { envelope?: { envelopeId?: string; payload?: unknown } };
/** The sent envelope's inner payload, opened (the mail is sealed). */
const inner = (body: Record<string, unknown>) =>
  clearPayload((body as Body).envelope?.payload)?.payload as { type?: string; payload?: Record<string, unknown> } | undefined;
const innerType = (body: Record<string, unknown>) => inner(body)?.type;
const receiptStage = (body: Record<string, unknown>) => inner(body)?.payload?.stage;
const messageText = (body: Record<string, unknown>) => inner(body)?.payload?.message;

/** Assigns one task and lets the worker present it (so it can send intents). */
async function assigned(p: Pair): Promise<string> {
  const { taskId } = await run(p.timers, p.origin.createTask({ to: p.worker.endpoint()!, task: "work" }));
  await run(p.timers, p.worker.refresh());
  await run(p.timers, p.origin.refresh());
  return taskId;
}

// -------------------------------------------------------------------------------------------------

describe("per-target FIFO, enforced in one place (attemptSend)", () => {
  function context(p: Pair, core: TaskCore, store: TaskStore<CoreBook>): CoreContext {
    return createCoreContext({ store, session: coreInternals(core).session, timers: p.timers, host: createMemoryHost() });
  }

  function queue(store: TaskStore<CoreBook>, from: TaskCore, to: TaskCore, count: number): string[] {
    const ids: string[] = [];
    for (let index = 0; index < count; index += 1) {
      const intent = makeIntent(`task-${index}`, "task.information", { message: `m${index}` });
      const envelope = encodeEnvelope(from.endpoint()!, to.endpoint()!, intent.taskId, "intent", intent, Date.now());
      store.putOutbox({
        envelopeId: envelope.envelopeId,
        taskId: intent.taskId,
        target: to.endpoint()!,
        kind: "intent",
        purpose: "intent",
        envelopeText: envelope.text,
      });
      ids.push(envelope.envelopeId);
    }
    return ids;
  }

  test("a younger envelope is deferred while an older one to the same target is pending, naming it", async () => {
    const p = await pair();
    const store = createTaskStore<CoreBook>();
    const ctx = context(p, p.worker, store);
    const [older, younger] = queue(store, p.worker, p.origin, 2);
    const scope = createTaskWorkScope({ timers: p.timers, mode: "phased" });
    const outcome = await attemptSend(ctx, scope, younger!, "scoped");
    expect(outcome.state).toBe("deferred");
    expect(outcome.state === "deferred" && outcome.error.details).toMatchObject({
      reason: "older mail to the same target is pending",
      blockedBy: older,
    });
    expect(p.relay.count("send")).toBe(0);
    // The head goes; then the younger one may.
    expect((await attemptSend(ctx, scope, older!, "scoped")).state).toBe("accepted");
    expect((await attemptSend(ctx, scope, younger!, "scoped")).state).toBe("accepted");
    scope.dispose();
  });

  test("a younger envelope waits for an older one in flight, then leaves after it", async () => {
    const p = await pair();
    const store = createTaskStore<CoreBook>();
    const ctx = context(p, p.worker, store);
    const [older, younger] = queue(store, p.worker, p.origin, 2);
    const gate = deferred();
    const order: string[] = [];
    p.relay.hook("send", async ({ body }) => {
      const id = (body as Body).envelope!.envelopeId!;
      if (id === older) await gate.promise;
      order.push(id);
    });
    const scope = createTaskWorkScope({ timers: p.timers, mode: "foreground" });
    const first = attemptSend(ctx, scope, older!, "scoped");
    const second = attemptSend(ctx, scope, younger!, "scoped");
    await p.timers.advance(10);
    expect(order).toEqual([]);
    gate.resolve();
    expect([(await first).state, (await second).state]).toEqual(["accepted", "accepted"]);
    expect(order).toEqual([older!, younger!]);
    scope.dispose();
  });

  test("sendInOrder offers older mail first and still obeys the same rule", async () => {
    const p = await pair();
    const store = createTaskStore<CoreBook>();
    const ctx = context(p, p.worker, store);
    const ids = queue(store, p.worker, p.origin, 3);
    const order: string[] = [];
    p.relay.hook("send", ({ body }) => {
      order.push((body as Body).envelope!.envelopeId!);
    });
    const scope = createTaskWorkScope({ timers: p.timers, mode: "foreground" });
    expect((await sendInOrder(ctx, scope, ids[2]!, "scoped")).state).toBe("accepted");
    expect(order).toEqual(ids);
    scope.dispose();
  });
});

// -------------------------------------------------------------------------------------------------

describe("what a refused send means for its envelope", () => {
  for (const code of ["INVALID_REQUEST", "PAYLOAD_TOO_LARGE", "A_FINAL_CODE_FROM_A_NEWER_RELAY"]) {
    test(`${code} (about the envelope, final): quarantined at once, never resent, and it blocks no younger mail`, async () => {
      const p = await pair();
      const taskId = await assigned(p);
      p.relay.hook("send", ({ body }) => {
        if (messageText(body) === "refused") throw new TaskError(code, { retryable: false });
      });
      const error = await failure(run(p.timers, p.worker.message({ taskId, type: "information", message: "refused" })));
      expect(error.code).toBe(code);
      expect(error.details.delivery).toBe("blocked");
      const quarantined = coreInternals(p.worker).store.listQuarantine();
      expect(quarantined.map((entry) => entry.errorCode)).toEqual([code]);
      // Younger mail to the same target leaves at once.
      const later = await run(p.timers, p.worker.message({ taskId, type: "information", message: "after it" }));
      expect(later.envelopeId).toBeDefined();
      // No pass ever resends the refused envelope.
      const sends = p.relay.requests.filter((request) => request.operation === "send").length;
      for (let index = 0; index < 3; index += 1) await run(p.timers, p.worker.refresh());
      expect(p.relay.requests.filter((request) => request.operation === "send").length).toBe(sends);
      expect(coreInternals(p.worker).store.pendingOutboxCount()).toBe(0);
    });
  }

  test("a configuration refusal (401) holds all relay work with a bounded backoff: nothing quarantined, nothing resent every pass, delivered once fixed", async () => {
    const p = await pair();
    const taskId = await assigned(p);
    let refusing = true;
    p.relay.hook("send", () => {
      if (refusing) throw new TaskError("RELAY_AUTH_REQUIRED");
    });
    p.relay.hook("receive", () => {
      if (refusing) throw new TaskError("RELAY_AUTH_REQUIRED");
    });
    const error = await failure(run(p.timers, p.worker.message({ taskId, type: "information", message: "held" })));
    expect(error.code).toBe("RELAY_AUTH_REQUIRED");
    expect(coreInternals(p.worker).store.listQuarantine()).toEqual([]);
    expect(coreInternals(p.worker).store.pendingOutboxCount()).toBe(1);
    // While held, passes make no relay request at all and report the hold.
    const before = p.relay.requests.length;
    for (let index = 0; index < 5; index += 1) {
      const report = await p.worker.refresh();
      expect(report.failures.get("lease")?.code).toBe("RELAY_AUTH_REQUIRED");
    }
    expect(p.relay.requests.length).toBe(before);
    // After the first hold a pass tries again; refused again, the hold doubles.
    await p.timers.advance(configHoldInitialMs);
    await run(p.timers, p.worker.refresh());
    const afterFirstRetry = p.relay.requests.length;
    expect(afterFirstRetry).toBeGreaterThan(before);
    await p.timers.advance(configHoldInitialMs);
    await run(p.timers, p.worker.refresh());
    expect(p.relay.requests.length).toBe(afterFirstRetry);
    // Fixed: the held message is delivered, byte for byte the one created.
    refusing = false;
    await p.timers.advance(maxConfigHoldMs);
    await run(p.timers, p.worker.refresh());
    expect(coreInternals(p.worker).store.pendingOutboxCount()).toBe(0);
    await run(p.timers, p.origin.refresh());
    expect(p.origin.getTask(taskId).events.some((event) => event.type === "task.information" && event.payload.message === "held")).toBe(
      true,
    );
  });
});

// -------------------------------------------------------------------------------------------------

describe("the wake receipt is withheld while its wake is observed", () => {
  /** A worker host whose wake outcome the test decides. */
  function controlledWake(host: MemoryHost) {
    const outcome = deferred<boolean>();
    let started = false;
    host.wake = () => {
      started = true;
      return outcome.promise;
    };
    return { outcome, started: () => started };
  }

  async function raceDuringWake(observed: boolean) {
    const p = await pair();
    const { taskId } = await run(p.timers, p.origin.createTask({ to: p.worker.endpoint()!, task: "work" }));
    const wake = controlledWake(p.workerHost);
    const sent: string[] = [];
    p.relay.hook("send", ({ body }) => {
      const stage = receiptStage(body);
      sent.push(innerType(body) === "task.delivery_receipt" ? `receipt:${String(stage)}` : String(innerType(body)));
    });
    const pass = p.worker.refresh();
    while (!wake.started()) await p.timers.advance(1);
    // A concurrent foreground send while the wake is being observed.
    const message = p.worker.message({ taskId, type: "information", message: "concurrent" });
    await p.timers.advance(10);
    const duringObservation = [...sent];
    wake.outcome.resolve(observed);
    await run(p.timers, Promise.all([pass, message]));
    return { duringObservation, sent };
  }

  test("observed: nothing leaves during the observation; then the receipt, then the message", async () => {
    const { duringObservation, sent } = await raceDuringWake(true);
    expect(duringObservation).toEqual([]);
    expect(sent.indexOf("receipt:wake_accepted")).toBeGreaterThanOrEqual(0);
    expect(sent.indexOf("receipt:wake_accepted")).toBeLessThan(sent.indexOf("task.information"));
  });

  test("not observed: the never-sent receipt is withdrawn (it never reaches the relay), the message still leaves", async () => {
    const { duringObservation, sent } = await raceDuringWake(false);
    expect(duringObservation).toEqual([]);
    expect(sent).not.toContain("receipt:wake_accepted");
    expect(sent).toContain("task.information");
  });
});

// -------------------------------------------------------------------------------------------------

describe("presentation keeps the pass deadline", () => {
  test(`with less than ${wakeObservationMs} ms of the pass left, visible items wait for the next pass`, async () => {
    const p = await pair();
    await run(p.timers, p.origin.createTask({ to: p.worker.endpoint()!, task: "late in the pass" }));
    // Intake is slow: by presentation, less than one wake observation is left of the pass.
    let slow = true;
    p.relay.hook("receive", async () => {
      if (slow) await p.timers.timeout(passDeadlineMs - wakeObservationMs / 2);
    });
    const report = await run(p.timers, p.worker.refresh());
    expect(p.workerHost.inserted).toEqual([]);
    expect(report.presented).toBe(0);
    slow = false;
    await run(p.timers, p.worker.refresh());
    expect(p.workerHost.inserted).toHaveLength(1);
    expect(p.workerHost.wakes).toHaveLength(1);
  });

  test("a wake that is never observed cannot push the pass past its deadline; it counts as not observed", async () => {
    const p = await pair();
    await run(p.timers, p.origin.createTask({ to: p.worker.endpoint()!, task: "never woken" }));
    p.workerHost.wake = () => new Promise<boolean>(() => undefined);
    const started = p.timers.now();
    const report = await run(p.timers, p.worker.refresh(), 10);
    expect(p.timers.now() - started).toBeLessThanOrEqual(passDeadlineMs + 10);
    expect(report.failures.get("presentation")?.details.reason).toBe("wake not observed");
  });
});

// -------------------------------------------------------------------------------------------------

describe("the foreground old-work window", () => {
  test(`older mail offered before a foreground send gets ${passDeadlineMs} ms; then the send reports a retryable deferral instead of hanging`, async () => {
    const p = await pair();
    const taskId = await assigned(p);
    // The first message's send never answers (the relay holds it).
    p.relay.hook("send", async ({ body, signal }) => {
      if (messageText(body) !== "stuck") return;
      await new Promise<void>((resolve) => signal?.addEventListener("abort", () => resolve(), { once: true }));
      throw new TaskError("ABORTED");
    });
    const stuck = p.worker.message({ taskId, type: "information", message: "stuck" }, { signal: AbortSignal.timeout(5) });
    await failure(run(p.timers, stuck));
    expect(coreInternals(p.worker).store.pendingOutboxCount()).toBe(1);
    // A new foreground message must first offer the stuck one (old work): within the window only.
    const started = p.timers.now();
    const error = await failure(run(p.timers, p.worker.message({ taskId, type: "information", message: "behind it" }), 50));
    expect(p.timers.now() - started).toBeLessThanOrEqual(passDeadlineMs + 100);
    expect(error.code).toBe("TASK_DELIVERY_DEFERRED");
    expect(error.retryable).toBe(true);
    expect(error.details.reason).toBe("older mail to the same target is pending");
  });
});

// -------------------------------------------------------------------------------------------------

describe("delivery evidence", () => {
  test("an insertion first refused, then confirmed on a later pass, ends confirmed", async () => {
    const p = await pair();
    const { taskId } = await run(p.timers, p.origin.createTask({ to: p.worker.endpoint()!, task: "insert me later" }));
    p.workerHost.refuseInsert = true;
    await run(p.timers, p.worker.refresh());
    await run(p.timers, p.origin.refresh());
    expect(p.origin.getTask(taskId).deliveryEvidence.piInsertion).toBe("blocked");
    p.workerHost.refuseInsert = false;
    await run(p.timers, p.worker.refresh());
    await run(p.timers, p.origin.refresh());
    const evidence = p.origin.getTask(taskId).deliveryEvidence;
    expect(evidence.piInsertion).toBe("confirmed");
    expect(evidence.wakeAcceptance).toBe("confirmed");
  });
});
