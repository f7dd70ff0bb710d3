/**
 * The trust gate against a malicious relay: the REAL relay behind the fault proxy, whose `rewrite`
 * rule swaps one delivery of a `receive` page (the "carrier") for an attack. Every attack rides on
 * a task between two parties that trust each other (the process identity), between a legitimate
 * message before it and one after it.
 *
 * Mail is sealed (src/trust/sealing.ts), so a relay without keys can only flip, replay or re-address
 * boxes it cannot read, or seal forgeries of its own under keys nobody paired ("sealed" below). The
 * gate behind the seal is tested too, by a relay handed the parties' seal keys ("opened"): it opens
 * the carrier, doctors it and seals it again.
 *
 * | attack                                              | relay  | victim | code              |
 * | --------------------------------------------------- | ------ | ------ | ----------------- |
 * | one byte of the sealed box flipped                  | sealed | worker | SEAL_INVALID      |
 * | an earlier sealed event replayed in another envelope| sealed | worker | REPLAYED_EVENT    |
 * | a box for another worker re-addressed here          | sealed | worker | NOT_ADDRESSED     |
 * | an assignment sealed and signed by an unpaired key  | sealed | worker | UNKNOWN_PEER      |
 * | a canonical event re-signed by an unpaired key      | opened | worker | NOT_AUTHORIZED    |
 * | a canonical event turned into a cancel              | opened | worker | SIGNATURE_INVALID |
 * | a canonical event with its signature stripped       | opened | worker | UNSIGNED_EVENT    |
 * | a worker's `completed` flipped to `failed`          | opened | origin | SIGNATURE_INVALID |
 *
 * (The parties of a test share one identity, so a box for another worker opens here and the
 * signature's addressee refuses it; between distinct identities the box itself would not open.)
 *
 * Each time: the attack is never presented, no task state changes, the victim counts it under its
 * code (and its host records it), the legitimate mail around it is presented in order, and nothing
 * stays pending locally or at the relay.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { encodeEnvelope, makeEvent } from "../../src/core/envelopes.ts";
import type { MessageResult } from "../../src/core/results.ts";
import { coreInternals, type TaskCore } from "../../src/core/task-core.ts";
import type { EnvelopeKind, SignatureBlock, TaskEndpoint, TaskRecord } from "../../src/protocol/schemas.ts";
import { generateIdentity } from "../../src/trust/keys.ts";
import { signPayload } from "../../src/trust/signing.ts";
import type { ProxyRequest } from "../../testkit/fault-proxy.ts";
import { drain, relayBacklog } from "../../testkit/drain.ts";
import { introduce } from "../../testkit/introduce.ts";
import { clearEnvelope, clearPayload, resealed, sealedTo } from "../../testkit/sealed.ts";
import type { Identity } from "../../src/trust/keys.ts";
import { closeParties, createParty, type Party } from "../../testkit/party.ts";
import { useRelayFixture } from "../helpers/relay-fixture.ts";

setDefaultTimeout(30_000);

const fx = useRelayFixture({ proxy: true });

// -- the wire, as the proxy sees it ----------------------------------------------------------------

interface WirePayload {
  taskId: string;
  kind: EnvelopeKind;
  payload: any;
  signature?: SignatureBlock;
  /** A sealed payload's box (src/trust/sealing.ts) instead of `payload` and `signature`. */
  sealed?: any;
}

interface WireEnvelope {
  envelopeId: string;
  protocolVersion: string;
  source: TaskEndpoint;
  target: TaskEndpoint;
  payload: WirePayload;
  createdAt: string;
}

interface ReceiveReply {
  value?: { deliveries?: { cursor: string; envelope: WireEnvelope }[] };
}

type Body = { endpoint?: TaskEndpoint; envelope?: WireEnvelope };
const body = (request: ProxyRequest): Body => (request.body ?? {}) as Body;

