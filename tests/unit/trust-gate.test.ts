/**
 * The trust gate (src/core/trust.ts) and what intake does with its verdicts (src/core/intake.ts):
 * its bounds at their edges (freshness, the replay window, the lifetime), the hello gate, the keys
 * each kind of mail must carry (on the gate itself), unknown keys (refused back to the
 * sender, or waiting for the human), paired peers, key binding per task, unsigned mail (refused,
 * or accepted as unverified on opt-in), and a malformed peers.json (mail waits, never lost).
 * Flows run on the real relay in memory (src/relay-server/in-memory.ts).
 */
import { afterEach, describe, expect, test } from "bun:test";
import { encodeEnvelope, encodeHello, makeEvent, makeIntent } from "../../src/core/envelopes.ts";
import { followMovedPeer } from "../../src/core/reconnect.ts";
import { createTaskWorkScope } from "../../src/core/scope.ts";
import { systemTimers } from "../../src/core/timers.ts";
import { coreInternals, createCoreContext } from "../../src/core/task-core.ts";
import { gateHello, gateMail, createTrustState, type PairingRequest, type TrustOptions } from "../../src/core/trust.ts";
import type { CoreBook, TaskMeta } from "../../src/core/bookkeeping.ts";
import { TaskError } from "../../src/protocol/errors.ts";
import { replayWindowEvents, maxSignatureAgeMs, maxSignatureFutureSkewMs } from "../../src/protocol/limits.ts";
import type { HelloEnvelope, SignatureBlock, TaskEndpoint, TaskEnvelope } from "../../src/protocol/schemas.ts";
import { encodedEnvelope } from "../../src/protocol/wire.ts";
import { createInMemoryTaskRelay, type InMemoryTaskRelay } from "../../src/relay-server/in-memory.ts";
import { createTaskStore } from "../../src/store/task-store.ts";
import { generateIdentity, type Identity } from "../../src/trust/keys.ts";
import { factsOf, payloadDigest, type SignablePayload, signedBytes } from "../../src/trust/signing.ts";
import { failure, thrown } from "../../testkit/async.ts";
import { drain } from "../../testkit/drain.ts";
import { introduce } from "../../testkit/introduce.ts";
import { clearEnvelope, sealedTo } from "../../testkit/sealed.ts";
import { closeParties, createParty, type Party } from "../../testkit/party.ts";
import { trustOf } from "../helpers/core-kit.ts";
import { ORIGIN, OTHER, taskRecord, WORKER } from "../helpers/fixtures.ts";

const opened: { relays: InMemoryTaskRelay[]; parties: Party[] } = { relays: [], parties: [] };

afterEach(async () => {
  await closeParties(opened.parties.splice(0));
  for (const relay of opened.relays.splice(0)) await relay.stop();
});

async function relay(): Promise<InMemoryTaskRelay> {
  const created = await createInMemoryTaskRelay();
  opened.relays.push(created);
  return created;
}

async function party(on: InMemoryTaskRelay, trust: TrustOptions): Promise<Party> {
  const created = await createParty({ url: on.url, fetch: on.fetch, trust });
  opened.parties.push(created);
  return created;
}

// -------------------------------------------------------------------------------------------------
// The gate's bounds, on the gate itself
// -------------------------------------------------------------------------------------------------

