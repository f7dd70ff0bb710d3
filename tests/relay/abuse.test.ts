/**
 * Issue 21, item 4: no one client can switch the relay off (`quotas-v1`, `mail-expiry-v1`). Each
 * attack as it was tried from outside — one process, plain HTTP, as fast as it can — against a
 * relay on an injected clock (so expiry is tested by moving the clock, never by sleeping), and what
 * a legitimate client sees afterwards. Each test was written first and failed on the relay before
 * the fair shares (the attack succeeded); the store contract (tests/helpers/store-contract.ts)
 * holds both stores to the same.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { expectWireError, expectWireValue, inBatches } from "../../src/conformance/kit.ts";
import { connectRequest, postJson, uniqueName, WireSession } from "../../src/conformance/wire-client.ts";
import {
  maxLeaseMs,
  relayMailLifetimeMs,
  maxRelayActiveItems,
  maxRelayMailboxItems,
  maxRelayRegistrations,
  relayRegistrationGraceMs,
  relayRegistrationIdleMs,
} from "../../src/protocol/limits.ts";
import { type RelayServer, startRelayServer } from "../../src/relay-server/server.ts";

/** Requests the attacker keeps in flight (under the relay's admission slots, so none is refused for them). */
const ATTACK_WIDTH = 16;
/** Attempts beyond a budget the attacker makes, to show it is not stuck at the budget's edge. */
const BEYOND = 64;
/** Clock steps shorter than a lease, so clients that renew stay live while the clock moves on. */
const STEP_MS = maxLeaseMs - 60_000;

let relay: RelayServer | undefined;
let clock = Date.now();
afterEach(async () => {
  await relay?.stop();
  relay = undefined;
});

async function startRelay(): Promise<RelayServer> {
  clock = Date.now();
  relay = await startRelayServer({ port: 0, env: {}, now: () => clock });
  return relay;
}

/** A session on the relay with the longest lease (the clock moves in steps shorter than it). */
const session = (url: string, label: string) => WireSession.connect(url, { label, leaseMs: maxLeaseMs });

/** An envelope dated by the relay's clock (its freshness is judged by that clock). */
const fresh = (from: WireSession, to: WireSession, payload: unknown = { note: "abuse" }) =>
  from.envelopeTo(to.endpoint, { payload, createdAt: new Date(clock).toISOString() });

/** Sends from `from` to the targets in turn, `width` at a time, until the relay refuses one; returns how many were accepted and the refusal. */
async function floodUntilRefused(from: WireSession, targets: readonly WireSession[], most: number) {
  let accepted = 0;
  let refusal: Awaited<ReturnType<WireSession["send"]>> | undefined;
  for (let sent = 0; sent < most && refusal === undefined; sent += ATTACK_WIDTH) {
    const replies = await Promise.all(
      Array.from({ length: Math.min(ATTACK_WIDTH, most - sent) }, (_, index) =>
        from.send(fresh(from, targets[(sent + index) % targets.length]!)),
      ),
    );
    for (const reply of replies) {
      if (reply.body?.ok === true) accepted += 1;
      else refusal ??= reply;
    }
  }
  return { accepted, refusal };
}

/** Moves the clock by `ms` in steps shorter than a lease, renewing `sessions` at each step (they stay live). */
async function advance(ms: number, sessions: readonly WireSession[]): Promise<void> {
  for (let moved = 0; moved < ms; moved += STEP_MS) {
    clock += Math.min(STEP_MS, ms - moved);
    for (const live of sessions) expectWireValue(await live.renew({ leaseMs: maxLeaseMs }), "connected");
  }
}

