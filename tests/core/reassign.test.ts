/**
 * reassignTask against the real relay (started through its CLI; it advertises successor-v1).
 *
 * The worker's lifetime ends and its Pi session binds again (`session.rebind()`: same caller
 * session, new generation, new endpoint id). The origin learns of the loss only when a send to the
 * old endpoint is refused with TARGET_NOT_REGISTERED (quarantined); then `reassignTask` resolves the
 * successor, moves the task and ships an assignment carrying `{task, event, history}` to the new
 * worker lifetime (a fresh TaskCore with a fresh store on the rebound session).
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { createTaskCore, type TaskCore, coreInternals } from "../../src/core/task-core.ts";
import { processLocalTrust, type TrustOptions } from "../../src/core/trust.ts";
import { assignmentBytes } from "../../src/core/envelopes.ts";
import { endpointKey } from "../../src/protocol/endpoint.ts";
import { maxRelayPayloadBytes, maxTaskTextChars, defaultTaskTimeoutMs } from "../../src/protocol/limits.ts";
import { RELAY_ID, RELAY_PROFILE, TASK_PROTOCOL_VERSION } from "../../src/protocol/names.ts";
import type { TaskEndpoint, TaskEvent } from "../../src/protocol/schemas.ts";
import { requestEnvelopes } from "../../src/protocol/wire.ts";
import { createTaskStore } from "../../src/store/task-store.ts";
import { settle } from "../../testkit/drain.ts";
import { clearEnvelope, clearPayload, isHello } from "../../testkit/sealed.ts";
import { generateIdentity } from "../../src/trust/keys.ts";
import { closeParties, createParty, type Party } from "../../testkit/party.ts";
import { failure } from "../../testkit/async.ts";
import { eventsOf, expectCode, receiptStages, requestsOf, sentEnvelopes, trustOf } from "../helpers/core-kit.ts";
import { createMemoryHost, type MemoryHost } from "../../testkit/memory-host.ts";
import { useRelayFixture } from "../helpers/relay-fixture.ts";

setDefaultTimeout(10_000);

const fx = useRelayFixture({ proxy: true });

async function party(trust?: TrustOptions): Promise<Party> {
  const created = await createParty({ url: fx.proxy.url, requestTimeoutMs: 4_000, ...(trust === undefined ? {} : { trust }) });
  fx.defer(() => closeParties([created]));
  return created;
}

interface Successor {
  readonly core: TaskCore;
  readonly host: MemoryHost;
  readonly endpoint: TaskEndpoint;
  readonly name: string;
}

/** Ends the worker's lifetime and binds its session again: a new generation and endpoint. */
async function rebindWorker(worker: Party, prepare?: (core: TaskCore) => void): Promise<Successor> {
  await worker.core.close();
  const binding = await coreInternals(worker.core).session.rebind();
  const host = createMemoryHost();
  const core = createTaskCore({ store: createTaskStore(), session: coreInternals(worker.core).session, host });
  prepare?.(core);
  fx.defer(() => core.close());
  return { core, host, endpoint: binding.endpoint, name: worker.name };
}

/** The origin tries to reach the old endpoint: the relay refuses, the send is quarantined. */
async function loseTarget(origin: Party, taskId: string, message = "are you still there?"): Promise<void> {
  const error = await failure(origin.core.message({ taskId, type: "information", message }));
  expectCode(error, "TARGET_NOT_REGISTERED");
}

function asParty(successor: Successor): Party {
  return { name: successor.name, core: successor.core, host: successor.host };
}

/** An origin (this process's identity, or `originTrust`) whose task its worker holds. */
async function setup(task = "work that will move", originTrust?: TrustOptions) {
  const origin = await party(originTrust);
  const worker = await party();
  const created = await origin.core.createTask({ to: worker.core.endpoint()!, task });
  await settle([origin, worker]);
  expect(worker.core.getTask(created.taskId).status).toBe("active");
  return { origin, worker, taskId: created.taskId, oldTarget: worker.core.endpoint()! };
}

// -------------------------------------------------------------------------------------------------