describe("the gate's bounds at their edges", () => {
  const alice = generateIdentity().identity;
  const store = () => createTaskStore<CoreBook>();

  /** A signed assignment from ORIGIN to WORKER, signed at `atMs`. */
  function assignment(atMs: number, envelopeId?: string): TaskEnvelope {
    const task = taskRecord({ createdAt: atMs });
    const event = makeEvent(task, "task.created", "1", atMs, { task: task.task });
    const text = encodeEnvelope(ORIGIN, WORKER, task.taskId, "assignment", { task, event }, atMs, { identity: alice }).text;
    const envelope = JSON.parse(text) as TaskEnvelope;
    return envelopeId === undefined ? envelope : { ...envelope, envelopeId };
  }

  test(`fresh: signed exactly ${maxSignatureAgeMs} ms ago or ${maxSignatureFutureSkewMs} ms ahead passes; 1 ms more is STALE_EVENT`, () => {
    const now = Date.UTC(2026, 0, 1);
    // A lifetime that began long before: only the age bounds decide here.
    const trust = () => createTrustState(trustOf(alice), 0);
    expect(gateMail(store(), trust(), assignment(now - maxSignatureAgeMs), WORKER, now).verified).toBe(true);
    expect(gateMail(store(), trust(), assignment(now + maxSignatureFutureSkewMs), WORKER, now).verified).toBe(true);
    expect(thrown(() => gateMail(store(), trust(), assignment(now - maxSignatureAgeMs - 1), WORKER, now)).code).toBe("STALE_EVENT");
    expect(thrown(() => gateMail(store(), trust(), assignment(now + maxSignatureFutureSkewMs + 1), WORKER, now)).code).toBe("STALE_EVENT");
  });

  test(`replays: the same envelope again passes (a redelivery); another envelope with a seen event is REPLAYED_EVENT for the last ${replayWindowEvents} events`, () => {
    const now = Date.now();
    const trust = createTrustState(trustOf(alice));
    const window = () => trust.seen.get(alice.publicKey)?.size ?? 0;
    const first = assignment(now);
    expect(gateMail(store(), trust, first, WORKER, now).verified).toBe(true);
    expect(gateMail(store(), trust, first, WORKER, now).verified).toBe(true);
    const copy = { ...first, envelopeId: crypto.randomUUID() };
    expect(thrown(() => gateMail(store(), trust, copy, WORKER, now)).code).toBe("REPLAYED_EVENT");
    // Fill the window: with replayWindowEvents - 1 more, the first is still remembered …
    for (let index = 1; index < replayWindowEvents; index += 1) gateMail(store(), trust, assignment(now), WORKER, now);
    expect(window()).toBe(replayWindowEvents);
    expect(thrown(() => gateMail(store(), trust, copy, WORKER, now)).code).toBe("REPLAYED_EVENT");
    // … one more pushes it out of the bounded window.
    gateMail(store(), trust, assignment(now), WORKER, now);
    expect(window()).toBe(replayWindowEvents);
    expect(gateMail(store(), trust, copy, WORKER, now).verified).toBe(true);
  });

  test("strangers cannot flush the replay window: mail of a key this identity does not trust is never remembered", () => {
    const now = Date.now();
    const trust = createTrustState(trustOf(alice));
    const first = assignment(now);
    expect(gateMail(store(), trust, first, WORKER, now).verified).toBe(true);
    // A stranger signs more canonical events for tasks nobody holds than the window has room for.
    const stranger = generateIdentity().identity;
    for (let index = 0; index <= replayWindowEvents; index += 1) {
      const task = taskRecord({ createdAt: now });
      const event = makeEvent(task, "task.information", "2", now, { message: "junk" });
      gateMail(
        store(),
        trust,
        JSON.parse(encodeEnvelope(ORIGIN, WORKER, task.taskId, "canonical_event", event, now, { identity: stranger }).text) as TaskEnvelope,
        WORKER,
        now,
      );
    }
    expect(trust.seen.has(stranger.publicKey)).toBe(false);
    // The trusted key's event is still remembered: its replay is caught.
    expect(thrown(() => gateMail(store(), trust, { ...first, envelopeId: crypto.randomUUID() }, WORKER, now)).code).toBe("REPLAYED_EVENT");
  });

  test("a lifetime takes no event signed before it began for a task it does not hold (a restarted worker, an old assignment served again)", () => {
    const now = Date.now();
    const startedAt = now;
    const trust = createTrustState(trustOf(alice), startedAt);
    // Signed an hour before this lifetime began (well within the 24 h age bound).
    const old = assignment(startedAt - 60 * 60_000);
    expect(thrown(() => gateMail(store(), trust, old, WORKER, now)).details).toMatchObject({
      problem: "signed before this session's lifetime began, for a task it does not hold",
    });
    expect(thrown(() => gateMail(store(), trust, old, WORKER, now)).code).toBe("STALE_EVENT");
    // Within the clock skew allowed it passes; and a task this lifetime holds takes its older mail.
    expect(gateMail(store(), trust, assignment(startedAt - maxSignatureFutureSkewMs), WORKER, now).verified).toBe(true);
    const held = store();
    held.putTask((old.payload.payload as { task: unknown }).task as never, "worker");
    expect(gateMail(held, createTrustState(trustOf(alice), startedAt), old, WORKER, now).verified).toBe(true);
  });

  test("order: a bad signature is SIGNATURE_INVALID before anything else; a good one for another endpoint is NOT_ADDRESSED", () => {
    const now = Date.now();
    const envelope = assignment(now);
    const tampered = { ...envelope, payload: { ...envelope.payload, taskId: crypto.randomUUID() } } as TaskEnvelope;
    const trust = createTrustState(trustOf(generateIdentity().identity));
    // Unknown signer AND a bad signature: the signature is judged first.
    expect(thrown(() => gateMail(store(), trust, tampered, WORKER, now)).code).toBe("SIGNATURE_INVALID");
    const other: TaskEndpoint = { relay: WORKER.relay, id: crypto.randomUUID() };
    expect(thrown(() => gateMail(store(), createTrustState(trustOf(alice)), envelope, other, now)).code).toBe("NOT_ADDRESSED");
    // The relay claims another sender than the one that signed.
    const resent = { ...envelope, source: { relay: ORIGIN.relay, id: crypto.randomUUID() } };
    expect(thrown(() => gateMail(store(), createTrustState(trustOf(alice)), resent, WORKER, now)).code).toBe("NOT_ADDRESSED");
  });

  test("order: authorization before freshness — old mail of an unknown or unauthorized key is refused as such, never as stale", () => {
    const now = Date.now();
    const old = assignment(now - maxSignatureAgeMs - 60_000);
    // An unknown key (the worker trusts only itself): refused as unknown, though also stale.
    expect(thrown(() => gateMail(store(), createTrustState(trustOf(generateIdentity().identity), 0), old, WORKER, now)).code).toBe(
      "UNKNOWN_PEER",
    );
    // A task whose origin key is bound to another key: refused as unauthorized, though also stale.
    const bound = store();
    bound.putTask((old.payload.payload as { task: unknown }).task as never, "worker");
    bound.setTaskMeta(old.payload.taskId, { originKey: generateIdentity().identity.publicKey });
    expect(thrown(() => gateMail(bound, createTrustState(trustOf(alice), 0), old, WORKER, now)).code).toBe("NOT_AUTHORIZED");
    // Only mail from a key that may send it is judged on its age.
    expect(thrown(() => gateMail(store(), createTrustState(trustOf(alice), 0), old, WORKER, now)).code).toBe("STALE_EVENT");
  });
});