describe("attacks on the relay's shared budgets", () => {
  test("a process registering names as fast as it can does not deny a later legitimate connect, also while it goes on", async () => {
    const { url } = await startRelay();
    const squat = (count: number) =>
      inBatches(count, ATTACK_WIDTH, () =>
        postJson(url, connectRequest({ callerSession: uniqueName("squatter"), generation: crypto.randomUUID(), leaseMs: maxLeaseMs })),
      );
    const flood = await squat(maxRelayRegistrations + BEYOND);
    expect(flood.filter((reply) => reply.body?.ok === true).length).toBeGreaterThan(0);
    // Once the squatter's first names are past the grace a new registration has for its first request:
    clock += relayRegistrationGraceMs;
    const [legit] = await Promise.all([session(url, "legit"), squat(BEYOND)]);
    expectWireValue(await legit.call("health"), "health");
    expect((await relay!.engine.usage()).registrations).toBeLessThanOrEqual(maxRelayRegistrations);
  });

  test("registrations the squatter keeps using hold only until they sit idle; then a legitimate connect takes one", async () => {
    const { url } = await startRelay();
    const squatters = await inBatches(maxRelayRegistrations, ATTACK_WIDTH, (index) => session(url, `used-${index}`).catch(() => undefined));
    // Each used once: not the never-used registrations a newcomer may take at once.
    await inBatches(squatters.length, ATTACK_WIDTH, async (index) => squatters[index]?.call("health"));
    const refused = await postJson(url, connectRequest({ callerSession: uniqueName("early"), generation: crypto.randomUUID() }));
    expectWireError(refused, "RELAY_CAPACITY");
    clock += relayRegistrationIdleMs;
    const legit = await session(url, "legit-later");
    expectWireValue(await legit.call("health"), "health");
  });

  test("a sender filling the relay-wide budget does not deny another sender's send", async () => {
    const { url } = await startRelay();
    const attacker = await session(url, "filler");
    const sinks = await inBatches(maxRelayActiveItems / maxRelayMailboxItems + 1, ATTACK_WIDTH, (index) => session(url, `sink-${index}`));
    const { accepted, refusal } = await floodUntilRefused(attacker, sinks, maxRelayActiveItems + BEYOND);
    expect(refusal).toBeDefined();
    expect(accepted).toBeLessThan(maxRelayActiveItems);
    const error = expectWireError(refusal!, "RELAY_CAPACITY");
    expect(error.retryAfterMs).toBeGreaterThan(0);
    const [sender, target] = await Promise.all([session(url, "other-sender"), session(url, "other-target")]);
    expectWireValue(await sender.send(fresh(sender, target)), "accepted");
  });

  test("a flood into one mailbox does not keep a second sender's mail out of that mailbox, also while the victim drains it", async () => {
    const { url } = await startRelay();
    const [attacker, victim, origin] = await Promise.all([session(url, "flooder"), session(url, "victim"), session(url, "origin")]);
    for (let round = 0; round < 3; round += 1) {
      const { refusal } = await floodUntilRefused(attacker, [victim], maxRelayMailboxItems + BEYOND);
      expect(expectWireError(refusal!, "RELAY_CAPACITY").retryAfterMs).toBeGreaterThan(0);
      const task = fresh(origin, victim, { task: round });
      expectWireValue(await origin.send(task), "accepted");
      // The victim takes in everything and acknowledges it; the flooder refills at once.
      const held = await victim.drain();
      expect(held.map((delivery) => delivery.envelope.envelopeId)).toContain(task.envelopeId);
      for (const delivery of held) expectWireValue(await victim.acknowledge(delivery.envelope.envelopeId), "acknowledged");
    }
  });

  test("queued mail past its lifetime is gone, its budget free, its sender told", async () => {
    const { url } = await startRelay();
    const [sender, target] = await Promise.all([session(url, "sender"), session(url, "away")]);
    const envelope = fresh(sender, target);
    const accepted = expectWireValue(await sender.send(envelope), "accepted");
    expect(Date.parse(accepted.expiresAt)).toBe(clock + relayMailLifetimeMs);
    await advance(relayMailLifetimeMs, [sender, target]);
    await relay!.engine.maintain();
    expect(await target.drain()).toEqual([]);
    expect(await relay!.engine.usage()).toMatchObject({ activeItems: 0, activeBytes: 0 });
    // The sender resends (byte-identical, as clients retry) and is told the envelope expired.
    expectWireError(await sender.send(envelope), "ENVELOPE_EXPIRED");
    expectWireError(await target.acknowledge(envelope.envelopeId), "INVALID_REQUEST");
  });

  test("an ended registration pinning only mail is reaped, its mail expired", async () => {
    const { url } = await startRelay();
    const [sender, target] = await Promise.all([session(url, "sender"), session(url, "gone")]);
    const envelope = fresh(sender, target);
    expectWireValue(await sender.send(envelope), "accepted");
    expectWireValue(await target.disconnect(), "disconnected");
    const before = (await relay!.engine.usage()).registrations;
    await advance(relayMailLifetimeMs, [sender]);
    await relay!.engine.maintain();
    expect((await relay!.engine.usage()).registrations).toBe(before - 1);
    // Reaped: the same generation can no longer revive the old endpoint.
    const revived = expectWireValue(await target.renew(), "connected");
    expect(revived.endpoint.id).not.toBe(target.endpoint.id);
    expect(await relay!.engine.usage()).toMatchObject({ activeItems: 0, activeBytes: 0 });
    // The target is gone: a resend is answered so before its receipt is looked at.
    expectWireError(await sender.send(envelope), "TARGET_NOT_REGISTERED");
  });
});
