/**
 * Proofs of endpoints (src/core/proofs.ts): task content goes only to an endpoint that proved the
 * key its task expects. Each check on its own, at its edge, on a core context of the test's:
 * - a hello's answer proves only the endpoint that was asked (`takeHello`);
 * - a task bound to one key is not satisfied by another key this identity also trusts (`carriageFor`),
 *   and binds the worker once (`bindWorker`);
 * - a peer's seal key is believed only when its binding verifies (`learnSealKey`).
 * Then through TaskCores on the real relay (behind the fault proxy, whose log is what the relay
 * carried): an endpoint that answers the origin's ask of the worker, claiming the worker's name,
 * never receives the task — neither a stranger nor a paired peer that is not the worker.
 * (A second trusted key holding the worker's name after the task was bound: tests/core/reassign.test.ts.)
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import type { CoreStore, TaskMeta } from "../../src/core/bookkeeping.ts";
import type { CoreContext } from "../../src/core/context.ts";
import { encodeHello } from "../../src/core/envelopes.ts";
import { askProof, carriageFor, learnSealKey, provenAt, recordProof, sealKeyOf, takeHello } from "../../src/core/proofs.ts";
import { createTaskWorkScope } from "../../src/core/scope.ts";
import { coreInternals, createCoreContext } from "../../src/core/task-core.ts";
import { systemTimers } from "../../src/core/timers.ts";
import { gateHello, processLocalTrust, type TrustOptions } from "../../src/core/trust.ts";
import type { HelloEnvelope, TaskEndpoint } from "../../src/protocol/schemas.ts";
import { requestEnvelopes } from "../../src/protocol/wire.ts";
import { IN_MEMORY_RELAY_URL } from "../../src/relay-server/in-memory.ts";
import { createVolatileTaskSession } from "../../src/relay-client/session.ts";
import { createTaskStore } from "../../src/store/task-store.ts";
import { generateIdentity, type Identity } from "../../src/trust/keys.ts";
import { sealBindingBytes } from "../../src/trust/sealing.ts";
import { thrown } from "../../testkit/async.ts";
import { drain } from "../../testkit/drain.ts";
import { closeParties, createParty, type Party } from "../../testkit/party.ts";
import { clearPayload, isHello } from "../../testkit/sealed.ts";
import { requestsOf, trustOf } from "../helpers/core-kit.ts";
import { endpoint, ORIGIN, taskRecord, WORKER } from "../helpers/fixtures.ts";
import { useRelayFixture } from "../helpers/relay-fixture.ts";

setDefaultTimeout(10_000);

const fx = useRelayFixture({ proxy: true });

/** This process's identity: every party made without trust options signs with it and trusts it (itself). */
const alice = processLocalTrust().identity;
const bob = generateIdentity().identity;
const carol = generateIdentity().identity;
const stranger = generateIdentity().identity;

const sealOf = (identity: Identity): string => identity.seal!().publicKey;

/** A TaskCore on the relay (behind the proxy), closed after the test; this process's identity unless `trust` says otherwise. */
async function party(trust?: TrustOptions): Promise<Party> {
  const created = await createParty({ url: fx.proxy.url, requestTimeoutMs: 4_000, ...(trust === undefined ? {} : { trust }) });
  fx.defer(() => closeParties([created]));
  return created;
}

/** A core context with a store of its own, judging with `trust`; its session is never connected unless given. */
function contextOf(trust: TrustOptions, session = createVolatileTaskSession({ url: IN_MEMORY_RELAY_URL, callerSession: "proofs-unit" })) {
  return createCoreContext({ store: createTaskStore(), session, trust });
}

/** `identity` proved `at` (claiming `session`): its seal key learned from its own binding, then the proof recorded. */
function proven(context: CoreContext, at: TaskEndpoint, identity: Identity, session?: string): void {
  learnSealKey(context, identity.publicKey, sealOf(identity), identity.sealBinding!());
  recordProof(context, at, identity.publicKey, session);
}

/** A task held in `role` (from ORIGIN to WORKER) with `meta`; its id. */
function held(store: CoreStore, role: "origin" | "worker", meta: TaskMeta): string {
  const record = taskRecord({ createdAt: Date.now() });
  store.putTask(record, role);
  store.setTaskMeta(record.taskId, meta);
  return record.taskId;
}

// -------------------------------------------------------------------------------------------------
// takeHello
// -------------------------------------------------------------------------------------------------