// -------------------------------------------------------------------------------------------------
// The hello gate, and the signed facts the first round left unguarded
// -------------------------------------------------------------------------------------------------

/** `envelope`'s signature made again by `identity` with the signed time `at` (any text: the schema allows it). */
function signedAt<E extends { payload: { taskId: string; kind: string; payload: unknown; signature?: SignatureBlock } }>(
  envelope: E,
  identity: Identity,
  at: string,
): E {
  const { taskId, kind, payload } = envelope.payload;
  const wire = { taskId, kind: kind as SignablePayload["kind"], payload };
  const block = { ...envelope.payload.signature!, at, sig: "" };
  const sig = Buffer.from(identity.sign(signedBytes(factsOf(wire, block), payloadDigest(wire)))).toString("base64url");
  return { ...envelope, payload: { ...envelope.payload, signature: { ...block, sig } } };
}

describe("the hello gate: verified, addressed to me, fresh (trust.ts gateHello)", () => {
  const bob = generateIdentity().identity;
  const carol = generateIdentity().identity;
  /** A hello bob signs from ORIGIN to WORKER at `atMs`. */
  const hello = (atMs: number): HelloEnvelope =>
    JSON.parse(encodeHello(ORIGIN, WORKER, { identity: bob, claimedName: "bob" }, atMs).encoded.text) as HelloEnvelope;
  const trust = () => createTrustState(trustOf(carol, { bob }), 0);

  test("a hello whose signed content was changed (its seal key swapped) is SIGNATURE_INVALID", () => {
    // Guards gateHello: verifyPayload → SIGNATURE_INVALID.
    const now = Date.now();
    const genuine = hello(now);
    expect(gateHello(trust(), genuine, WORKER, now).key).toBe(bob.publicKey);
    const swapped = { ...genuine, payload: { ...genuine.payload, payload: { ...genuine.payload.payload, seal: carol.seal!().publicKey } } };
    expect(thrown(() => gateHello(trust(), swapped, WORKER, now)).code).toBe("SIGNATURE_INVALID");
  });

  test("a hello signed for another endpoint, or relayed from another endpoint than it was signed from, is NOT_ADDRESSED", () => {
    // Guards gateHello: `!sameEndpoint(facts.to, self)` and `!sameEndpoint(facts.from, envelope.source)`.
    const now = Date.now();
    expect(thrown(() => gateHello(trust(), hello(now), OTHER, now)).code).toBe("NOT_ADDRESSED");
    expect(thrown(() => gateHello(trust(), { ...hello(now), source: OTHER }, WORKER, now)).code).toBe("NOT_ADDRESSED");
  });

  test(`fresh: signed exactly ${maxSignatureAgeMs} ms ago or ${maxSignatureFutureSkewMs} ms ahead passes; 1 ms more, or a time that is no time, is STALE_EVENT`, () => {
    // Guards gateHello: checkFresh (an old answer replayed by a relay proves nothing now).
    const now = Date.UTC(2026, 0, 1);
    expect(gateHello(trust(), hello(now - maxSignatureAgeMs), WORKER, now).verified).toBe(true);
    expect(gateHello(trust(), hello(now + maxSignatureFutureSkewMs), WORKER, now).verified).toBe(true);
    expect(thrown(() => gateHello(trust(), hello(now - maxSignatureAgeMs - 1), WORKER, now)).code).toBe("STALE_EVENT");
    expect(thrown(() => gateHello(trust(), hello(now + maxSignatureFutureSkewMs + 1), WORKER, now)).code).toBe("STALE_EVENT");
    expect(thrown(() => gateHello(trust(), signedAt(hello(now), bob, "not a time"), WORKER, now)).code).toBe("STALE_EVENT");
  });

  test("a hello is this identity's own only when its own key signed it (no peer lookup: a paired key is not 'self')", () => {
    // Guards gateHello: `own = block.key === identity.publicKey` (resume.ts takes `self` as trusted).
    const now = Date.now();
    expect(gateHello(trust(), hello(now), WORKER, now)).toEqual({
      verified: true,
      key: bob.publicKey,
      fingerprint: bob.fingerprint,
      self: false,
      claimedName: "bob",
    });
    expect(gateHello(createTrustState(trustOf(bob), 0), hello(now), WORKER, now).self).toBe(true);
  });
});

