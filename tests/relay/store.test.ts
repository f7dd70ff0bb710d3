/**
 * The `RelayStore` seam (src/relay-server/store/): the memory store against the store contract
 * (tests/helpers/store-contract.ts) and its epoch, the budget invariants (`INVARIANT_VIOLATED` on
 * a double release or a drifted total), and that the relay answers such an internal failure 503
 * `RELAY_UNAVAILABLE`, never with the code itself, when a store is injected into `startRelayServer`.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { expectWireError, expectWireValue } from "../../src/conformance/kit.ts";
import { WireSession } from "../../src/conformance/wire-client.ts";
import { errorSpec, TaskError } from "../../src/protocol/errors.ts";
import { maxRelayMailboxItems, maxRelaySenderMailboxItems } from "../../src/protocol/limits.ts";
import { type RelayServer, startRelayServer } from "../../src/relay-server/server.ts";
import { createBudgets } from "../../src/relay-server/store/budgets.ts";
import { createMemoryStore } from "../../src/relay-server/store/memory.ts";
import type { RelayStore } from "../../src/relay-server/store/store.ts";
import { describeRelayStore } from "../helpers/store-contract.ts";

/** Matches the `INVARIANT_VIOLATED` error of `rule`. */
const violated = (rule: string) =>
  expect.objectContaining({ code: "INVARIANT_VIOLATED", retryable: false, details: expect.objectContaining({ rule }) });

describe("budget invariants", () => {
  /** One item of `itemBytes` in `mailbox` from `senderId`, with a receipt of `receiptBytes`. */
  const reservation = (
    mailbox: { items: number; bytes: number },
    share: { items: number; bytes: number },
    senderId: string,
    itemBytes: number,
    receiptBytes: number,
  ) => ({ mailbox, share, senderId, itemBytes, receiptBytes });

  test("a double release is INVARIANT_VIOLATED: a counter never goes negative", () => {
    const budgets = createBudgets();
    const mailbox = { items: 0, bytes: 0 };
    const share = { items: 0, bytes: 0 };
    expect(budgets.reserve(reservation(mailbox, share, "a", 100, 50))).toBeUndefined();
    budgets.releaseItem(mailbox, share, "a", 100);
    expect(() => budgets.releaseItem(mailbox, share, "a", 100)).toThrow(violated("mailbox usage is never negative"));
    budgets.releaseReceipt("a", 50);
    expect(() => budgets.releaseReceipt("a", 50)).toThrow(violated("receipt usage is never negative"));
  });

  test("the audit finds relay-wide usage that is not the sum of the mailboxes, or of the senders, or a mailbox not the sum of its shares, and a mailbox over its bound", () => {
    const budgets = createBudgets();
    const first = { items: 0, bytes: 0 };
    const second = { items: 0, bytes: 0 };
    const [a, b] = [
      { items: 0, bytes: 0 },
      { items: 0, bytes: 0 },
    ];
    budgets.reserve(reservation(first, a, "a", 100, 50));
    budgets.reserve(reservation(second, b, "b", 200, 50));
    budgets.audit([
      { usage: first, shares: [a] },
      { usage: second, shares: [b] },
    ]);
    expect(budgets.senders()).toBe(2);
    // A mailbox the relay-wide counters never saw.
    expect(() =>
      budgets.audit([
        { usage: first, shares: [a] },
        { usage: second, shares: [b] },
        { usage: { items: 1, bytes: 10 }, shares: [{ items: 1, bytes: 10 }] },
      ]),
    ).toThrow(violated("relay-wide usage is the sum of the mailboxes' usage"));
    expect(() =>
      budgets.audit([
        { usage: first, shares: [] },
        { usage: second, shares: [b] },
      ]),
    ).toThrow(violated("a mailbox's usage is the sum of its senders' shares"));
    expect(() =>
      budgets.audit([
        { usage: first, shares: [a] },
        { usage: { items: maxRelayMailboxItems + 1, bytes: 0 }, shares: [] },
      ]),
    ).toThrow(violated("mailbox usage stays within its bound"));
  });

  test("a sender's share is reserved with the item and refused past its bound, the share named", () => {
    const budgets = createBudgets();
    const mailbox = { items: 0, bytes: 0 };
    const share = { items: 0, bytes: 0 };
    for (let index = 0; index < maxRelaySenderMailboxItems; index += 1)
      expect(budgets.reserve(reservation(mailbox, share, "a", 10, 50))).toBeUndefined();
    expect(budgets.reserve(reservation(mailbox, share, "a", 10, 50))).toEqual({
      kind: "quota",
      quota: "mailbox-share",
      details: { items: maxRelaySenderMailboxItems, bytes: 10 * maxRelaySenderMailboxItems },
    });
    // Another sender's share of the same mailbox is its own.
    expect(budgets.reserve(reservation(mailbox, { items: 0, bytes: 0 }, "b", 10, 50))).toBeUndefined();
    expect(share.items).toBe(maxRelaySenderMailboxItems);
  });

  test("INVARIANT_VIOLATED is internal: no HTTP status of its own, never retryable", () => {
    expect(errorSpec("INVARIANT_VIOLATED")).toMatchObject({ class: "internal", retryable: false });
    expect(errorSpec("INVARIANT_VIOLATED").httpStatus).toBeUndefined();
  });
});

describe("memory store", () => {
  test("a fresh store has a fresh epoch", async () => {
    const [a, b] = [createMemoryStore(), createMemoryStore()];
    expect(await a.epoch()).not.toBe(await b.epoch());
    expect(await a.epoch()).toBe(await a.epoch());
  });
});

// The cases every store passes (the Redis store runs them too: tests/redis/store.test.ts).
describeRelayStore("memory", async () => createMemoryStore());

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