/** The envelope a party sent (from the proxy's request log), as a fresh copy. */
function sentEnvelope(envelopeId: string): WireEnvelope {
  const request = fx.proxy
    .requests()
    .find((candidate) => candidate.operation === "send" && body(candidate).envelope?.envelopeId === envelopeId);
  if (request === undefined) throw new Error(`no send of envelope ${envelopeId} in the proxy log`);
  return structuredClone(body(request).envelope!);
}

/**
 * From now on, every `receive` reply to `victim` carries `attack(carrier)` in place of the carrier
 * delivery, as it travels (built once, so a redelivery before the ACK is the same forgery). Returns
 * how many replies were rewritten.
 */
function substitute(victim: Party, carrierId: string, attack: (carrier: WireEnvelope) => WireEnvelope): () => number {
  const me = victim.core.endpoint()!;
  let forged: WireEnvelope | undefined;
  let rewritten = 0;
  fx.proxy.push({
    operation: "receive",
    kind: "rewrite",
    times: Number.POSITIVE_INFINITY,
    when: (request) => body(request).endpoint?.id === me.id,
    rewrite: (reply: ReceiveReply) => {
      for (const delivery of reply.value?.deliveries ?? []) {
        if (delivery.envelope.envelopeId !== carrierId) continue;
        forged ??= attack(structuredClone(delivery.envelope));
        delivery.envelope = structuredClone(forged);
        rewritten += 1;
      }
      return reply;
    },
  });
  return () => rewritten;
}

// -- parties and tasks -----------------------------------------------------------------------------

async function party(): Promise<Party> {
  const created = await createParty({ url: fx.proxy.url });
  fx.defer(() => closeParties([created]));
  return created;
}

/** O assigns a task to W (introduced first); W's pass presents it, O's pass takes the receipt. */
async function assign(origin: Party, worker: Party, text: string): Promise<string> {
  await introduce(origin.core, worker.core);
  const { taskId } = await origin.core.createTask({ to: worker.core.endpoint()!, task: text });
  await worker.core.refresh();
  await origin.core.refresh();
  expect(worker.host.insertedIds()).toContain(origin.core.getTask(taskId).events[0]!.eventId);
  return taskId;
}

const record = (core: TaskCore, taskId: string): TaskRecord => coreInternals(core).store.getStoredTask(taskId)!.record;
const eventIds = (core: TaskCore, taskId: string): string[] => core.getTask(taskId).events.map((event) => event.eventId);
const insertedFor = (party: Party, taskId: string) => party.host.inserted.filter((item) => item.taskId === taskId);

/** Faults off, then passes until nothing is pending anywhere; then checks it. */
async function settleAll(parties: readonly Party[]): Promise<void> {
  fx.proxy.clear();
  await drain(parties);
  for (const each of parties) {
    expect({ party: each.name, deliveries: coreInternals(each.core).store.pendingDeliveryCount() }).toEqual({
      party: each.name,
      deliveries: 0,
    });
    expect({ party: each.name, outbox: coreInternals(each.core).store.pendingOutboxCount() }).toEqual({ party: each.name, outbox: 0 });
    expect({ party: each.name, backlog: await relayBacklog(each.core) }).toEqual({ party: each.name, backlog: 0 });
  }
}

/** The victim rejected exactly the carrier, under `code`, once. */
function expectRejected(victim: Party, carrierId: string, code: string): void {
  expect(victim.core.rejections()).toEqual({ [code]: 1 });
  expect(victim.host.rejections.map((rejection) => ({ envelopeId: rejection.envelopeId, code: rejection.code }))).toEqual([
    { envelopeId: carrierId, code },
  ]);
}

// -- worker-side attacks ---------------------------------------------------------------------------

interface WorkerStage {
  readonly origin: Party;
  readonly worker: Party;
  readonly taskId: string;
  readonly before: MessageResult;
  /** Registers another party for the final drain (and its checks). */
  involve(party: Party): void;
}