describe("reassignTask refusals", () => {
  test("refused without a TARGET_NOT_REGISTERED quarantine for the current target; NOT_ORIGIN for the worker", async () => {
    const { origin, worker, taskId, oldTarget } = await setup();
    const resolvesBefore = requestsOf(fx.proxy, origin.name, "resolve").length;
    const refused = await failure(origin.core.reassignTask(taskId));
    expectCode(refused, "REASSIGNMENT_REFUSED");
    expect(refused.retryable).toBe(false);
    expect(refused.details.taskId).toBe(taskId);
    expect(typeof refused.details.reason).toBe("string");
    expect(origin.core.getTask(taskId).target).toEqual(oldTarget);
    expect(eventsOf(origin.core.getTask(taskId), "task.reassigned")).toEqual([]);
    expect(requestsOf(fx.proxy, origin.name, "resolve")).toHaveLength(resolvesBefore);

    expectCode(await failure(worker.core.reassignTask(taskId)), "NOT_ORIGIN");
    expectCode(await failure(origin.core.reassignTask(crypto.randomUUID())), "UNKNOWN_TASK");
  });

  test("a quarantine for another reason is no evidence of a lost target, even when the target is lost", async () => {
    const { origin, worker, taskId, oldTarget } = await setup();
    await rebindWorker(worker);
    // The relay refuses the send to the (really lost) target with a different blocked-delivery code.
    fx.proxy.push({
      operation: "send",
      kind: "reply",
      status: 409,
      body: {
        ok: false,
        profile: RELAY_PROFILE,
        epoch: fx.relay.epoch,
        error: { code: "ENVELOPE_CONFLICT", message: "conflict", retryable: false },
      },
      when: (request) => (request.body as any).callerSession === origin.name,
    });
    expectCode(await failure(origin.core.message({ taskId, type: "information", message: "conflicting" })), "ENVELOPE_CONFLICT");
    expect(
      coreInternals(origin.core)
        .store.listQuarantine()
        .map((entry) => [entry.errorCode, entry.targetKey]),
    ).toEqual([["ENVELOPE_CONFLICT", endpointKey(oldTarget)]]);
    const refused = await failure(origin.core.reassignTask(taskId));
    expectCode(refused, "REASSIGNMENT_REFUSED");
    expect(origin.core.getTask(taskId).target).toEqual(oldTarget);
    expect(eventsOf(origin.core.getTask(taskId), "task.reassigned")).toEqual([]);
    // With TARGET_NOT_REGISTERED evidence the same task can then move.
    await loseTarget(origin, taskId);
    const moved = await origin.core.reassignTask(taskId);
    expect(moved.previousTarget).toEqual(oldTarget);
  });

  test("refused while the lost target has no live successor; allowed once its session binds again", async () => {
    const { origin, worker, taskId, oldTarget } = await setup();
    // The worker's session ends without a successor (disconnect, no new generation yet).
    await worker.core.close();
    await coreInternals(worker.core).session.disconnect();
    await loseTarget(origin, taskId);
    const refused = await failure(origin.core.reassignTask(taskId));
    expectCode(refused, "REASSIGNMENT_REFUSED");
    expect(refused.details.cause).toBe("TARGET_NOT_REGISTERED");
    expect(origin.core.getTask(taskId).target).toEqual(oldTarget);
    expect(eventsOf(origin.core.getTask(taskId), "task.reassigned")).toEqual([]);
    // The same Pi session binds again: the retired endpoint now resolves to its successor.
    const binding = await coreInternals(worker.core).session.rebind();
    const host = createMemoryHost();
    const successor = createTaskCore({ store: createTaskStore(), session: coreInternals(worker.core).session, host });
    fx.defer(() => successor.close());
    const moved = await origin.core.reassignTask(taskId);
    expect(moved.target).toEqual(binding.endpoint);
    await settle([origin, { name: worker.name, core: successor, host }]);
    expect(host.insertedIds()).toEqual([moved.eventId]);
  });

  // A second key this identity trusts is no more the lost worker than a stranger is.
  const taker = generateIdentity().identity;
  for (const intruder of [
    { who: "a stranger (a key nobody paired)", paired: false },
    { who: "a paired peer that is not the worker (a second trusted key)", paired: true },
  ]) {
    test(`${intruder.who} that took the lost worker's name is its successor, but proves another key: nothing of the task reaches it`, async () => {
      // Guards proofs.ts carriageFor: a task expecting the lost worker's key (expectedWorkerKey) waits
      // for that key, whatever else this identity trusts.
      const self = processLocalTrust().identity;
      const originTrust = intruder.paired ? trustOf(self, { carol: taker }) : undefined;
      const { origin, worker, taskId } = await setup("the task text a stranger must never read", originTrust);
      await worker.core.close();
      await coreInternals(worker.core).session.disconnect();
      await loseTarget(origin, taskId);
      // Its lease gone, the name is free: the intruder registers under it.
      const squatter = await createParty({
        url: fx.proxy.url,
        name: worker.name,
        requestTimeoutMs: 4_000,
        trust: intruder.paired ? trustOf(taker, { alice: self }) : { identity: taker, peerName: () => undefined },
      });
      fx.defer(() => closeParties([squatter]));
      // What the orphan notice suggests (and PI_TASKS_AUTO_REASSIGN does): reassign to the successor.
      const moved = await origin.core.reassignTask(taskId);
      expect(moved.target).toEqual(squatter.core.endpoint()!);
      expect(moved.delivery).toBe("pending");
      // What the board says of it: waiting for the new target to prove the key (a healthy wait, named).
      expect(origin.core.waitingMail(taskId)).toEqual([
        { envelopeId: moved.envelopeId, purpose: "assignment", cause: "proof", reason: "waiting for the target to prove who it is" },
      ]);
      for (let round = 0; round < 3; round += 1) {
        await squatter.core.refresh();
        await origin.core.refresh();
      }
      // The intruder answered the hello with its own key, not the worker's: it got hellos only.
      const toSquatter = fx.proxy
        .requests()
        .filter((request) => request.operation === "send" && (request.body as any).envelope?.target?.id === squatter.core.endpoint()!.id);
      expect(toSquatter.length).toBeGreaterThan(0);
      expect(toSquatter.every((request) => isHello((request.body as any).envelope))).toBe(true);
      // Of all the task mail the origin sent, nothing opens with the intruder's key.
      const taskMail = requestsOf(fx.proxy, origin.name, "send")
        .flatMap((request) => requestEnvelopes(request.body) as any[])
        .filter((envelope) => !isHello(envelope) && envelope.payload.taskId === taskId);
      expect(taskMail.length).toBeGreaterThan(0);
      expect(taskMail.filter((envelope) => clearPayload(envelope.payload, taker) !== undefined)).toEqual([]);
      expect(squatter.core.listTasks()).toEqual([]);
      expect(origin.core.getTask(taskId)).toMatchObject({ status: "active", deliveryEvidence: { relayAcceptance: "pending" } });
    });
  }

  test("refused when the task is no longer active, even with a lost target", async () => {
    const { origin, worker, taskId } = await setup();
    await rebindWorker(worker);
    await loseTarget(origin, taskId);
    const cancelled = await origin.core.cancel({ taskId });
    expect(cancelled.delivery).toBe("blocked");
    const refused = await failure(origin.core.reassignTask(taskId));
    expectCode(refused, "REASSIGNMENT_REFUSED");
    expect(refused.details.status).toBe("cancelled");
    expect(eventsOf(origin.core.getTask(taskId), "task.reassigned")).toEqual([]);
  });
});