describe("a hello's answer proves only the endpoint that was asked (proofs.ts takeHello)", () => {
  /**
   * An origin's context (trusting bob and carol) that asked the worker's endpoint for its proof, on
   * the real relay; `answer` hands it an answer as its intake would, past the hello gate.
   */
  async function asked() {
    const origin = await party();
    const worker = await party();
    const other = await party();
    const context = contextOf(trustOf(alice, { bob, carol }), coreInternals(origin.core).session);
    const scope = createTaskWorkScope({ timers: systemTimers, mode: "foreground" });
    const helloId = await askProof(context, scope, worker.core.endpoint()!);
    scope.dispose();
    if (helloId === undefined) throw new Error("the ask was not sent");
    const me = origin.core.endpoint()!;
    const answer = (from: TaskEndpoint, signer: Identity, claimedName: string, inReplyTo: string = helloId) => {
      const { encoded } = encodeHello(from, me, { identity: signer, claimedName }, Date.now(), { inReplyTo });
      const envelope = JSON.parse(encoded.text) as HelloEnvelope;
      return takeHello(context, envelope, gateHello(context.trust, envelope, me, Date.now()));
    };
    return { context, worker: worker.core.endpoint()!, workerName: worker.name, other: other.core.endpoint()!, answer };
  }

  test("the asked endpoint's answer proves it: the key that signed the answer holds that endpoint", async () => {
    // Guards takeHello: an answer from the endpoint asked records its proof (the check is not inverted).
    const { context, worker, workerName, answer } = await asked();
    expect(answer(worker, bob, workerName)).toEqual(worker);
    expect(provenAt(context, worker)).toEqual({ key: bob.publicKey, sealKey: sealOf(bob), session: workerName });
  });

  test("an answer to that ask from another endpoint proves nothing — the asked session's name or another, a paired peer's key or a stranger's — and the ask stays open", async () => {
    // Guards takeHello: `!sameEndpoint(asked, envelope.source)` → no proof.
    const { context, worker, workerName, other, answer } = await asked();
    const otherRelay: TaskEndpoint = { relay: `${worker.relay}-other`, id: worker.id };
    const intruders: [TaskEndpoint, Identity, string][] = [
      [other, carol, workerName], // another endpoint id, the same session name, a key this identity trusts
      [other, stranger, "someone-else"], // another session, a key nobody paired
      [otherRelay, carol, workerName], // the same endpoint id on another relay
    ];
    for (const [from, signer, claimedName] of intruders) {
      expect(answer(from, signer, claimedName)).toBeUndefined();
      expect(provenAt(context, from)).toBeUndefined();
      expect(provenAt(context, worker)).toBeUndefined();
    }
    // The ask was not used up: the worker's own answer still proves it.
    expect(answer(worker, bob, workerName)).toEqual(worker);
    expect(provenAt(context, worker)?.key).toBe(bob.publicKey);
  });

  test("an answer to no ask of ours proves nothing, even from the endpoint it comes from", async () => {
    // Guards takeHello: `asked === undefined` → no proof.
    const { context, worker, workerName, answer } = await asked();
    expect(answer(worker, bob, workerName, crypto.randomUUID())).toBeUndefined();
    expect(provenAt(context, worker)).toBeUndefined();
  });
});

// -------------------------------------------------------------------------------------------------
// carriageFor / bindWorker / expectation
// -------------------------------------------------------------------------------------------------