interface WorkerAttack {
  readonly name: string;
  readonly code: string;
  /**
   * What the relay can do: "sealed" forges on the wire as it travels (the carrier as a sealed box);
   * "opened" is handed the carrier opened and seals its forgery again as `sealer` (default the
   * parties' identity).
   */
  readonly relay: "sealed" | "opened";
  readonly sealer?: Identity;
  /** Runs before the three messages (e.g. a second worker and its mail). */
  prepare?(stage: Omit<WorkerStage, "before">): Promise<unknown>;
  /** The envelope the relay serves in place of the carrier (as the relay holds it: sealed or opened). */
  forge(carrier: WireEnvelope, stage: WorkerStage): WireEnvelope;
  /** Rejections the origin counts (default none). */
  readonly originRejections?: Record<string, number>;
  /** Extra checks after the drain; `forged` is the forgery opened where it can be. */
  check?(stage: WorkerStage, forged: WireEnvelope): Promise<void> | void;
}

const unpaired = generateIdentity().identity;

let secondWorker: { party: Party; taskId: string; message: MessageResult } | undefined;

/** The forgery as it travels: an opened relay seals it again. */
function onWire(attack: Pick<WorkerAttack, "relay" | "sealer">, forged: WireEnvelope): WireEnvelope {
  return attack.relay === "opened" ? (resealed(forged as never, attack.sealer) as WireEnvelope) : forged;
}

/** `forge` applied to the carrier as the attack's relay holds it. */
function forgeFrom(
  attack: Pick<WorkerAttack, "relay" | "sealer">,
  carrier: WireEnvelope,
  forge: (held: WireEnvelope) => WireEnvelope,
): WireEnvelope {
  return onWire(attack, forge(attack.relay === "opened" ? (clearEnvelope(carrier) as WireEnvelope) : carrier));
}