// -------------------------------------------------------------------------------------------------

describe("reassignTask to the successor lifetime", () => {
  test("moves the task, presents task.reassigned at the origin, and the new lifetime records the assignment with its history", async () => {
    const { origin, worker, taskId, oldTarget } = await setup("the original task text");
    await worker.core.message({ taskId, type: "information", message: "started on it" });
    await settle([origin, worker]);
    const successor = await rebindWorker(worker);
    expect(successor.endpoint.id).not.toBe(oldTarget.id);
    await loseTarget(origin, taskId, "lost message");
    const quarantine = coreInternals(origin.core).store.listQuarantine();
    expect(quarantine.map((entry) => [entry.errorCode, entry.targetKey])).toEqual([["TARGET_NOT_REGISTERED", endpointKey(oldTarget)]]);

    const result = await origin.core.reassignTask(taskId);
    expect(result).toMatchObject({ taskId, previousTarget: oldTarget, target: successor.endpoint, historyTruncated: false });
    const view = origin.core.getTask(taskId);
    expect(view.target).toEqual(successor.endpoint);
    expect(view.status).toBe("active");
    const reassigned = eventsOf(view, "task.reassigned");
    expect(reassigned.map((event) => event.eventId)).toEqual([result.eventId]);
    expect(reassigned[0]!.payload).toEqual({ task: "the original task text", previousTarget: oldTarget });
    expect(reassigned[0]!.target).toEqual(successor.endpoint);

    // The assignment envelope: {task, event, history} to the successor; no origin-local events.
    const envelope = clearEnvelope(coreInternals(origin.core).store.getEnvelope(result.envelopeId)!);
    expect(envelope.target).toEqual(successor.endpoint);
    expect(envelope.payload.kind).toBe("assignment");
    const inner = envelope.payload.payload as {
      task: { target: TaskEndpoint };
      event: TaskEvent;
      history: TaskEvent[];
      historyTruncated?: boolean;
    };
    expect(inner.task.target).toEqual(successor.endpoint);
    expect(inner.event.eventId).toBe(result.eventId);
    expect(inner.historyTruncated).toBeUndefined();
    const expectedHistory = view.events.filter((event) => event.type !== "task.delivery_receipt" && event.eventId !== result.eventId);
    expect(inner.history.map((event) => event.type)).toEqual(["task.created", "task.information", "task.information"]);
    expect(inner.history).toEqual(expectedHistory);
    // Nothing of the task leaves before the successor proves its key (a stranger could hold the name).
    expect(result.delivery).toBe("pending");
    expect(sentEnvelopes(fx.proxy, origin.name).filter((sent) => sent.envelopeId === result.envelopeId)).toHaveLength(0);
    await successor.core.refresh();
    await origin.core.refresh();
    expect(sentEnvelopes(fx.proxy, origin.name).filter((sent) => sent.envelopeId === result.envelopeId)).toHaveLength(1);

    // Presented locally at the origin (a visible local item), never echoed back through the relay.
    await origin.core.refresh();
    expect(origin.host.inserted.filter((item) => item.eventId === result.eventId).map((item) => item.kind)).toEqual(["local"]);

    // The new worker lifetime, busy at first: it records the assignment and says so.
    successor.host.busy = true;
    await successor.core.refresh();
    await origin.core.refresh();
    let evidence = origin.core.getTask(taskId).deliveryEvidence;
    expect(receiptStages(origin.core.getTask(taskId), result.eventId)).toEqual(["receiver_recorded:confirmed"]);
    expect(evidence.receiverReceipt).toBe("confirmed");
    expect(evidence.piInsertion).toBe("not_confirmed");
    const held = successor.core.getTask(taskId);
    expect(held.role).toBe("worker");
    expect(held.target).toEqual(successor.endpoint);
    expect(held.status).toBe("active");
    expect(held.events.map((event) => event.eventId)).toEqual([...expectedHistory.map((event) => event.eventId), result.eventId]);

    successor.host.busy = false;
    await settle([origin, asParty(successor)]);
    // settle() stops when no core has local work; the last receipt may still wait at the relay.
    await origin.core.refresh();
    expect(successor.host.inserted.map((item) => item.event.type)).toEqual(["task.reassigned"]);
    expect(successor.host.wakes.flat().map((item) => item.eventId)).toEqual([result.eventId]);
    evidence = origin.core.getTask(taskId).deliveryEvidence;
    expect(evidence).toMatchObject({
      receiverReceipt: "confirmed",
      piInsertion: "confirmed",
      wakeAcceptance: "confirmed",
      modelExecution: "not_evidenced",
    });

    // The successor is now the participant: its completion is canonical at the origin.
    await successor.core.done({ taskId, status: "completed", summary: "finished after the move" });
    await settle([origin, asParty(successor)]);
    expect(origin.core.getTask(taskId).status).toBe("completed");
    expect(successor.core.getTask(taskId).status).toBe("completed");
    // One loss allows one reassignment.
    expectCode(await failure(origin.core.reassignTask(taskId)), "REASSIGNMENT_REFUSED");
  });

  test("a lifetime that already holds the task follows the reassignment and skips carried events it holds", async () => {
    const { origin, worker, taskId, oldTarget } = await setup("known task");
    // What the old lifetime held, handed to the next one (a worker that kept its task state).
    const kept = coreInternals(worker.core).store.getStoredTask(taskId)!;
    const keptEvents = [...coreInternals(worker.core).store.getEvents(taskId)];
    expect(keptEvents.map((event) => event.type)).toEqual(["task.created"]);
    const successor = await rebindWorker(worker, (core) =>
      coreInternals(core).store.transaction(() => {
        coreInternals(core).store.putTask(kept.record, "worker");
        for (const event of keptEvents) coreInternals(core).store.appendEvent(event);
      }),
    );
    await loseTarget(origin, taskId);
    const result = await origin.core.reassignTask(taskId);
    let appended = 0;
    successor.core.onChange(() => (appended = coreInternals(successor.core).store.stats().events));
    await settle([origin, asParty(successor)]);
    const view = successor.core.getTask(taskId);
    expect(view.target).toEqual(successor.endpoint);
    expect(view.target).not.toEqual(oldTarget);
    const ids = view.events.map((event) => event.eventId);
    expect(new Set(ids).size).toBe(ids.length);
    expect(view.events.map((event) => event.type)).toEqual(["task.created", "task.information", "task.reassigned"]);
    expect(view.events[0]).toEqual(keptEvents[0]!);
    expect(appended).toBe(3);
    expect(successor.host.insertedIds()).toEqual([result.eventId]);
  });

  test("two concurrent reassignments: exactly one succeeds, the other is REASSIGNMENT_REFUSED", async () => {
    const { origin, worker, taskId } = await setup();
    const successor = await rebindWorker(worker);
    await loseTarget(origin, taskId);
    const outcomes = await Promise.allSettled([origin.core.reassignTask(taskId), origin.core.reassignTask(taskId)]);
    const fulfilled = outcomes.filter((outcome) => outcome.status === "fulfilled");
    const rejected = outcomes.filter((outcome): outcome is PromiseRejectedResult => outcome.status === "rejected");
    expect(fulfilled).toHaveLength(1);
    expect(rejected).toHaveLength(1);
    expectCode(rejected[0]!.reason, "REASSIGNMENT_REFUSED");
    const view = origin.core.getTask(taskId);
    expect(eventsOf(view, "task.reassigned")).toHaveLength(1);
    expect(view.target).toEqual(successor.endpoint);
    await successor.core.refresh();
    await origin.core.refresh();
    expect(
      sentEnvelopes(fx.proxy, origin.name).filter((sent) => sent.kind === "assignment" && sent.type === "task.reassigned"),
    ).toHaveLength(1);
    await settle([origin, asParty(successor)]);
    expect(successor.host.insertedIds()).toHaveLength(1);
  });
});