describe("a task bound to one key goes to no other key this identity trusts (proofs.ts carriageFor)", () => {
  test("at the origin, bound to bob: a second paired peer's key or this identity's own at the endpoint keeps it waiting; bob's seals to bob", () => {
    // Guards carriageFor: `proof.key !== expected.key` → "awaiting" (the bound key, not any trusted one).
    const context = contextOf(trustOf(alice, { bob, carol }));
    for (const intruder of [carol, alice]) {
      const to = endpoint();
      const taskId = held(context.store, "origin", { workerKey: bob.publicKey });
      proven(context, to, intruder);
      expect(carriageFor(context, taskId, to)).toBe("awaiting");
      expect(context.store.getTaskMeta(taskId)).toEqual({ workerKey: bob.publicKey });
    }
    const taskId = held(context.store, "origin", { workerKey: bob.publicKey });
    proven(context, WORKER, bob);
    expect(carriageFor(context, taskId, WORKER)).toEqual({ sealTo: sealOf(bob) });
  });

  test("reassigned to the lost worker's successor: only the lost worker's key, not another trusted one; the matching proof binds it", () => {
    // Guards carriageFor with expectation's `expectedWorkerKey`, and bindWorker dropping it once bound.
    const context = contextOf(trustOf(alice, { bob, carol }));
    const taskId = held(context.store, "origin", { expectedWorkerKey: bob.publicKey });
    const successor = endpoint();
    proven(context, successor, carol, "bob-session");
    expect(carriageFor(context, taskId, successor)).toBe("awaiting");
    expect(context.store.getTaskMeta(taskId)).toEqual({ expectedWorkerKey: bob.publicKey });
    proven(context, successor, bob, "bob-session");
    expect(carriageFor(context, taskId, successor)).toEqual({ sealTo: sealOf(bob) });
    expect(context.store.getTaskMeta(taskId)).toEqual({ workerKey: bob.publicKey, peerSession: "bob-session" });
  });

  test("at the worker, bound to the origin's key: a second paired peer's key at the origin's endpoint keeps it waiting", () => {
    // Guards expectation (the worker expects `originKey`) and carriageFor's key comparison at the worker.
    const context = contextOf(trustOf(bob, { alice, carol }));
    const taskId = held(context.store, "worker", { originKey: alice.publicKey });
    proven(context, ORIGIN, carol);
    expect(carriageFor(context, taskId, ORIGIN)).toBe("awaiting");
    proven(context, ORIGIN, alice, "alice-session");
    expect(carriageFor(context, taskId, ORIGIN)).toEqual({ sealTo: sealOf(alice) });
    // A worker binds no worker key (bindWorker is the origin's): its task's meta is unchanged.
    expect(context.store.getTaskMeta(taskId)).toEqual({ originKey: alice.publicKey });
  });

  test("a first assignment (no key bound yet) goes to a key this identity trusts — a paired peer's or its own — never a stranger's; the first one binds", () => {
    // Guards carriageFor's `!trusted(context, proof.key)` for the "trusted" expectation, and trusted() itself.
    const context = contextOf(trustOf(alice, { carol }));
    const unbound = held(context.store, "origin", {});
    proven(context, WORKER, stranger);
    expect(carriageFor(context, unbound, WORKER)).toBe("awaiting");
    expect(context.store.getTaskMeta(unbound)).toEqual({});
    for (const [trusted, session] of [
      [carol, "carol-session"],
      [alice, "alice-session"],
    ] as const) {
      const to = endpoint();
      const taskId = held(context.store, "origin", {});
      proven(context, to, trusted, session);
      expect(carriageFor(context, taskId, to)).toEqual({ sealTo: sealOf(trusted) });
      expect(context.store.getTaskMeta(taskId)).toEqual({ workerKey: trusted.publicKey, peerSession: session });
    }
  });

  test("a bound worker is bound once: a later proof of the same key claiming another session name rebinds nothing", () => {
    // Guards bindWorker: `meta.workerKey !== undefined` → return (the key and the session it claimed stay).
    const context = contextOf(trustOf(alice, { bob }));
    const taskId = held(context.store, "origin", { workerKey: bob.publicKey, peerSession: "bob-session" });
    proven(context, WORKER, bob, "someone-else");
    expect(carriageFor(context, taskId, WORKER)).toEqual({ sealTo: sealOf(bob) });
    expect(context.store.getTaskMeta(taskId)).toEqual({ workerKey: bob.publicKey, peerSession: "bob-session" });
  });

  test("an unverified task (an unsigned assignment taken under the opt-in) answers its legacy peer in the clear, proven or not", () => {
    // Guards expectation: `unverified === true` → "legacy" (carriageFor: "clear"; such a peer cannot open a seal).
    const context = contextOf(trustOf(bob, { alice }));
    const taskId = held(context.store, "worker", { unverified: true });
    expect(carriageFor(context, taskId, ORIGIN)).toBe("clear");
  });

  test("a resumed task waits for its worker's confirmation even when the endpoint proved the bound key", () => {
    // Guards carriageFor: `resuming === true` → "awaiting" (resume.ts confirms first).
    const context = contextOf(trustOf(alice, { bob }));
    const taskId = held(context.store, "origin", { workerKey: bob.publicKey, resuming: true });
    proven(context, WORKER, bob);
    expect(carriageFor(context, taskId, WORKER)).toBe("awaiting");
  });
});

// -------------------------------------------------------------------------------------------------
// learnSealKey
// -------------------------------------------------------------------------------------------------

