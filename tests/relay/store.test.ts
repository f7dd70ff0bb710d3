/**
 * The `RelayStore` seam (src/relay-server/store/): the memory store's atomic admission and
 * epoch, the budget invariants (`INVARIANT_VIOLATED` on a double release or a drifted total), and
 * that the relay answers such an internal failure 503 `RELAY_UNAVAILABLE`, never with the code
 * itself, when a store is injected into `startRelayServer`.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { expectWireError, expectWireValue } from "../../src/conformance/suite.ts";
import { WireSession } from "../../src/conformance/wire-client.ts";
import { canonicalJson } from "../../src/protocol/canonical-json.ts";
import { errorSpec, TaskError } from "../../src/protocol/errors.ts";
import { leaseMaxMs, RELAY_ID, relayMaxMailboxItems, WIRE_PROTOCOL_VERSION } from "../../src/protocol/limits.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import { type RelayServer, startRelayServer } from "../../src/relay-server/server.ts";
import { createBudgets } from "../../src/relay-server/store/budgets.ts";
import { createMemoryStore } from "../../src/relay-server/store/memory.ts";
import type { AdmitRequest, RelayStore } from "../../src/relay-server/store/store.ts";

/** Matches the `INVARIANT_VIOLATED` error of `rule`. */
const violated = (rule: string) => expect.objectContaining({ code: "INVARIANT_VIOLATED", retryable: false, details: expect.objectContaining({ rule }) });

describe("budget invariants", () => {
  test("a double release is INVARIANT_VIOLATED: a counter never goes negative", () => {
    const budgets = createBudgets();
    const mailbox = { items: 0, bytes: 0 };
    expect(budgets.reserve(mailbox, 100, 50)).toBeUndefined();
    budgets.releaseItem(mailbox, 100);
    expect(() => budgets.releaseItem(mailbox, 100)).toThrow(violated("mailbox usage is never negative"));
    budgets.releaseReceipt(50);
    expect(() => budgets.releaseReceipt(50)).toThrow(violated("receipt usage is never negative"));
  });

  test("the audit finds relay-wide usage that is not the sum of the mailboxes, and a mailbox over its bound", () => {
    const budgets = createBudgets();
    const first = { items: 0, bytes: 0 };
    const second = { items: 0, bytes: 0 };
    budgets.reserve(first, 100, 50);
    budgets.reserve(second, 200, 50);
    budgets.audit([first, second]);
    // A mailbox the relay-wide counters never saw.
    expect(() => budgets.audit([first, second, { items: 1, bytes: 10 }])).toThrow(violated("relay-wide usage is the sum of the mailboxes' usage"));
    expect(() => budgets.audit([first, { items: relayMaxMailboxItems + 1, bytes: 0 }])).toThrow(violated("mailbox usage stays within its bound"));
  });

  test("INVARIANT_VIOLATED is internal: no HTTP status of its own, never retryable", () => {
    expect(errorSpec("INVARIANT_VIOLATED")).toMatchObject({ class: "internal", retryable: false });
    expect(errorSpec("INVARIANT_VIOLATED").httpStatus).toBeUndefined();
  });
});

