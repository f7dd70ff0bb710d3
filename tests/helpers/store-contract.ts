/**
 * The `RelayStore` contract (src/relay-server/store/store.ts) as tests any store must pass: the
 * in-process store (tests/relay/store.test.ts) and the Redis store (tests/redis/store.test.ts) run
 * the same cases, so both keep one semantic. Each test gets a fresh, empty store from `open` and
 * closes it afterwards. Times are the caller's clock (`now` per call), so retention is tested by
 * passing a later `now`, never by waiting.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { canonicalJson, sha256Hex } from "../../src/protocol/canonical-json.ts";
import {
  maxLeaseMs,
  maxReceivePageBytes,
  relayActivityResolutionMs,
  relayMailLifetimeMs,
  maxRelayActiveItems,
  maxRelayMailboxItems,
  maxRelayRegistrations,
  relayReceiptRetentionMs,
  relayRegistrationGraceMs,
  relayRegistrationIdleMs,
  relayRegistrationRetentionMs,
  maxRelaySenderActiveItems,
  maxRelaySenderMailboxItems,
  maxRelaySenderReceiptBytes,
  maxRelaySenderReceipts,
} from "../../src/protocol/limits.ts";
import { RELAY_ID, WIRE_PROTOCOL_VERSION } from "../../src/protocol/names.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import { secretDigest } from "../../src/relay-server/binding-secret.ts";
import type { AdmitRequest, RelayStore } from "../../src/relay-server/store/store.ts";

const endpoint = (id: string): TaskEndpoint => ({ relay: RELAY_ID, id });

export async function connected(
  store: RelayStore,
  session: string,
  options: { generation?: string; now?: number; leaseMs?: number; secret?: string } = {},
): Promise<TaskEndpoint> {
  const outcome = await store.connect({
    session,
    generation: options.generation ?? crypto.randomUUID(),
    leaseMs: options.leaseMs ?? maxLeaseMs,
    now: options.now ?? Date.now(),
    ...(options.secret === undefined ? {} : { secretDigest: secretDigest(options.secret) }),
  });
  if (outcome.kind !== "connected") throw new Error(`connect: ${outcome.kind}`);
  return endpoint(outcome.registration.endpointId);
}

/** Senders enough that `items` admissions into one mailbox stay within each sender's share of it (`quotas-v1`). */
export const sendersFor = (items: number) => Math.ceil(items / maxRelaySenderMailboxItems);

/** `count` fresh registrations named `label-N`. */
export function connectedMany(store: RelayStore, label: string, count: number, options: { now?: number } = {}): Promise<TaskEndpoint[]> {
  return Promise.all(Array.from({ length: count }, (_, index) => connected(store, `${label}-${index}`, options)));
}

/** An admission of a fresh envelope (its digest the real one) with a payload of `payloadChars` characters after a few multi-byte ones. */
export async function admission(
  source: TaskEndpoint,
  target: TaskEndpoint,
  options: { now?: number; payloadChars?: number; envelopeId?: string } = {},
): Promise<AdmitRequest> {
  const envelope = {
    envelopeId: options.envelopeId ?? crypto.randomUUID(),
    protocolVersion: WIRE_PROTOCOL_VERSION,
    source,
    target,
    payload: { text: `é✓😀${"x".repeat(options.payloadChars ?? 0)}` },
    createdAt: new Date().toISOString(),
  };
  const text = canonicalJson(envelope);
  return {
    envelopeId: envelope.envelopeId,
    digest: await sha256Hex(text),
    text,
    source,
    target,
    fresh: true,
    now: options.now ?? Date.now(),
  };
}

async function pageOf(store: RelayStore, target: TaskEndpoint, after = "0", limit = maxRelayMailboxItems) {
  const page = await store.page(target.id, after, limit);
  if (page.kind !== "page") throw new Error(`page: ${page.kind}`);
  const items = JSON.parse(page.itemsJson) as { cursor: string; envelope: { envelopeId: string } }[];
  return { ...page, items, cursors: items.map((item) => item.cursor), ids: items.map((item) => item.envelope.envelopeId) };
}