describe("a peer's seal key is believed only when its binding verifies (proofs.ts learnSealKey)", () => {
  const forged = (signer: Identity, sealKey: string) => Buffer.from(signer.sign(sealBindingBytes(sealKey))).toString("base64url");
  /** Bindings claimed for bob's key that bob never made. */
  const forgeries: [string, string, string][] = [
    ["signed by another key, over bob's seal key", sealOf(bob), forged(carol, sealOf(bob))],
    ["signed by another key, over that key's own seal key", sealOf(carol), carol.sealBinding!()],
    ["bob's own binding, presented for another seal key", sealOf(carol), bob.sealBinding!()],
    ["bob's key over another seal key", sealOf(carol), forged(bob, sealOf(stranger))],
    ["garbage", sealOf(bob), Buffer.from("not a signature").toString("base64url")],
    ["empty", sealOf(bob), ""],
  ];

  test("the binding the key made over its seal key is believed", () => {
    // Guards learnSealKey: a valid binding is learned (the check is not inverted).
    const context = contextOf(trustOf(alice, { bob }));
    learnSealKey(context, bob.publicKey, sealOf(bob), bob.sealBinding!());
    expect(sealKeyOf(context, bob.publicKey)).toBe(sealOf(bob));
  });

  test("a forged binding is SIGNATURE_INVALID and changes nothing: no seal key, no proof, an earlier seal key kept", () => {
    // Guards learnSealKey: `verifySignature(key, sealBindingBytes(sealKey), binding)` (verified, not merely present).
    const context = contextOf(trustOf(alice, { bob }));
    for (const [what, sealKey, binding] of forgeries) {
      expect({ what, code: thrown(() => learnSealKey(context, bob.publicKey, sealKey, binding)).code }).toEqual({
        what,
        code: "SIGNATURE_INVALID",
      });
      expect(sealKeyOf(context, bob.publicKey)).toBeUndefined();
      // Without a believed seal key an endpoint proves nothing (nothing could be sealed to it).
      recordProof(context, WORKER, bob.publicKey);
      expect(provenAt(context, WORKER)).toBeUndefined();
    }
    learnSealKey(context, bob.publicKey, sealOf(bob), bob.sealBinding!());
    for (const [what, sealKey, binding] of forgeries.filter(([, sealKey]) => sealKey !== sealOf(bob))) {
      expect({ what, code: thrown(() => learnSealKey(context, bob.publicKey, sealKey, binding)).code }).toEqual({
        what,
        code: "SIGNATURE_INVALID",
      });
      expect(sealKeyOf(context, bob.publicKey)).toBe(sealOf(bob));
    }
  });
});

// -------------------------------------------------------------------------------------------------
// Through TaskCores on the real relay
// -------------------------------------------------------------------------------------------------

describe("an endpoint that was not asked never receives the task (TaskCores on the real relay)", () => {
  const SECRET = "the task text only the worker may read";

  /** Every envelope a party sent through the relay (batched too), as the relay carried it. */
  function carried(sender: Party): any[] {
    return requestsOf(fx.proxy, sender.name, "send").flatMap((request) => requestEnvelopes(request.body) as any[]);
  }

  for (const intruder of [
    { who: "a stranger (a key nobody paired)", paired: false },
    { who: "a paired peer that is not the worker (a second trusted key)", paired: true },
  ]) {
    test(`${intruder.who} answering the origin's ask of the worker from its own endpoint, claiming the worker's name, gets nothing of the task`, async () => {
      // Guards takeHello (an answer proves only the endpoint asked) through intake: the intruder's
      // answer neither releases the assignment to it nor credits its key to the worker's endpoint.
      const key = generateIdentity().identity;
      const origin = await party(trustOf(alice, intruder.paired ? { carol: key } : {}));
      const worker = await party();
      const to = worker.core.endpoint()!;
      const other = await party(trustOf(key, { alice }, { claimedName: worker.name }));
      const created = await origin.core.createTask({ to, task: SECRET });
      expect(created.delivery).toBe("pending");
      // The origin's ask of the worker, as the relay carried it (a hello is content-free and in the clear).
      const ask = carried(origin).find((envelope) => isHello(envelope) && envelope.target.id === to.id);
      expect(ask?.payload.payload.inReplyTo).toBeUndefined();
      // The intruder answers it first, from its own endpoint, signed by its own key.
      const answer = encodeHello(other.core.endpoint()!, origin.core.endpoint()!, { identity: key, claimedName: worker.name }, Date.now(), {
        inReplyTo: ask.payload.payload.helloId,
      });
      await coreInternals(other.core).session.send(answer.encoded);
      await origin.core.refresh();
      // The assignment still waits for the worker's own proof.
      expect(origin.core.getTask(created.taskId).status).toBe("active");
      expect(origin.core.waitingMail(created.taskId)).toMatchObject([{ envelopeId: created.envelopeId, cause: "proof" }]);

      await drain([origin, worker, other]);
      // The worker proved its key and got the task; the origin bound it.
      expect(worker.core.getTask(created.taskId)).toMatchObject({ status: "active", task: SECRET });
      expect(origin.core.getTask(created.taskId)).toMatchObject({ status: "active", peer: { self: true } });
      // What the relay carried: to the intruder only hellos; of the origin's task mail nothing it can open.
      const toIntruder = carried(origin).filter((envelope) => envelope.target.id === other.core.endpoint()!.id);
      expect(toIntruder.every(isHello)).toBe(true);
      const taskMail = carried(origin).filter((envelope) => !isHello(envelope));
      expect(taskMail.map((envelope) => envelope.target.id)).toContain(to.id);
      expect(taskMail.filter((envelope) => clearPayload(envelope.payload, key) !== undefined)).toEqual([]);
      expect(other.core.listTasks()).toEqual([]);
      expect(other.host.inserted).toEqual([]);
    });
  }
});