describe("memory store", () => {
  const endpoint = (id: string): TaskEndpoint => ({ relay: RELAY_ID, id });

  async function connected(store: RelayStore, session: string): Promise<TaskEndpoint> {
    const outcome = await store.connect({ session, generation: crypto.randomUUID(), leaseMs: leaseMaxMs, now: Date.now() });
    if (outcome.kind !== "connected") throw new Error(`connect: ${outcome.kind}`);
    return endpoint(outcome.registration.endpointId);
  }

  function admission(source: TaskEndpoint, target: TaskEndpoint): AdmitRequest {
    const envelope = { envelopeId: crypto.randomUUID(), protocolVersion: WIRE_PROTOCOL_VERSION, source, target, payload: {}, createdAt: new Date().toISOString() };
    const text = canonicalJson(envelope);
    return { envelopeId: envelope.envelopeId, digest: text, text, source, target, fresh: true, now: Date.now() };
  }

  test("a fresh store has a fresh epoch", async () => {
    const [a, b] = [createMemoryStore(), createMemoryStore()];
    expect(await a.epoch()).not.toBe(await b.epoch());
    expect(await a.epoch()).toBe(await a.epoch());
  });

  test("admissions racing on one mailbox never over-admit nor share a cursor", async () => {
    const store = createMemoryStore();
    const source = await connected(store, "racer-source");
    const target = await connected(store, "racer-target");
    const outcomes = await Promise.all(Array.from({ length: relayMaxMailboxItems + 20 }, () => store.admit(admission(source, target))));
    expect(outcomes.filter((outcome) => outcome.kind === "accepted").length).toBe(relayMaxMailboxItems);
    expect(outcomes.filter((outcome) => outcome.kind === "full").every((outcome) => outcome.kind === "full" && outcome.budget === "mailbox")).toBe(true);
    const page = await store.page(target.id, "0", relayMaxMailboxItems);
    if (page.kind !== "page") throw new Error(page.kind);
    const cursors = (JSON.parse(page.itemsJson) as { cursor: string }[]).map((item) => item.cursor);
    expect(new Set(cursors).size).toBe(cursors.length);
    expect((await store.usage()).activeItems).toBe(relayMaxMailboxItems);
    await store.maintain(Date.now());
  });

  test("dedupe, conflict, staleness and a dead target are outcomes in that order; an acknowledgement frees the budgets", async () => {
    const store = createMemoryStore();
    const source = await connected(store, "order-source");
    const target = await connected(store, "order-target");
    const request = admission(source, target);
    const accepted = await store.admit(request);
    expect(accepted).toMatchObject({ kind: "accepted", duplicate: false });
    expect(await store.admit({ ...request, fresh: false })).toEqual({ ...accepted, duplicate: true } as never);
    expect(await store.admit({ ...request, digest: "another" })).toEqual({ kind: "conflict" });
    expect(await store.admit({ ...admission(source, target), fresh: false })).toEqual({ kind: "stale" });
    expect(await store.admit(admission(source, endpoint(crypto.randomUUID())))).toEqual({ kind: "target-not-live" });
    expect(await store.acknowledge(target.id, request.envelopeId)).toEqual({ kind: "acknowledged", duplicate: false });
    expect(await store.acknowledge(target.id, request.envelopeId)).toEqual({ kind: "acknowledged", duplicate: true });
    expect(await store.acknowledge(source.id, request.envelopeId)).toEqual({ kind: "unknown" });
    expect(await store.usage()).toMatchObject({ activeItems: 0, activeBytes: 0, receipts: 1 });
    // Liveness comes first: a resend to a target that went away is not answered from the receipt.
    await store.disconnect(target.id, Date.now());
    expect(await store.admit(request)).toEqual({ kind: "target-not-live" });
    await store.maintain(Date.now());
  });
});

describe("a relay on an injected store", () => {
  let relay: RelayServer | undefined;
  afterEach(async () => {
    await relay?.stop();
    relay = undefined;
  });

  test("the relay runs on the store it is given and answers a broken invariant 503 RELAY_UNAVAILABLE, never INVARIANT_VIOLATED", async () => {
    const memory = createMemoryStore();
    let broken = false;
    const store: RelayStore = {
      ...memory,
      async usage() {
        if (broken) throw new TaskError("INVARIANT_VIOLATED", { details: { rule: "injected" } });
        return memory.usage();
      },
    };
    relay = await startRelayServer({ port: 0, env: {}, store });
    expect(relay.epoch).toBe(await memory.epoch());
    const session = await WireSession.connect(relay.url, { label: "invariant" });
    expectWireValue(await session.call("health"), "health", relay.epoch);
    broken = true;
    const reply = await session.call("health");
    const error = expectWireError(reply, "RELAY_UNAVAILABLE", { epoch: relay.epoch, requireEpoch: true });
    expect(error.mayHaveBeenDelivered).toBe(true);
    expect(reply.text).not.toContain("INVARIANT_VIOLATED");
  });
});