export function describeRelayStore(label: string, open: () => Promise<RelayStore>): void {
  describe(`RelayStore contract: ${label}`, () => {
    const opened: RelayStore[] = [];
    afterEach(async () => {
      await Promise.all(opened.splice(0).map((store) => store.close()));
    });
    async function fresh(): Promise<RelayStore> {
      const store = await open();
      opened.push(store);
      return store;
    }

    test("the epoch is stable while the state lives", async () => {
      const store = await fresh();
      const epoch = await store.epoch();
      expect(epoch).toMatch(/^[0-9a-f-]{36}$/);
      await connected(store, "epoch-a");
      expect(await store.epoch()).toBe(epoch);
    });

    test("admissions racing on one mailbox never over-admit nor share a cursor", async () => {
      const store = await fresh();
      // Several senders, each within its share of the mailbox, so the mailbox's own bound is what refuses.
      const sources = await connectedMany(store, "racer-source", sendersFor(maxRelayMailboxItems) + 1);
      const target = await connected(store, "racer-target");
      const requests = await Promise.all(
        Array.from({ length: maxRelayMailboxItems + 20 }, (_, index) => admission(sources[index % sources.length]!, target)),
      );
      const outcomes = await Promise.all(requests.map((request) => store.admit(request)));
      expect(outcomes.filter((outcome) => outcome.kind === "accepted").length).toBe(maxRelayMailboxItems);
      expect(
        outcomes
          .filter((outcome) => outcome.kind !== "accepted")
          .every((outcome) => outcome.kind === "full" && outcome.budget === "mailbox"),
      ).toBe(true);
      const page = await pageOf(store, target);
      expect(new Set(page.cursors).size).toBe(maxRelayMailboxItems);
      expect(page.cursors.at(-1)).toBe(String(maxRelayMailboxItems));
      expect((await store.usage()).activeItems).toBe(maxRelayMailboxItems);
      expect(await store.maintain(Date.now())).toEqual({ reaped: 0, expiredReceipts: 0, expiredMail: 0 });
    });

    test("dedupe, conflict, staleness and a dead target are outcomes in that order; an acknowledgement frees the budgets", async () => {
      const store = await fresh();
      const source = await connected(store, "order-source");
      const target = await connected(store, "order-target");
      const request = await admission(source, target);
      const accepted = await store.admit(request);
      expect(accepted).toMatchObject({ kind: "accepted", duplicate: false, acceptedAt: request.now });
      expect(await store.admit({ ...request, fresh: false })).toEqual({ ...accepted, duplicate: true } as never);
      expect(await store.admit({ ...request, digest: "another" })).toEqual({ kind: "conflict" });
      expect(await store.admit({ ...(await admission(source, target)), fresh: false })).toEqual({ kind: "stale" });
      expect(await store.admit(await admission(source, endpoint(crypto.randomUUID())))).toEqual({ kind: "target-not-live" });
      const sent = await store.usage();
      expect(sent).toMatchObject({ activeItems: 1, activeBytes: Buffer.byteLength(request.text), receipts: 1 });
      expect(await store.acknowledge(target.id, request.envelopeId)).toEqual({ kind: "acknowledged", duplicate: false });
      expect(await store.acknowledge(target.id, request.envelopeId)).toEqual({ kind: "acknowledged", duplicate: true });
      expect(await store.acknowledge(source.id, request.envelopeId)).toEqual({ kind: "unknown" });
      expect(await store.acknowledge(target.id, "never-sent")).toEqual({ kind: "unknown" });
      expect(await store.usage()).toMatchObject({ activeItems: 0, activeBytes: 0, receipts: 1, receiptBytes: sent.receiptBytes });
      // Liveness comes first: a resend to a target that went away is not answered from the receipt.
      await store.disconnect(target.id, Date.now());
      expect(await store.admit(request)).toEqual({ kind: "target-not-live" });
      await store.maintain(Date.now());
    });

    test("envelope ids of any form (not only lowercase UUIDs, which stores may keep packed) are deduplicated, paged, acknowledged and dropped as given", async () => {
      const store = await fresh();
      const source = await connected(store, "forms-source");
      const target = await connected(store, "forms-target", { generation: "f1" });
      const ids = [
        crypto.randomUUID().toUpperCase(),
        crypto.randomUUID().replaceAll("-", ""),
        `${crypto.randomUUID()} `,
        "é✓😀:#~{",
        "x".repeat(300),
        "0".repeat(64),
        crypto.randomUUID(),
      ];
      const requests = await Promise.all(ids.map((envelopeId) => admission(source, target, { envelopeId })));
      const accepted = [];
      for (const request of requests) accepted.push(await store.admit(request));
      expect(accepted.every((outcome) => outcome.kind === "accepted" && !outcome.duplicate)).toBe(true);
      expect(new Set(accepted.map((outcome) => (outcome as { acceptanceId: string }).acceptanceId)).size).toBe(ids.length);
      for (const [index, request] of requests.entries()) {
        expect(await store.admit(request)).toEqual({ ...accepted[index]!, duplicate: true } as never);
        expect(await store.admit({ ...request, digest: "another" })).toEqual({ kind: "conflict" });
      }
      const page = await pageOf(store, target);
      expect(page.ids).toEqual(ids);
      expect(page.itemsJson).toBe(
        `[${requests.map((request, index) => `{"cursor":"${index + 1}","envelope":${request.text}}`).join(",")}]`,
      );
      expect(await store.acknowledge(target.id, ids[0]!.toLowerCase())).toEqual({ kind: "unknown" });
      for (const id of ids.slice(0, 3)) expect(await store.acknowledge(target.id, id)).toEqual({ kind: "acknowledged", duplicate: false });
      expect((await pageOf(store, target)).ids).toEqual(ids.slice(3));
      expect(await store.usage()).toMatchObject({ activeItems: ids.length - 3, receipts: ids.length });
      // A new generation drops the mailbox: the queued ones are conflicts now, the acknowledged ones still duplicates.
      const next = await connected(store, "forms-target", { generation: "f2" });
      expect((await store.usage()).activeItems).toBe(0);
      for (const request of requests.slice(3)) expect(await store.admit({ ...request, target: next })).toEqual({ kind: "conflict" });
      expect(await store.admit(requests[0]!)).toEqual({ kind: "target-not-live" });
      await store.maintain(Date.now());
    });

    test("admitEach (send-batch-v1, ack-carry-v1): each admission in order, a refused target's later ones skipped, the acknowledgements only when all were accepted", async () => {
      const store = await fresh();
      const source = await connected(store, "each-source");
      const [b, c] = [await connected(store, "each-b"), await connected(store, "each-c")];
      const gone = endpoint(crypto.randomUUID());
      const binding = { session: "each-source", endpointId: source.id, now: Date.now() };
      const first = await admission(b, source);
      expect(await store.admit(first)).toMatchObject({ kind: "accepted" });
      const requests = [
        await admission(source, b),
        await admission(source, gone),
        await admission(source, gone),
        await admission(source, c),
      ];
      const carried = await store.bound(binding, { kind: "admitEach", requests, acknowledge: [first.envelopeId] });
      expect(carried.outcome!.admitted.map((outcome) => outcome.kind)).toEqual(["accepted", "target-not-live", "skipped", "accepted"]);
      // A refusal withholds the acknowledgements: the delivery stays.
      expect(carried.outcome!.acknowledged).toBeUndefined();
      expect((await pageOf(store, source)).ids).toEqual([first.envelopeId]);
      expect((await pageOf(store, b)).ids).toEqual([requests[0]!.envelopeId]);
      expect((await pageOf(store, c)).ids).toEqual([requests[3]!.envelopeId]);
      // All accepted (the first a duplicate now): the acknowledgements follow, each its outcome in order.
      const again = await store.bound(binding, {
        kind: "admitEach",
        requests: [requests[0]!],
        acknowledge: [first.envelopeId, "never-sent"],
      });
      expect(again.outcome).toMatchObject({ admitted: [{ kind: "accepted", duplicate: true }] });
      expect(again.outcome!.acknowledged).toEqual([{ kind: "acknowledged", duplicate: false }, { kind: "unknown" }]);
      expect((await pageOf(store, source)).ids).toEqual([]);
      // A binding that does not pass does nothing.
      const stranger = await store.bound({ ...binding, session: "each-b" }, { kind: "admitEach", requests: [await admission(source, c)] });
      expect(stranger.outcome).toBeUndefined();
      expect((await pageOf(store, c)).ids).toEqual([requests[3]!.envelopeId]);
    });

    test("pages: after a cursor, at most `limit` items, hasMore, sparse cursors after acknowledgements, and a cursor ahead of the mailbox", async () => {
      const store = await fresh();
      const source = await connected(store, "page-source");
      const target = await connected(store, "page-target");
      const sent: string[] = [];
      const texts: string[] = [];
      for (let index = 0; index < 5; index += 1) {
        const request = await admission(source, target);
        await store.admit(request);
        sent.push(request.envelopeId);
        texts.push(request.text);
      }
      const first = await pageOf(store, target, "0", 2);
      expect(first).toMatchObject({ cursors: ["1", "2"], nextCursor: "2", hasMore: true });
      expect(first.ids).toEqual(sent.slice(0, 2));
      const rest = await pageOf(store, target, "2", 10);
      expect(rest).toMatchObject({ cursors: ["3", "4", "5"], nextCursor: "5", hasMore: false });
      const empty = await pageOf(store, target, "5", 10);
      expect(empty).toMatchObject({ itemsJson: "[]", nextCursor: "5", hasMore: false });
      expect(await store.page(target.id, "6", 10)).toEqual({ kind: "cursor-ahead", highestCursor: "5" });
      expect(await store.page(target.id, "1".repeat(32), 10)).toEqual({ kind: "cursor-ahead", highestCursor: "5" });
      await store.acknowledge(target.id, sent[1]!);
      await store.acknowledge(target.id, sent[3]!);
      expect((await pageOf(store, target, "0", 10)).cursors).toEqual(["1", "3", "5"]);
      // An item's envelope is the admitted text, spliced in as is.
      expect(first.itemsJson).toBe(`[{"cursor":"1","envelope":${texts[0]}},{"cursor":"2","envelope":${texts[1]}}]`);
    });

    test("a page is cut at the page byte budget, with hasMore", async () => {
      const store = await fresh();
      const source = await connected(store, "bytes-source");
      const target = await connected(store, "bytes-target");
      const sizes: number[] = [];
      for (let index = 0; index < 8; index += 1) {
        const request = await admission(source, target, { payloadChars: 40_000 + index });
        await store.admit(request);
        // What a page charges for an item: `{"cursor":"N","envelope":TEXT}` in bytes.
        sizes.push(Buffer.byteLength(`{"cursor":"${index + 1}","envelope":}`) + Buffer.byteLength(request.text));
      }
      let fits = 0;
      for (let total = sizes[0]!; total <= maxReceivePageBytes; total += sizes[fits]!) fits += 1;
      const page = await pageOf(store, target, "0", 50);
      expect(fits).toBeLessThan(sizes.length);
      expect(page.items.length).toBe(fits);
      expect(page).toMatchObject({ hasMore: true, nextCursor: String(fits) });
    });

    test("registrations: a renewal keeps the endpoint, a new generation supersedes (mailbox dropped, receipts conflict), a late old generation is retired", async () => {
      const store = await fresh();
      const now = Date.now();
      const source = await connected(store, "gen-source");
      const first = await connected(store, "gen", { generation: "g1", now });
      expect(await connected(store, "gen", { generation: "g1", now: now + 1 })).toEqual(first);
      const queued = await admission(source, first);
      await store.admit(queued);
      expect((await store.usage()).activeItems).toBe(1);
      await store.disconnect(first.id, now + 2);
      expect(await store.registration(first.id)).toMatchObject({ state: "disconnected", leaseExpiresAt: now + 2 });
      // The same generation revives its disconnected registration.
      expect(await connected(store, "gen", { generation: "g1", now: now + 3 })).toEqual(first);
      const second = await connected(store, "gen", { generation: "g2", now: now + 4 });
      expect(second.id).not.toBe(first.id);
      expect(await store.registration(first.id)).toMatchObject({ endpointId: first.id, session: "gen", state: "superseded" });
      expect(await store.sessionRegistration("gen")).toMatchObject({ endpointId: second.id, state: "active" });
      expect(await store.successor(first.id, now + 5)).toMatchObject({ endpointId: second.id });
      expect(await store.successor(second.id, now + 5)).toBeUndefined();
      // The old mailbox is gone with its budget; its envelope is a conflict now (it can never be received).
      expect((await store.usage()).activeItems).toBe(0);
      expect(await store.admit({ ...queued, target: second })).toEqual({ kind: "conflict" });
      expect(await store.acknowledge(first.id, queued.envelopeId)).toEqual({ kind: "unknown" });
      expect(await store.connect({ session: "gen", generation: "g1", leaseMs: maxLeaseMs, now: now + 6 })).toEqual({
        kind: "generation-retired",
      });
      const third = await connected(store, "gen", { generation: "g3", now: now + 7 });
      expect(await store.successor(first.id, now + 8)).toMatchObject({ endpointId: third.id });
      await store.disconnect(third.id, now + 9);
      expect(await store.successor(first.id, now + 10)).toBeUndefined();
      expect(await store.sessionRegistration("nobody")).toBeUndefined();
      expect(await store.registration(crypto.randomUUID())).toBeUndefined();
    });

    test("binding: the caller is known by its session; the registration and its secret are judged", async () => {
      const store = await fresh();
      const plain = await connected(store, "bind-plain");
      const guarded = await connected(store, "bind-guarded", { secret: "s".repeat(40) });
      expect(await store.binding("bind-plain", plain.id)).toMatchObject({
        callerKnown: true,
        secret: "ok",
        registration: { endpointId: plain.id, session: "bind-plain", state: "active" },
      });
      expect(await store.binding("bind-plain", plain.id, secretDigest("x".repeat(40)))).toMatchObject({ secret: "mismatch" });
      expect(await store.binding("bind-guarded", guarded.id)).toMatchObject({ secret: "missing" });
      expect(await store.binding("bind-guarded", guarded.id, secretDigest("s".repeat(40)))).toMatchObject({ secret: "ok" });
      expect(await store.binding("bind-guarded", guarded.id, secretDigest("t".repeat(40)))).toMatchObject({ secret: "mismatch" });
      expect(await store.binding("nobody", crypto.randomUUID())).toEqual({ callerKnown: false, registration: undefined, secret: "ok" });
    });

    test("binding-secret-v1: a protected live registration refuses other connects; after its lease, the same generation needs the secret and a new one may take the name", async () => {
      const store = await fresh();
      const now = Date.now();
      const secret = "p".repeat(40);
      const owner = await connected(store, "prot", { generation: "g1", now, leaseMs: 1_000, secret });
      expect(await store.connect({ session: "prot", generation: "g2", leaseMs: 1_000, now: now + 1 })).toEqual({
        kind: "session-protected",
        leaseExpiresAt: now + 1_000,
      });
      expect(await connected(store, "prot", { generation: "g1", now: now + 2, leaseMs: 1_000, secret })).toEqual(owner);
      const lapsed = now + 5_000;
      expect(await store.connect({ session: "prot", generation: "g1", leaseMs: 1_000, now: lapsed })).toEqual({ kind: "secret-missing" });
      expect(
        await store.connect({ session: "prot", generation: "g1", leaseMs: 1_000, now: lapsed, secretDigest: secretDigest("q".repeat(40)) }),
      ).toEqual({ kind: "secret-mismatch" });
      const taken = await connected(store, "prot", { generation: "g9", now: lapsed });
      expect(taken.id).not.toBe(owner.id);
      // The new registration is unprotected: another generation may replace it at once.
      expect((await connected(store, "prot", { generation: "g10", now: lapsed + 1 })).id).not.toBe(taken.id);
    });

    test("live registrations and session lookups follow leases", async () => {
      const store = await fresh();
      const now = Date.now();
      const a = await connected(store, "live-a", { now, leaseMs: 1_000 });
      const b = await connected(store, "live-b", { now, leaseMs: 5_000 });
      const names = async (at: number) => (await store.liveRegistrations(at)).map((registration) => registration.session).sort();
      expect(await names(now + 1)).toEqual(["live-a", "live-b"]);
      expect(await names(now + 2_000)).toEqual(["live-b"]);
      await store.disconnect(b.id, now + 3);
      expect(await names(now + 4)).toEqual(["live-a"]);
      expect((await store.liveRegistrations(now + 1)).find((registration) => registration.endpointId === a.id)).toMatchObject({
        endpointId: a.id,
        session: "live-a",
        state: "active",
        leaseExpiresAt: now + 1_000,
      });
    });

    test("maintain: receipts expire after retention unless an item pins them; ended registrations are reaped unless they pin mail", async () => {
      const store = await fresh();
      const now = Date.now();
      const source = await connected(store, "keep-source", { now });
      const target = await connected(store, "keep-target", { now });
      const acked = await admission(source, target, { now });
      const pinned = await admission(source, target, { now });
      await store.admit(acked);
      await store.admit(pinned);
      await store.acknowledge(target.id, acked.envelopeId);
      const gone = await connected(store, "keep-gone", { now, leaseMs: 1_000 });
      const before = await store.usage();
      expect(before).toMatchObject({ receipts: 2, registrations: 3, sessions: 3, expiryEntries: 2 });
      expect(await store.maintain(now + relayReceiptRetentionMs - 1)).toEqual({ reaped: 0, expiredReceipts: 0, expiredMail: 0 });
      const later = now + relayReceiptRetentionMs + relayRegistrationRetentionMs;
      // keep-gone's lease ended long ago: reaped. The source and target are reaped too (their leases
      // ended), except the target, whose mailbox still holds the pinned envelope.
      expect(await store.maintain(later)).toEqual({ reaped: 2, expiredReceipts: 1, expiredMail: 0 });
      expect(await store.registration(gone.id)).toBeUndefined();
      expect(await store.binding("keep-gone", gone.id)).toEqual({ callerKnown: false, registration: undefined, secret: "ok" });
      expect(await store.registration(target.id)).toMatchObject({ session: "keep-target" });
      const after = await store.usage();
      expect(after).toMatchObject({ receipts: 1, registrations: 1, sessions: 1, activeItems: 1 });
      expect(after.receiptBytes).toBeLessThan(before.receiptBytes);
      expect(after.metadataBytes).toBeLessThan(before.metadataBytes);
      // The pinned receipt still answers a resend as a duplicate; acknowledged, it expires next time.
      expect(await store.admit({ ...pinned, now: later })).toMatchObject({ kind: "target-not-live" });
      expect(await store.acknowledge(target.id, pinned.envelopeId)).toEqual({ kind: "acknowledged", duplicate: false });
      expect(await store.maintain(later + 1)).toEqual({ reaped: 1, expiredReceipts: 1, expiredMail: 0 });
      expect(await store.usage()).toMatchObject({
        receipts: 0,
        receiptBytes: 0,
        registrations: 0,
        sessions: 0,
        metadataBytes: 0,
        activeItems: 0,
        activeBytes: 0,
        expiryEntries: 0,
      });
    });

    test("budgets: relay-wide items across mailboxes, and registrations, are refused when spent", async () => {
      const store = await fresh();
      const now = Date.now();
      const targets = await connectedMany(store, "wide", maxRelayActiveItems / maxRelayMailboxItems + 1, { now });
      const full = targets.slice(0, -1);
      // Senders enough that each stays within its shares (`quotas-v1`): the relay-wide budget is what refuses.
      const senders = maxRelayActiveItems / maxRelaySenderActiveItems;
      const sources = await connectedMany(store, "wide-source", senders + 1, { now });
      // Each mailbox filled by `perMailbox` distinct senders, the senders taken in turn.
      const perMailbox = sendersFor(maxRelayMailboxItems);
      const sourceOf = (mailbox: number, index: number) => sources[(mailbox * perMailbox + (index % perMailbox)) % senders]!;
      const requests = await Promise.all(
        full.flatMap((target, mailbox) =>
          Array.from({ length: maxRelayMailboxItems }, (_, index) => admission(sourceOf(mailbox, index), target, { now })),
        ),
      );
      const outcomes = await Promise.all(requests.map((request) => store.admit(request)));
      expect(outcomes.every((outcome) => outcome.kind === "accepted")).toBe(true);
      expect(await store.admit(await admission(sources.at(-1)!, targets.at(-1)!, { now }))).toEqual({
        kind: "full",
        budget: "active",
        details: { items: maxRelayActiveItems, bytes: (await store.usage()).activeBytes },
      });
      // Registrations: refused once spent while every place is in use (a recent bound request each).
      const registered = (await store.usage()).registrations;
      const more = await Promise.all(
        Array.from({ length: maxRelayRegistrations - registered }, (_, index) =>
          store.connect({ session: `many-${index}`, generation: "g", leaseMs: maxLeaseMs, now }),
        ),
      );
      const views = [...targets, ...sources].map((endpoint) => ({ endpointId: endpoint.id }));
      for (const outcome of more) if (outcome.kind === "connected") views.push(outcome.registration);
      expect(views.length).toBe(maxRelayRegistrations);
      await Promise.all(
        views.map(async ({ endpointId }) => {
          const registration = await store.registration(endpointId);
          await store.binding(registration!.session, endpointId, undefined, now);
        }),
      );
      expect(await store.connect({ session: "one-more", generation: "g", leaseMs: maxLeaseMs, now })).toEqual({
        kind: "full",
        details: { registrations: maxRelayRegistrations, metadataBytes: (await store.usage()).metadataBytes },
      });
      expect(await store.maintain(now)).toEqual({ reaped: 0, expiredReceipts: 0, expiredMail: 0 });
    });

    describe("fair shares (quotas-v1, mail-expiry-v1): the attacks of issue 21, item 4", () => {
      test("a flood of never-used registrations does not deny a later connect: the first-made never-used place is reclaimed once its grace is over, its mail expired", async () => {
        const store = await fresh();
        const now = Date.now();
        const source = await connected(store, "squat-source", { now });
        await store.binding("squat-source", source.id, undefined, now);
        const squatters = await connectedMany(store, "squatter", maxRelayRegistrations - 1, { now });
        const queued = await admission(source, squatters[0]!, { now });
        await store.admit(queued);
        expect((await store.usage()).registrations).toBe(maxRelayRegistrations);
        // Within their grace (a client's first request may still be on its way) they keep their places.
        expect(
          await store.connect({ session: "legit", generation: "g", leaseMs: maxLeaseMs, now: now + relayRegistrationGraceMs - 1 }),
        ).toMatchObject({ kind: "full" });
        // Then the new connect takes the place of the first-made never-used registration.
        const later = now + relayRegistrationGraceMs;
        const legit = await connected(store, "legit", { now: later, generation: "g" });
        expect(await store.registration(legit.id)).toMatchObject({ session: "legit", state: "active" });
        expect(await store.registration(squatters[0]!.id)).toBeUndefined();
        expect(await store.sessionRegistration("squatter-0")).toBeUndefined();
        expect((await store.usage()).registrations).toBe(maxRelayRegistrations);
        // Its mail expired with it: the budget is free and a resend is not a duplicate.
        expect(await store.usage()).toMatchObject({ activeItems: 0, activeBytes: 0 });
        expect(await store.admit({ ...queued, target: legit, now: later })).toEqual({ kind: "expired" });
        // The used source is never the one taken; more connects take the next never-used ones.
        await connected(store, "legit-2", { now: later + 1 });
        expect(await store.registration(squatters[1]!.id)).toBeUndefined();
        expect(await store.registration(source.id)).toMatchObject({ session: "squat-source" });
        expect(await store.maintain(later + 1)).toMatchObject({ expiredMail: 0 });
      });

      test("registrations in use are kept; an ended one is reclaimed before a live one, and a live one only once idle for relayRegistrationIdleMs", async () => {
        const store = await fresh();
        const now = Date.now();
        const users = await connectedMany(store, "user", maxRelayRegistrations, { now });
        const use = (index: number, at: number) => store.binding(`user-${index}`, users[index]!.id, undefined, at);
        await Promise.all(users.map((_, index) => use(index, now + (index === 1 ? 0 : 1))));
        expect(await store.connect({ session: "newcomer", generation: "g", leaseMs: maxLeaseMs, now: now + 2 })).toMatchObject({
          kind: "full",
        });
        // A disconnected one goes first, though another was idle longer.
        await store.disconnect(users[5]!.id, now + 3);
        const newcomer = await connected(store, "newcomer", { now: now + 4 });
        await store.binding("newcomer", newcomer.id, undefined, now + 4);
        expect(await store.registration(users[5]!.id)).toBeUndefined();
        // A binding of another caller, or one that fails, is no use of the place.
        await store.binding("user-0", users[1]!.id, undefined, now + relayActivityResolutionMs);
        await store.binding("user-1", users[1]!.id, secretDigest("x".repeat(40)), now + relayActivityResolutionMs);
        expect(
          await store.connect({ session: "second", generation: "g", leaseMs: maxLeaseMs, now: now + relayRegistrationIdleMs - 1 }),
        ).toMatchObject({ kind: "full" });
        // Idle long enough: the least recently active live one (user-1) gives way.
        const second = await connected(store, "second", { now: now + relayRegistrationIdleMs });
        expect(await store.registration(users[1]!.id)).toBeUndefined();
        expect(await store.registration(users[0]!.id)).toMatchObject({ session: "user-0" });
        // The connecting session's own current registration is never the one taken, even when it is the only idle one.
        const later = now + relayRegistrationIdleMs + 1;
        const others = users.map((_, index) => index).filter((index) => ![1, 2, 5].includes(index));
        await Promise.all([
          ...others.map((index) => use(index, later)),
          store.binding("newcomer", newcomer.id, undefined, later),
          store.binding("second", second.id, undefined, later),
        ]);
        expect(await store.connect({ session: "user-2", generation: "g-new", leaseMs: maxLeaseMs, now: later })).toMatchObject({
          kind: "full",
        });
        expect(await store.registration(users[2]!.id)).toMatchObject({ session: "user-2", state: "active" });
      });

      test("one sender holds at most its share of a mailbox; another sender still gets in; an acknowledgement frees the share", async () => {
        const store = await fresh();
        const now = Date.now();
        const [flooder, other, target] = await connectedMany(store, "share", 3, { now });
        const flood = await Promise.all(
          Array.from({ length: maxRelaySenderMailboxItems + 8 }, () => admission(flooder!, target!, { now })),
        );
        const outcomes = await Promise.all(flood.map((request) => store.admit(request)));
        const accepted = outcomes.filter((outcome) => outcome.kind === "accepted").length;
        expect(accepted).toBe(maxRelaySenderMailboxItems);
        const refusal = outcomes.find((outcome) => outcome.kind !== "accepted");
        expect(refusal).toMatchObject({ kind: "quota", quota: "mailbox-share", details: { items: maxRelaySenderMailboxItems } });
        // Nothing was reserved for the refused ones; the other sender's mail gets in.
        expect((await store.usage()).activeItems).toBe(maxRelaySenderMailboxItems);
        expect(await store.admit(await admission(other!, target!, { now }))).toMatchObject({ kind: "accepted" });
        expect(await store.acknowledge(target!.id, flood[0]!.envelopeId)).toEqual({ kind: "acknowledged", duplicate: false });
        expect(await store.admit(await admission(flooder!, target!, { now }))).toMatchObject({ kind: "accepted" });
        expect(await store.maintain(now)).toEqual({ reaped: 0, expiredReceipts: 0, expiredMail: 0 });
      });

      test("one sender holds at most its share of the relay-wide envelope budget; another sender still gets in", async () => {
        const store = await fresh();
        const now = Date.now();
        const flooder = await connected(store, "wide-flooder", { now });
        const sinks = await connectedMany(store, "wide-sink", sendersFor(maxRelaySenderActiveItems) + 1, { now });
        const flood = await Promise.all(
          Array.from({ length: maxRelaySenderActiveItems }, (_, index) => admission(flooder, sinks[index % sinks.length]!, { now })),
        );
        expect((await Promise.all(flood.map((request) => store.admit(request)))).every((outcome) => outcome.kind === "accepted")).toBe(
          true,
        );
        const bytes = (await store.usage()).activeBytes;
        expect(await store.admit(await admission(flooder, sinks[0]!, { now }))).toEqual({
          kind: "quota",
          quota: "sender-active",
          details: { items: maxRelaySenderActiveItems, bytes },
        });
        const other = await connected(store, "wide-other", { now });
        expect(await store.admit(await admission(other, sinks[0]!, { now }))).toMatchObject({ kind: "accepted" });
        expect(await store.maintain(now)).toEqual({ reaped: 0, expiredReceipts: 0, expiredMail: 0 });
      });

      test("one sender's sends within the receipt retention are bounded by its share of the receipts, acknowledged or not; they free as receipts expire", async () => {
        const store = await fresh();
        const now = Date.now();
        const live = (session: string, at: number) => connected(store, session, { now: at, generation: "g" });
        const [sender, other, target] = await Promise.all(
          ["receipts-sender", "receipts-other", "receipts-target"].map((session) => live(session, now)),
        );
        let sent = 0;
        let outcome: Awaited<ReturnType<RelayStore["admit"]>>;
        for (;;) {
          const request = await admission(sender!, target!, { now });
          outcome = await store.admit(request);
          if (outcome.kind !== "accepted") break;
          sent += 1;
          expect(await store.acknowledge(target!.id, request.envelopeId)).toMatchObject({ kind: "acknowledged" });
        }
        expect(outcome).toMatchObject({ kind: "quota", quota: "sender-receipts" });
        const used = await store.usage();
        expect(sent).toBe(Math.min(maxRelaySenderReceipts, Math.floor(maxRelaySenderReceiptBytes / (used.receiptBytes / used.receipts))));
        expect(await store.admit(await admission(other!, target!, { now }))).toMatchObject({ kind: "accepted" });
        // A receipt retention later the sender's receipts are gone, and it may send again.
        const later = now + relayReceiptRetentionMs;
        await Promise.all(["receipts-sender", "receipts-target"].map((session) => live(session, later)));
        expect(await store.maintain(later)).toMatchObject({ expiredReceipts: sent });
        expect(await store.admit(await admission(sender!, target!, { now: later }))).toMatchObject({ kind: "accepted" });
      });

      test("queued mail expires relayMailLifetimeMs after acceptance: budgets and shares freed, a resend is expired, an ACK gone; its receipt stays a retention longer", async () => {
        const store = await fresh();
        const now = Date.now();
        const live = (session: string, at: number) => connected(store, session, { now: at, generation: "g" });
        const [source, target] = await Promise.all([live("expiry-source", now), live("expiry-target", now)]);
        const old = await admission(source!, target!, { now });
        await store.admit(old);
        const young = await admission(source!, target!, { now: now + 1 });
        await store.admit(young);
        const lifetimeEnd = now + relayMailLifetimeMs;
        // Both renewed (as clients do), so what expires is the mail itself, not a registration.
        await Promise.all([live("expiry-source", lifetimeEnd - 1), live("expiry-target", lifetimeEnd - 1)]);
        expect(await store.maintain(lifetimeEnd - 1)).toEqual({ reaped: 0, expiredReceipts: 0, expiredMail: 0 });
        expect(await store.maintain(lifetimeEnd)).toEqual({ reaped: 0, expiredReceipts: 0, expiredMail: 1 });
        expect((await pageOf(store, target!)).ids).toEqual([young.envelopeId]);
        expect(await store.usage()).toMatchObject({ activeItems: 1, activeBytes: Buffer.byteLength(young.text), receipts: 2 });
        expect(await store.admit({ ...old, now: lifetimeEnd })).toEqual({ kind: "expired" });
        expect(await store.admit({ ...old, digest: "another", now: lifetimeEnd })).toEqual({ kind: "conflict" });
        expect(await store.acknowledge(target!.id, old.envelopeId)).toEqual({ kind: "gone" });
        // The sender's share is free again: a full share of new mail fits beside the young one.
        const refill = await Promise.all(
          Array.from({ length: maxRelaySenderMailboxItems - 1 }, () => admission(source!, target!, { now: lifetimeEnd })),
        );
        expect((await Promise.all(refill.map((request) => store.admit(request)))).every((outcome) => outcome.kind === "accepted")).toBe(
          true,
        );
        for (const request of refill) await store.acknowledge(target!.id, request.envelopeId);
        // The expired receipt answers a retention after the expiry, then goes.
        expect(await store.maintain(lifetimeEnd + relayReceiptRetentionMs - 1)).toEqual({ reaped: 0, expiredReceipts: 0, expiredMail: 1 });
        expect(await store.maintain(lifetimeEnd + relayReceiptRetentionMs)).toMatchObject({
          expiredReceipts: 1 + refill.length,
          expiredMail: 0,
        });
        expect(await store.usage()).toMatchObject({ activeItems: 0, activeBytes: 0, receipts: 1 });
      });

      test("an ended registration that pins mail is reaped a mail lifetime after it ended, its mail expired", async () => {
        const store = await fresh();
        const now = Date.now();
        const source = await connected(store, "pin-source", { now, leaseMs: maxLeaseMs });
        const target = await connected(store, "pin-target", { now, leaseMs: maxLeaseMs });
        const request = await admission(source, target, { now });
        await store.admit(request);
        await store.disconnect(target.id, now + 1);
        // Past the registration retention it is kept: it pins mail (a worker away may come back for it).
        expect(await store.maintain(now + 1 + relayRegistrationRetentionMs)).toMatchObject({ expiredMail: 0 });
        expect(await store.registration(target.id)).toMatchObject({ state: "disconnected" });
        const report = await store.maintain(now + 1 + relayMailLifetimeMs);
        expect(report.expiredMail).toBe(1);
        expect(report.reaped).toBeGreaterThanOrEqual(1);
        expect(await store.registration(target.id)).toBeUndefined();
        expect(await store.sessionRegistration("pin-target")).toBeUndefined();
        expect(await store.usage()).toMatchObject({ activeItems: 0, activeBytes: 0 });
        expect(await store.page(target.id, "0", 10)).toEqual({ kind: "page", itemsJson: "[]", nextCursor: "0", hasMore: false });
      });
    });

    describe("watch (the doorbell)", () => {
      test("answers at once with pending mail, or cursor-ahead; waitMs 0 never parks", async () => {
        const store = await fresh();
        const source = await connected(store, "bell-source");
        const target = await connected(store, "bell-target");
        let parked = 0;
        const onPark = () => (parked += 1);
        expect(await store.watch({ endpointId: target.id, after: "0", waitMs: 0, onPark })).toEqual({
          kind: "watch",
          pending: false,
          highestCursor: "0",
        });
        await store.admit(await admission(source, target));
        expect(await store.watch({ endpointId: target.id, after: "0", waitMs: 10_000, onPark })).toEqual({
          kind: "watch",
          pending: true,
          highestCursor: "1",
        });
        expect(await store.watch({ endpointId: target.id, after: "2", waitMs: 10_000, onPark })).toEqual({
          kind: "cursor-ahead",
          highestCursor: "1",
        });
        expect(parked).toBe(0);
      });

      test("a parked watch is rung by an admission, and by a disconnect; it never acknowledges", async () => {
        const store = await fresh();
        const source = await connected(store, "ring-source");
        const target = await connected(store, "ring-target");
        let parked = 0;
        const watching = store.watch({ endpointId: target.id, after: "0", waitMs: 10_000, onPark: () => (parked += 1) });
        await waitUntil(() => parked === 1);
        expect((await store.usage()).watching).toBe(1);
        await store.admit(await admission(source, target));
        expect(await watching).toEqual({ kind: "watch", pending: true, highestCursor: "1" });
        expect((await pageOf(store, target)).cursors).toEqual(["1"]);
        const again = store.watch({ endpointId: target.id, after: "1", waitMs: 10_000 });
        await waitUntil(async () => (await store.usage()).watching === 1);
        await store.disconnect(target.id, Date.now());
        expect(await again).toEqual({ kind: "watch", pending: false, highestCursor: "1" });
        expect((await store.usage()).watching).toBe(0);
      });

      test("a newer watch of the endpoint answers the older one; the wait elapses; an abort answers at once", async () => {
        const store = await fresh();
        const target = await connected(store, "many-watch");
        const older = store.watch({ endpointId: target.id, after: "0", waitMs: 10_000 });
        await waitUntil(async () => (await store.usage()).watching === 1);
        const abort = new AbortController();
        const newer = store.watch({ endpointId: target.id, after: "0", waitMs: 10_000, signal: abort.signal });
        expect(await older).toEqual({ kind: "watch", pending: false, highestCursor: "0" });
        abort.abort();
        expect(await newer).toEqual({ kind: "watch", pending: false, highestCursor: "0" });
        // A lone watch parks (it does not answer at once), then its wait elapses and it answers.
        let answered = false;
        const lone = store.watch({ endpointId: target.id, after: "0", waitMs: 1_000 }).finally(() => {
          answered = true;
        });
        await waitUntil(async () => (await store.usage()).watching === 1 || answered);
        expect(answered).toBe(false);
        expect(await lone).toEqual({ kind: "watch", pending: false, highestCursor: "0" });
      });

      test("a new generation of the session answers its old endpoint's watch (its mailbox is gone)", async () => {
        const store = await fresh();
        const source = await connected(store, "drop-source");
        const old = await connected(store, "drop", { generation: "g1" });
        await store.admit(await admission(source, old));
        const watching = store.watch({ endpointId: old.id, after: "1", waitMs: 10_000 });
        await waitUntil(async () => (await store.usage()).watching === 1);
        await connected(store, "drop", { generation: "g2" });
        expect(await watching).toEqual({ kind: "watch", pending: false, highestCursor: "0" });
      });

      test("closing the store answers its parked watches", async () => {
        const store = await open();
        const target = await connected(store, "close-watch");
        // A wait far longer than the test may run: only the close can answer it (else the test times out).
        const watching = store.watch({ endpointId: target.id, after: "0", waitMs: 3_600_000 });
        await waitUntil(async () => (await store.usage()).watching === 1);
        await store.close();
        expect(await watching).toEqual({ kind: "watch", pending: false, highestCursor: "0" });
      });
    });
  });
}

async function waitUntil(condition: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await Bun.sleep(5);
  }
}