describe("the task-mail gate's remaining edges", () => {
  const alice = generateIdentity().identity;
  const store = () => createTaskStore<CoreBook>();
  function assignment(atMs: number): TaskEnvelope {
    const task = taskRecord({ createdAt: atMs });
    const event = makeEvent(task, "task.created", "1", atMs, { task: task.task });
    return JSON.parse(
      encodeEnvelope(ORIGIN, WORKER, task.taskId, "assignment", { task, event }, atMs, { identity: alice }).text,
    ) as TaskEnvelope;
  }

  test("a signature whose time is no time at all is STALE_EVENT (never taken as fresh)", () => {
    // Guards checkFresh: `Number.isNaN(at)`.
    const now = Date.now();
    expect(
      thrown(() => gateMail(store(), createTrustState(trustOf(alice), 0), signedAt(assignment(now), alice, "not a time"), WORKER, now))
        .code,
    ).toBe("STALE_EVENT");
  });

  test(`the lifetime's edge: signed ${maxSignatureFutureSkewMs} ms before it began passes, 1 ms earlier is STALE_EVENT`, () => {
    // Guards checkLifetime: `at < startedAt - maxSignatureFutureSkewMs`.
    const startedAt = Date.now();
    const trust = () => createTrustState(trustOf(alice), startedAt);
    expect(gateMail(store(), trust(), assignment(startedAt - maxSignatureFutureSkewMs), WORKER, startedAt).verified).toBe(true);
    expect(thrown(() => gateMail(store(), trust(), assignment(startedAt - maxSignatureFutureSkewMs - 1), WORKER, startedAt)).code).toBe(
      "STALE_EVENT",
    );
  });
});

describe("the keys a task's mail must carry, on the gate itself (trust.ts authorize)", () => {
  const [alice, bob, carol, stranger] = [1, 2, 3, 4].map(() => generateIdentity().identity) as [Identity, Identity, Identity, Identity];
  /** The origin's trust: alice, paired with bob and carol. */
  const trust = (extra: Partial<TrustOptions> = {}) => createTrustState(trustOf(alice, { bob, carol }, extra));

  /** An origin's store holding one task (ORIGIN → WORKER) with `meta`. */
  function originTask(meta: TaskMeta) {
    const store = createTaskStore<CoreBook>();
    const task = taskRecord({ createdAt: Date.now() });
    store.putTask(task, "origin");
    store.setTaskMeta(task.taskId, meta);
    return { store, task };
  }

  /** An intent of `type` for `taskId`, signed by `signer` (claiming "worker-session") from WORKER to ORIGIN. */
  function intent(taskId: string, type: "task.information" | "task.refused", signer: Identity): TaskEnvelope {
    const payload = type === "task.refused" ? { reason: "UNKNOWN_PEER" } : { message: "working" };
    return JSON.parse(
      encodeEnvelope(WORKER, ORIGIN, taskId, "intent", makeIntent(taskId, type, payload), Date.now(), {
        identity: signer,
        claimedName: "worker-session",
      }).text,
    ) as TaskEnvelope;
  }

  test("a task's first signed intent binds its key and claimed session; another paired key's intent is NOT_AUTHORIZED from then on", () => {
    // Guards authorize: an intent binds `workerKey` when none is bound (then the bound-key check applies).
    const { store, task } = originTask({});
    expect(gateMail(store, trust(), intent(task.taskId, "task.information", bob), ORIGIN, Date.now()).verified).toBe(true);
    expect(store.getTaskMeta(task.taskId)).toEqual({ workerKey: bob.publicKey, peerSession: "worker-session" });
    expect(thrown(() => gateMail(store, trust(), intent(task.taskId, "task.information", carol), ORIGIN, Date.now())).code).toBe(
      "NOT_AUTHORIZED",
    );
  });

  test("an intent of a key this identity does not trust binds nothing: UNKNOWN_PEER, or PAIRING_PENDING while the human decides", () => {
    // Guards authorize: `!known(signer)` → askHuman, for intents.
    const { store, task } = originTask({});
    expect(thrown(() => gateMail(store, trust(), intent(task.taskId, "task.information", stranger), ORIGIN, Date.now())).code).toBe(
      "UNKNOWN_PEER",
    );
    const pending = trust({ decideUnknown: () => "pending" });
    expect(thrown(() => gateMail(store, pending, intent(task.taskId, "task.information", stranger), ORIGIN, Date.now())).code).toBe(
      "PAIRING_PENDING",
    );
    expect(store.getTaskMeta(task.taskId)).toEqual({});
  });

  test("a refusal may come from any verifying key while no worker key is bound, and binds none; once one is bound, only that key's", () => {
    // Guards authorize: the `task.refused` exemption, and its place after the bound-key check.
    const unbound = originTask({});
    expect(gateMail(unbound.store, trust(), intent(unbound.task.taskId, "task.refused", stranger), ORIGIN, Date.now())).toMatchObject({
      verified: true,
      key: stranger.publicKey,
    });
    expect(unbound.store.getTaskMeta(unbound.task.taskId)).toEqual({});
    const bound = originTask({ workerKey: bob.publicKey });
    for (const other of [carol, stranger]) {
      expect(thrown(() => gateMail(bound.store, trust(), intent(bound.task.taskId, "task.refused", other), ORIGIN, Date.now())).code).toBe(
        "NOT_AUTHORIZED",
      );
    }
    expect(gateMail(bound.store, trust(), intent(bound.task.taskId, "task.refused", bob), ORIGIN, Date.now()).verified).toBe(true);
  });

  test("at the origin, a canonical event of its own task passes only under its own key: its worker's or another paired key's is NOT_AUTHORIZED", () => {
    // Guards authorize: `!signer.self` → refuse, for canonical mail of a task this side originated.
    const { store, task } = originTask({ workerKey: bob.publicKey });
    const now = Date.now();
    const event = makeEvent(task, "task.information", "2", now, { message: "an echo" });
    const echo = (signer: Identity) =>
      JSON.parse(encodeEnvelope(WORKER, ORIGIN, task.taskId, "canonical_event", event, now, { identity: signer }).text) as TaskEnvelope;
    for (const other of [bob, carol]) expect(thrown(() => gateMail(store, trust(), echo(other), ORIGIN, now)).code).toBe("NOT_AUTHORIZED");
    expect(gateMail(store, trust(), echo(alice), ORIGIN, now).verified).toBe(true);
  });
});