const workerAttacks: WorkerAttack[] = [
  {
    name: "flipped box: one byte of the carrier's sealed box changed",
    code: "SEAL_INVALID",
    relay: "sealed",
    forge: (carrier) => {
      const box = Buffer.from(carrier.payload.sealed.box, "base64url");
      box[0] = box[0]! ^ 0x01;
      carrier.payload.sealed.box = box.toString("base64url");
      return carrier;
    },
  },
  {
    name: "replay: the carrier's envelope carries a copy of the earlier 'before' box",
    code: "REPLAYED_EVENT",
    relay: "sealed",
    forge: (carrier, stage) => ({ ...sentEnvelope(stage.before.envelopeId), envelopeId: carrier.envelopeId }),
  },
  {
    name: "re-target: a box the origin sealed for another worker, re-addressed to this worker",
    code: "NOT_ADDRESSED",
    relay: "sealed",
    prepare: async (stage) => {
      const other = await party();
      stage.involve(other);
      const taskId = await assign(stage.origin, other, "the other worker's task");
      const message = await stage.origin.core.message({ taskId, type: "information", message: "for the other worker" });
      secondWorker = { party: other, taskId, message };
    },
    forge: (carrier, stage) => ({
      ...sentEnvelope(secondWorker!.message.envelopeId),
      envelopeId: carrier.envelopeId,
      target: stage.worker.core.endpoint()!,
    }),
    check: (stage) => {
      const other = secondWorker!;
      // The other worker still gets its own mail, once; this worker never learns of that task.
      expect(other.party.host.insertedIds()).toContain(other.message.eventId!);
      expect(other.party.core.rejections()).toEqual({});
      expect(stage.worker.core.findTask(other.taskId)).toBeUndefined();
      expect(insertedFor(stage.worker, other.taskId)).toEqual([]);
    },
  },
  {
    name: "unpaired key, assignment: a new task from the origin's endpoint, signed and sealed by a key nobody paired",
    code: "UNKNOWN_PEER",
    relay: "sealed",
    // The worker refuses it back to the origin's endpoint, sealed to the forger's key; the origin
    // (here sharing the worker's identity, so it opens it as its sender could) knows no such task.
    originRejections: { UNKNOWN_TASK: 1 },
    forge: (carrier, stage) => {
      const origin = stage.origin.core.endpoint()!;
      const worker = stage.worker.core.endpoint()!;
      const now = Date.now();
      const task: TaskRecord = {
        ...record(stage.origin.core, stage.taskId),
        taskId: crypto.randomUUID(),
        task: "a task from an unpaired key",
        createdAt: now,
        expiresAt: now + 3_600_000,
      };
      const event = makeEvent(task, "task.created", "1", now, { task: task.task });
      const encoded = encodeEnvelope(
        origin,
        worker,
        task.taskId,
        "assignment",
        { task, event },
        now,
        { identity: unpaired },
        undefined,
        sealedTo(),
      );
      return { ...(JSON.parse(encoded.text) as WireEnvelope), envelopeId: carrier.envelopeId };
    },
    check: (stage, forged) => {
      const taskId = forged.payload.taskId;
      expect(stage.worker.core.findTask(taskId)).toBeUndefined();
      expect(stage.origin.core.findTask(taskId)).toBeUndefined();
      expect(insertedFor(stage.worker, taskId)).toEqual([]);
      const refusals = fx.proxy
        .requests()
        .filter((request) => request.operation === "send" && body(request).envelope?.payload.taskId === taskId)
        .map((request) => {
          const envelope = body(request).envelope!;
          // Sealed to the forger's key: the forger opens it.
          const opened = clearPayload(envelope.payload, unpaired)!;
          return {
            source: envelope.source.id,
            target: envelope.target.id,
            kind: opened.kind,
            type: opened.payload.type,
            reason: opened.payload.payload.reason,
          };
        });
      expect(refusals[0]).toEqual({
        source: stage.worker.core.endpoint()!.id,
        target: stage.origin.core.endpoint()!.id,
        kind: "intent",
        type: "task.refused",
        reason: "UNKNOWN_PEER",
      });
      expect(stage.origin.host.rejections.map((rejection) => rejection.code)).toEqual(["UNKNOWN_TASK"]);
    },
  },
  {
    name: "unpaired key, canonical event: the carrier re-signed (and sealed) by a key nobody paired",
    code: "NOT_AUTHORIZED",
    relay: "opened",
    sealer: unpaired,
    forge: (carrier, stage) => {
      const { taskId, kind, payload } = carrier.payload;
      carrier.payload.signature = signPayload(
        { taskId, kind, payload },
        { identity: unpaired, from: stage.origin.core.endpoint()!, to: stage.worker.core.endpoint()!, atMs: Date.now() },
      );
      return carrier;
    },
  },
  {
    name: "forged cancel: the carrier's canonical event becomes task.cancelled, its signature kept",
    code: "SIGNATURE_INVALID",
    relay: "opened",
    forge: (carrier) => {
      carrier.payload.payload.type = "task.cancelled";
      carrier.payload.payload.payload = { summary: "forged" };
      return carrier;
    },
  },
  {
    name: "strip: the carrier's signature is deleted (unsigned mail travels in the clear)",
    code: "UNSIGNED_EVENT",
    relay: "opened",
    forge: (carrier) => {
      delete carrier.payload.signature;
      return carrier;
    },
  },
];