// -------------------------------------------------------------------------------------------------

describe("reassignment size bounds", () => {
  test(`history over ${maxRelayPayloadBytes} bytes keeps the newest events that fit and sets historyTruncated`, async () => {
    const { origin, worker, taskId } = await setup("short task, long conversation");
    const big = (index: number) => `${index}:`.padEnd(maxTaskTextChars, String.fromCharCode(97 + index));
    for (let index = 0; index < 4; index += 1) await origin.core.message({ taskId, type: "information", message: big(index) });
    const successor = await rebindWorker(worker);
    await loseTarget(origin, taskId);
    const result = await origin.core.reassignTask(taskId);
    expect(result.historyTruncated).toBe(true);
    const inner = clearEnvelope(coreInternals(origin.core).store.getEnvelope(result.envelopeId)!).payload.payload as {
      task: unknown;
      event: TaskEvent;
      history: TaskEvent[];
      historyTruncated?: boolean;
    };
    expect(inner.historyTruncated).toBe(true);
    const all = origin.core
      .getTask(taskId)
      .events.filter((event) => event.type !== "task.delivery_receipt" && event.eventId !== result.eventId);
    // A non-empty suffix of the history: the newest events, in order.
    expect(inner.history.length).toBeGreaterThan(0);
    expect(inner.history.length).toBeLessThan(all.length);
    expect(inner.history).toEqual(all.slice(all.length - inner.history.length));
    // It fits, sealed, and one more (older) event would not.
    const sealedBytes = (history: TaskEvent[]) =>
      assignmentBytes(taskId, { task: inner.task, event: inner.event, history, historyTruncated: true });
    expect(sealedBytes(inner.history)).toBeLessThanOrEqual(maxRelayPayloadBytes);
    const oneMore = all.slice(all.length - inner.history.length - 1);
    expect(sealedBytes(oneMore)).toBeGreaterThan(maxRelayPayloadBytes);

    await settle([origin, asParty(successor)]);
    const view = successor.core.getTask(taskId);
    expect(view.events.map((event) => event.eventId)).toEqual([...inner.history.map((event) => event.eventId), result.eventId]);
    expect(successor.host.insertedIds()).toEqual([result.eventId]);
  });

  test("a task too large to reassign even without history is PAYLOAD_TOO_LARGE and changes nothing", async () => {
    // Two-byte characters: the original assignment (task text twice) still fits, but the
    // reassignment (task text twice plus previousTarget) does not. ASCII text at the longest
    // allowed length always fits twice, so only multi-byte text can reach this bound.
    const unit = "é";
    const model = (length: number, type: string, extra: Record<string, unknown>) => {
      const endpoint = { relay: RELAY_ID, id: crypto.randomUUID() };
      const taskId = crypto.randomUUID();
      const text = unit.repeat(length);
      const now = Date.now();
      const task = {
        taskId,
        protocolVersion: TASK_PROTOCOL_VERSION,
        origin: endpoint,
        target: endpoint,
        task: text,
        createdAt: now,
        expiresAt: now + defaultTaskTimeoutMs,
        status: "active",
      };
      const event = {
        eventId: crypto.randomUUID(),
        taskId,
        type,
        sequence: "9",
        source: endpoint,
        target: endpoint,
        occurredAt: now,
        payload: { task: text, ...extra },
      };
      // Its size sealed, as the reassignment counts it (an upper bound of the exact size).
      return assignmentBytes(taskId, { task, event });
    };
    // The longest text whose original assignment fits with a little room (binary search).
    let length = 1;
    let tooLong = maxTaskTextChars + 1;
    while (tooLong - length > 1) {
      const middle = (length + tooLong) >>> 1;
      if (model(middle, "task.created", {}) <= maxRelayPayloadBytes - 48) length = middle;
      else tooLong = middle;
    }
    expect(length).toBeLessThanOrEqual(maxTaskTextChars);
    expect(model(length, "task.reassigned", { previousTarget: { relay: RELAY_ID, id: crypto.randomUUID() } })).toBeGreaterThan(
      maxRelayPayloadBytes,
    );

    const { origin, worker, taskId, oldTarget } = await setup(unit.repeat(length));
    for (let index = 0; index < 3; index += 1)
      await origin.core.message({ taskId, type: "information", message: "x".repeat(maxTaskTextChars) });
    await rebindWorker(worker);
    await loseTarget(origin, taskId);
    const before = origin.core.getTask(taskId);
    const sendsBefore = sentEnvelopes(fx.proxy, origin.name).length;
    const error = await failure(origin.core.reassignTask(taskId));
    expectCode(error, "PAYLOAD_TOO_LARGE");
    expect(error.retryable).toBe(false);
    const after = origin.core.getTask(taskId);
    expect(after.target).toEqual(oldTarget);
    expect(after.events).toEqual(before.events);
    expect(coreInternals(origin.core).store.localPresentations()).toEqual([]);
    expect(sentEnvelopes(fx.proxy, origin.name)).toHaveLength(sendsBefore);
  });
});