// -------------------------------------------------------------------------------------------------
// Flows through intake
// -------------------------------------------------------------------------------------------------

describe("unknown keys", () => {
  test("an origin sends nothing to a worker whose key it does not trust: the worker proves its key, the send is refused, no task exists, the worker never hears of it", async () => {
    const on = await relay();
    const workerIdentity = generateIdentity().identity;
    const worker = await party(on, trustOf(workerIdentity));
    const origin = await party(on, trustOf(generateIdentity().identity, {}, { claimedName: "alice" }));
    await introduce(origin.core, worker.core);
    const refused = await failure(origin.core.createTask({ to: worker.core.endpoint()!, task: "delete the logs" }));
    expect(refused).toMatchObject({ code: "UNKNOWN_PEER", details: { key: workerIdentity.publicKey, created: false } });
    expect(origin.core.listTasks()).toEqual([]);
    await drain([origin, worker]);
    expect(worker.core.listTasks()).toEqual([]);
    expect(worker.host.inserted).toEqual([]);
  });

  test("a worker's key proven only after the send (its answer came later): the task fails locally, marked no effect, and its content never left", async () => {
    const on = await relay();
    const workerIdentity = generateIdentity().identity;
    const worker = await party(on, trustOf(workerIdentity));
    const origin = await party(on, trustOf(generateIdentity().identity));
    const created = await origin.core.createTask({ to: worker.core.endpoint()!, task: "delete the logs" });
    expect(created.delivery).toBe("pending");
    await drain([origin, worker]);
    const task = origin.core.getTask(created.taskId);
    expect(task.status).toBe("failed");
    expect(task.events.at(-1)!.payload).toMatchObject({ noEffect: true, error: { code: "UNKNOWN_PEER" } });
    expect(worker.core.listTasks()).toEqual([]);
  });

  test("an unpaired origin's assignment is refused by the worker (the origin trusts it): never presented there, counted, recorded; the origin's task fails with the verified refusal", async () => {
    const on = await relay();
    const workerIdentity = generateIdentity().identity;
    const worker = await party(on, trustOf(workerIdentity));
    const originIdentity = generateIdentity().identity;
    const origin = await party(on, trustOf(originIdentity, { bob: workerIdentity }, { claimedName: "alice" }));
    await introduce(origin.core, worker.core);
    const { taskId } = await origin.core.createTask({ to: worker.core.endpoint()!, task: "delete the logs" });
    await worker.core.refresh();
    expect(worker.host.inserted).toEqual([]);
    expect(worker.core.findTask(taskId)).toBeUndefined();
    expect(worker.core.rejections()).toEqual({ UNKNOWN_PEER: 1 });
    expect(worker.host.rejections.map((record) => [record.code, record.details.fingerprint, record.details.claimedName])).toEqual([
      ["UNKNOWN_PEER", originIdentity.fingerprint, "alice"],
    ]);
    expect(coreInternals(worker.core).store.pendingDeliveryCount()).toBe(0);

    await origin.core.refresh();
    const task = origin.core.getTask(taskId);
    expect(task.status).toBe("failed");
    expect(task.events.map((event) => event.type)).toEqual(["task.created", "task.refused", "task.failed"]);
    const refused = task.events.find((event) => event.type === "task.refused")!;
    expect(refused.payload).toMatchObject({
      reason: "UNKNOWN_PEER",
      verified: true,
      refusedBy: { key: workerIdentity.publicKey, fingerprint: workerIdentity.fingerprint },
    });
    expect(task.events.at(-1)!.payload).toMatchObject({ error: { code: "ASSIGNMENT_REFUSED", retryable: false } });
    // The model reads the refusal once; the failure it caused is not a second message.
    expect(origin.host.inserted.filter((item) => item.taskId === taskId).map((item) => item.event.type)).toEqual(["task.refused"]);
    expect(origin.core.rejections()).toEqual({});
  });

  test("a refusal signed by another key than the task's proven worker (a relay forging one) is NOT_AUTHORIZED and changes nothing", async () => {
    const on = await relay();
    const a = generateIdentity().identity;
    const b = generateIdentity().identity;
    const stranger = generateIdentity().identity;
    const origin = await party(on, trustOf(a, { bob: b }));
    const worker = await party(on, trustOf(b, { alice: a }));
    await introduce(origin.core, worker.core);
    const { taskId } = await origin.core.createTask({ to: worker.core.endpoint()!, task: "work" });
    await worker.core.refresh();
    await origin.core.refresh();
    const assignment = origin.core.getTask(taskId).events[0]!;
    const intent = {
      intentId: crypto.randomUUID(),
      taskId,
      type: "task.refused",
      payload: { eventId: assignment.eventId, assignmentSig: "A".repeat(86), reason: "UNKNOWN_PEER" },
    };
    const forged = encodeEnvelope(
      worker.core.endpoint()!,
      origin.core.endpoint()!,
      taskId,
      "intent",
      intent as never,
      Date.now(),
      { identity: stranger },
      undefined,
      { sealTo: a.seal!().publicKey },
    );
    await coreInternals(worker.core).session.send(forged);
    await origin.core.refresh();
    expect(origin.core.getTask(taskId).status).toBe("active");
    expect(origin.core.getTask(taskId).events.map((event) => event.type)).not.toContain("task.refused");
    expect(origin.core.rejections()).toEqual({ NOT_AUTHORIZED: 1 });
  });

  test("a refusal naming another assignment signature than the origin's (a relay substituted it) is NOT_AUTHORIZED and changes nothing", async () => {
    const on = await relay();
    const a = generateIdentity().identity;
    const b = generateIdentity().identity;
    const origin = await party(on, trustOf(a, { bob: b }));
    const worker = await party(on, trustOf(b, { alice: a }));
    await introduce(origin.core, worker.core);
    const { taskId } = await origin.core.createTask({ to: worker.core.endpoint()!, task: "work" });
    await worker.core.refresh();
    await origin.core.refresh();
    const assignment = origin.core.getTask(taskId).events[0]!;
    // Signed by the task's own worker key, for the current assignment — but the signature it names
    // is not the one the origin made (what a worker refusing a substituted copy would send).
    const intent = {
      intentId: crypto.randomUUID(),
      taskId,
      type: "task.refused",
      payload: { eventId: assignment.eventId, assignmentSig: "A".repeat(86), reason: "UNKNOWN_PEER" },
    };
    const forged = encodeEnvelope(
      worker.core.endpoint()!,
      origin.core.endpoint()!,
      taskId,
      "intent",
      intent as never,
      Date.now(),
      { identity: b },
      undefined,
      { sealTo: a.seal!().publicKey },
    );
    await coreInternals(worker.core).session.send(forged);
    await origin.core.refresh();
    expect(origin.core.getTask(taskId).status).toBe("active");
    expect(origin.core.getTask(taskId).events.map((event) => event.type)).not.toContain("task.refused");
    expect(origin.core.rejections()).toEqual({ NOT_AUTHORIZED: 1 });
  });

  test("while the local human decides, the mail waits unpresented; once paired it is presented", async () => {
    const on = await relay();
    const workerIdentity = generateIdentity().identity;
    const originIdentity = generateIdentity().identity;
    const paired: Record<string, Identity> = {};
    const asked: PairingRequest[] = [];
    const worker = await party(on, {
      ...trustOf(workerIdentity),
      peerName: (key) => Object.entries(paired).find(([, peer]) => peer.publicKey === key)?.[0],
      decideUnknown: (request) => {
        asked.push(request);
        return "pending";
      },
    });
    const origin = await party(on, trustOf(originIdentity, { worker: workerIdentity }, { claimedName: "alice" }));
    await introduce(origin.core, worker.core);
    const { taskId } = await origin.core.createTask({ to: worker.core.endpoint()!, task: "work" });
    await worker.core.refresh();
    await worker.core.refresh();
    expect(asked.map((request) => [request.fingerprint, request.claimedName, request.kind])).toEqual([
      [originIdentity.fingerprint, "alice", "assignment"],
      [originIdentity.fingerprint, "alice", "assignment"],
    ]);
    expect(worker.host.inserted).toEqual([]);
    expect(worker.core.rejections()).toEqual({});
    expect(coreInternals(worker.core).store.pendingDeliveryCount()).toBe(1);

    paired.alice = originIdentity;
    await worker.core.refresh();
    expect(worker.host.inserted.map((item) => item.event.type)).toEqual(["task.created"]);
    expect(worker.host.inserted[0]!.peer).toMatchObject({ verified: true, peerName: "alice", fingerprint: originIdentity.fingerprint });
    expect(worker.core.getTask(taskId).peer).toMatchObject({ peerName: "alice" });
  });
});