describe("a malicious relay, at the worker", () => {
  for (const attack of workerAttacks) {
    test(`${attack.name} → ${attack.code}`, async () => {
      const origin = await party();
      const worker = await party();
      const parties = [origin, worker];
      const base = { origin, worker, involve: (other: Party) => void parties.push(other) };
      const taskId = await assign(origin, worker, `a task for: ${attack.name}`);
      await attack.prepare?.({ ...base, taskId });
      const createdId = origin.core.getTask(taskId).events[0]!.eventId;
      const eventsBefore = eventIds(worker.core, taskId);

      const before = await origin.core.message({ taskId, type: "information", message: "before" });
      const carrier = await origin.core.message({ taskId, type: "information", message: "carrier" });
      const stage: WorkerStage = { ...base, taskId, before };
      let forged: WireEnvelope | undefined;
      const rewritten = substitute(worker, carrier.envelopeId, (envelope) => {
        const wire = forgeFrom(attack, envelope, (held) => attack.forge(held, stage));
        forged = clearEnvelope(wire) as WireEnvelope;
        return wire;
      });
      const after = await origin.core.message({ taskId, type: "information", message: "after" });

      await worker.core.refresh();
      await origin.core.refresh();
      expect(rewritten()).toBeGreaterThan(0);
      await settleAll(parties);

      // Counted and recorded under its code; the origin counts only what the attack provoked.
      expectRejected(worker, carrier.envelopeId, attack.code);
      expect(origin.core.rejections()).toEqual(attack.originRejections ?? {});
      // Never presented: only the assignment and the legitimate messages, in order.
      expect(insertedFor(worker, taskId).map((item) => item.eventId)).toEqual([createdId, before.eventId!, after.eventId!]);
      expect(worker.host.insertedIds()).not.toContain(carrier.eventId!);
      expect(worker.host.insertedIds().filter((id) => id === forged!.payload?.payload?.eventId).length).toBeLessThanOrEqual(1);
      // No state change: the task moved only by the legitimate messages.
      expect(worker.core.getTask(taskId).status).toBe("active");
      expect(eventIds(worker.core, taskId)).toEqual([...eventsBefore, before.eventId!, after.eventId!]);
      expect(origin.core.getTask(taskId).status).toBe("active");
      await attack.check?.(stage, forged!);
    });
  }
});

// -- origin-side attack ----------------------------------------------------------------------------

describe("a malicious relay, at the origin", () => {
  test("flipped status (opened): the worker's task.completed intent becomes task.failed, its signature kept → SIGNATURE_INVALID", async () => {
    const origin = await party();
    const worker = await party();
    const taskId = await assign(origin, worker, "a task whose outcome is flipped");
    const eventsBefore = eventIds(origin.core, taskId);

    const before = await worker.core.message({ taskId, type: "information", message: "w-before" });
    const done = await worker.core.done({ taskId, status: "completed", summary: "carrier-done" });
    const delivery = done.terminalDelivery;
    if (!("envelopeId" in delivery)) throw new Error(`the done intent was not shipped: ${JSON.stringify(delivery)}`);
    // A relay handed the seal keys: it opens the carrier, flips the status and seals it again.
    const rewritten = substitute(origin, delivery.envelopeId, (carrier) =>
      forgeFrom({ relay: "opened" }, carrier, (opened) => {
        opened.payload.payload.type = "task.failed";
        return opened;
      }),
    );
    const after = await worker.core.message({ taskId, type: "information", message: "w-after" });

    await origin.core.refresh();
    await worker.core.refresh();
    expect(rewritten()).toBeGreaterThan(0);
    await settleAll([origin, worker]);

    expectRejected(origin, delivery.envelopeId, "SIGNATURE_INVALID");
    expect(worker.core.rejections()).toEqual({});
    // The legitimate intents became canonical events, presented in order; the terminal never did.
    const presented = insertedFor(origin, taskId).map((item) => ({
      type: item.event.type,
      intentId: (item.event.payload as { intentId?: string }).intentId,
    }));
    expect(presented).toEqual([
      { type: "task.information", intentId: before.intentId },
      { type: "task.information", intentId: after.intentId },
    ]);
    // No state change: the task is still active at both ends and has only the two canonical events more.
    const task = origin.core.getTask(taskId);
    expect(task.status).toBe("active");
    expect(task.events.slice(0, eventsBefore.length).map((event) => event.eventId)).toEqual(eventsBefore);
    expect(
      task.events
        .slice(eventsBefore.length)
        .map((event) => ({ type: event.type, intentId: (event.payload as { intentId?: string }).intentId })),
    ).toEqual(presented);
    expect(worker.core.getTask(taskId).status).toBe("active");
  });
});