describe("paired peers and bound keys", () => {
  test("paired both ways, a task completes; each side names the other's key", async () => {
    const on = await relay();
    const a = generateIdentity().identity;
    const b = generateIdentity().identity;
    const origin = await party(on, trustOf(a, { bob: b }));
    const worker = await party(on, trustOf(b, { alice: a }));
    await introduce(origin.core, worker.core);
    const { taskId } = await origin.core.createTask({ to: worker.core.endpoint()!, task: "work" });
    await worker.core.refresh();
    await worker.core.done({ taskId, status: "completed", summary: "done" });
    await origin.core.refresh();
    expect(origin.core.getTask(taskId).status).toBe("completed");
    expect(origin.core.getTask(taskId).peer).toMatchObject({ peerName: "bob", fingerprint: b.fingerprint });
    expect(worker.core.getTask(taskId).peer).toMatchObject({ peerName: "alice", fingerprint: a.fingerprint });
    expect([origin.core.rejections(), worker.core.rejections()]).toEqual([{}, {}]);
  });

  test("an intent signed by another trusted key than the task's bound worker key is NOT_AUTHORIZED", async () => {
    const on = await relay();
    const a = generateIdentity().identity;
    const b = generateIdentity().identity;
    const c = generateIdentity().identity;
    const origin = await party(on, trustOf(a, { bob: b, carol: c }));
    const worker = await party(on, trustOf(b, { alice: a }));
    await introduce(origin.core, worker.core);
    const { taskId } = await origin.core.createTask({ to: worker.core.endpoint()!, task: "work" });
    await worker.core.refresh();
    await origin.core.refresh();
    expect(origin.core.getTask(taskId).peer).toMatchObject({ peerName: "bob" });
    // carol (trusted by the origin, but not this task's worker) forges a completion from the
    // worker's endpoint — as a relay could, since the envelope's source is the relay's word.
    const intent = { intentId: crypto.randomUUID(), taskId, type: "task.completed", payload: { summary: "not mine" } };
    const forged = encodeEnvelope(worker.core.endpoint()!, origin.core.endpoint()!, taskId, "intent", intent as never, Date.now(), {
      identity: c,
    });
    await coreInternals(worker.core).session.send(forged);
    await origin.core.refresh();
    expect(origin.core.getTask(taskId).status).toBe("active");
    expect(origin.core.rejections()).toEqual({ NOT_AUTHORIZED: 1 });
  });

  test("a task looking for its peer follows only the key bound to it: another trusted key's mail from a new endpoint moves nothing", async () => {
    const on = await relay();
    const [a, b, c] = [generateIdentity().identity, generateIdentity().identity, generateIdentity().identity];
    const origin = await party(on, trustOf(a, { bob: b, carol: c }));
    const worker = await party(on, trustOf(b, { alice: a }));
    const carol = await party(on, trustOf(c, { alice: a }));
    await introduce(origin.core, worker.core);
    const { taskId } = await origin.core.createTask({ to: worker.core.endpoint()!, task: "work" });
    await drain([origin, worker]);
    const { store, session } = coreInternals(origin.core);
    // The relay restarted: the origin's task looks for its worker (reconnect.ts).
    store.setTaskMeta(taskId, { ...store.getTaskMeta(taskId), reconnectingSince: Date.now() });
    const target = origin.core.getTask(taskId).target;
    // carol, trusted by the origin but not this task's worker, writes from her own endpoint.
    const intent = makeIntent(taskId, "task.information", { message: "I am your worker now" });
    const forged = encodeEnvelope(
      carol.core.endpoint()!,
      origin.core.endpoint()!,
      taskId,
      "intent",
      intent,
      Date.now(),
      { identity: c },
      undefined,
      sealedTo(a),
    );
    await coreInternals(carol.core).session.send(forged);
    await origin.core.refresh();
    expect(origin.core.rejections()).toEqual({ NOT_AUTHORIZED: 1 });
    expect(origin.core.getTask(taskId).target).toEqual(target);
    // Behind the gate the same rule holds: following a moved peer takes its bound key only.
    const context = createCoreContext({ store, session, trust: trustOf(a, { bob: b, carol: c }) });
    const scope = createTaskWorkScope({ timers: systemTimers, mode: "foreground" });
    const envelope = clearEnvelope(JSON.parse(forged.text) as TaskEnvelope, a) as unknown as TaskEnvelope;
    const signer = (identity: Identity) => ({
      verified: true as const,
      key: identity.publicKey,
      fingerprint: identity.fingerprint,
      self: false,
    });
    followMovedPeer(context, scope, envelope, signer(c), store.getTaskMeta(taskId));
    expect(origin.core.getTask(taskId).target).toEqual(target);
    // The bound key's mail from that endpoint moves it (what the check guards).
    followMovedPeer(context, scope, envelope, signer(b), store.getTaskMeta(taskId));
    expect(origin.core.getTask(taskId).target).toEqual(carol.core.endpoint()!);
    scope.dispose();
  });
});

describe("unsigned mail", () => {
  async function unsignedAssignment(opt: boolean) {
    const on = await relay();
    const identity = generateIdentity().identity;
    const worker = await party(on, trustOf(identity, {}, { acceptUnsigned: opt }));
    const origin = await party(on, trustOf(identity));
    const task = taskRecord({
      origin: origin.core.endpoint()!,
      target: worker.core.endpoint()!,
      createdAt: Date.now(),
      expiresAt: Date.now() + 60_000,
    });
    const event = makeEvent(task, "task.created", "1", Date.now(), { task: task.task });
    await coreInternals(origin.core).session.send(
      encodeEnvelope(origin.core.endpoint()!, worker.core.endpoint()!, task.taskId, "assignment", { task, event }, Date.now()),
    );
    await worker.core.refresh();
    return { worker, origin, task, identity };
  }

  test("refused by default (UNSIGNED_EVENT), never presented", async () => {
    const { worker } = await unsignedAssignment(false);
    expect(worker.core.rejections()).toEqual({ UNSIGNED_EVENT: 1 });
    expect(worker.host.inserted).toEqual([]);
  });

  test("with the opt-in, accepted and marked unverified wherever it appears", async () => {
    const { worker, task } = await unsignedAssignment(true);
    expect(worker.core.rejections()).toEqual({});
    expect(worker.host.inserted.map((item) => item.peer)).toEqual([{ verified: false }]);
    expect(worker.core.getTask(task.taskId).peer).toEqual({ verified: false });
  });

  test("even with the opt-in, a task whose party signed before takes no unsigned mail", async () => {
    const on = await relay();
    const identity = generateIdentity().identity;
    const origin = await party(on, trustOf(identity));
    const worker = await party(on, trustOf(identity, {}, { acceptUnsigned: true }));
    await introduce(origin.core, worker.core);
    const { taskId } = await origin.core.createTask({ to: worker.core.endpoint()!, task: "work" });
    await worker.core.refresh();
    const stored = coreInternals(worker.core).store.getStoredTask(taskId)!.record;
    const cancel = makeEvent(stored, "task.cancelled", "9", Date.now(), { summary: "forged" });
    await coreInternals(origin.core).session.send(
      encodedEnvelope(
        JSON.parse(encodeEnvelope(origin.core.endpoint()!, worker.core.endpoint()!, taskId, "canonical_event", cancel, Date.now()).text),
      ),
    );
    await worker.core.refresh();
    expect(worker.core.getTask(taskId).status).toBe("active");
    expect(worker.core.rejections()).toEqual({ NOT_AUTHORIZED: 1 });
  });

  test("an unverified task (an unsigned assignment taken under the opt-in) takes no signed canonical event: any key's cancel is NOT_AUTHORIZED", async () => {
    const { worker, origin, task, identity } = await unsignedAssignment(true);
    const forger = generateIdentity().identity;
    const cancel = makeEvent(task, "task.cancelled", "2", Date.now(), { summary: "forged" });
    const forged = encodeEnvelope(
      origin.core.endpoint()!,
      worker.core.endpoint()!,
      task.taskId,
      "canonical_event",
      cancel,
      Date.now(),
      { identity: forger },
      undefined,
      sealedTo(identity),
    );
    await coreInternals(origin.core).session.send(forged);
    await worker.core.refresh();
    expect(worker.core.rejections()).toEqual({ NOT_AUTHORIZED: 1 });
    expect(worker.core.getTask(task.taskId).status).toBe("active");
    expect(worker.host.inserted.map((item) => item.event.type)).toEqual(["task.created"]);
  });

  test("the origin side: once the worker's key is bound, an unsigned intent is NOT_AUTHORIZED even with the opt-in", async () => {
    const on = await relay();
    const identity = generateIdentity().identity;
    const origin = await party(on, trustOf(identity, {}, { acceptUnsigned: true }));
    const worker = await party(on, trustOf(identity));
    await introduce(origin.core, worker.core);
    const { taskId } = await origin.core.createTask({ to: worker.core.endpoint()!, task: "work" });
    await worker.core.refresh();
    await origin.core.refresh();
    expect(coreInternals(origin.core).store.getTaskMeta(taskId)?.workerKey).toBe(identity.publicKey);
    const intent = makeIntent(taskId, "task.completed", { summary: "unsigned" });
    await coreInternals(worker.core).session.send(
      encodeEnvelope(worker.core.endpoint()!, origin.core.endpoint()!, taskId, "intent", intent, Date.now()),
    );
    await origin.core.refresh();
    expect(origin.core.rejections()).toEqual({ NOT_AUTHORIZED: 1 });
    expect(origin.core.getTask(taskId).status).toBe("active");
  });
});

describe("a malformed peers.json", () => {
  test("mail from a peer waits (tracked, unACKed, reported) until the file is readable again, then is presented", async () => {
    const on = await relay();
    const a = generateIdentity().identity;
    const b = generateIdentity().identity;
    let broken = true;
    const worker = await party(on, {
      identity: b,
      peerName: (key) => {
        if (broken) throw new TaskError("PEERS_INVALID");
        return key === a.publicKey ? "alice" : undefined;
      },
    });
    const origin = await party(on, trustOf(a, { bob: b }));
    // Answering a hello needs no peer lookup: the broken file does not stop the proof.
    await introduce(origin.core, worker.core);
    await origin.core.createTask({ to: worker.core.endpoint()!, task: "work" });
    const report = await worker.core.refresh();
    expect(report.failures.get("intake")?.code).toBe("PEERS_INVALID");
    expect(coreInternals(worker.core).store.pendingDeliveryCount()).toBe(1);
    expect(worker.host.inserted).toEqual([]);
    expect(worker.core.rejections()).toEqual({});
    broken = false;
    await worker.core.refresh();
    expect(worker.host.inserted.map((item) => item.event.type)).toEqual(["task.created"]);
  });
});
