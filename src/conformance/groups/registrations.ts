/** Registrations: renewal with the same generation, a new generation's new endpoint, the lease. */
import assert from "node:assert/strict";
import { isUuid } from "../../protocol/endpoint.ts";
import { defaultLeaseMs, maxLeaseMs } from "../../protocol/limits.ts";
import { RELAY_ID } from "../../protocol/names.ts";
import { above, atLeast, atMost, type ConformanceCheck, idsOf, inGroup } from "../kit.ts";
import { connectRequest, postJson, uniqueName } from "../wire-client.ts";

export const registrationChecks: readonly ConformanceCheck[] = inGroup("registrations", [
  {
    name: "the same generation renews the lease and keeps the endpoint id, also after disconnect",
    run: async ({ expectValue, pair }) => {
      const [a, b] = await pair("renew");
      const renewed = expectValue(await b.renew({ leaseMs: maxLeaseMs }), "connected");
      assert.deepEqual(renewed.endpoint, b.endpoint);
      above(Date.parse(renewed.leaseExpiresAt), Date.parse(b.leaseExpiresAt));
      const { envelope } = await a.sendOk(b.endpoint);
      expectValue(await b.disconnect(), "disconnected");
      const revived = expectValue(await b.renew(), "connected");
      assert.deepEqual(revived.endpoint, b.endpoint);
      expectValue(await b.call("health"), "health");
      // Accepted mail survives the disconnect.
      assert.deepEqual(idsOf(await b.drain()), [envelope.envelopeId]);
    },
  },
  {
    name: "a new generation mints a new endpoint id; the old one is REGISTRATION_EXPIRED",
    run: async ({ expectError, session }) => {
      const name = uniqueName("generation");
      const a = await session("generation-sender");
      const first = await session("generation", { callerSession: name });
      const second = await session("generation", { callerSession: name });
      assert.equal(isUuid(second.endpoint.id), true);
      assert.notEqual(second.endpoint.id, first.endpoint.id);
      expectError(await first.call("health"), "REGISTRATION_EXPIRED");
      expectError(await a.send(a.envelopeTo(first.endpoint)), "TARGET_NOT_REGISTERED");
      const { envelope } = await a.sendOk(second.endpoint);
      assert.deepEqual(idsOf(await second.drain()), [envelope.envelopeId]);
      // Connecting with the retired generation again never revives the retired endpoint (the
      // spec leaves open whether it is refused or treated as yet another generation).
      const again = await first.renew();
      assert.notEqual(again.body?.value?.endpoint?.id, first.endpoint.id);
    },
  },
  {
    name: "leaseExpiresAt is now + leaseMs (default defaultLeaseMs)",
    run: async ({ baseUrl, expectValue }) => {
      for (const leaseMs of [undefined, maxLeaseMs / 2]) {
        const before = Date.now();
        const reply = await postJson(
          baseUrl,
          connectRequest({ callerSession: uniqueName("lease-at"), generation: crypto.randomUUID(), leaseMs }),
        );
        const after = Date.now();
        const expires = Date.parse(expectValue(reply, "connected").leaseExpiresAt);
        const lease = leaseMs ?? defaultLeaseMs;
        atLeast(expires, before + lease);
        atMost(expires, after + lease);
      }
    },
  },
  {
    name: "connect with the current epoch is accepted; endpoint ids are UUIDs of this relay",
    run: async ({ epoch, session }) => {
      const a = await session("current-epoch", { epoch });
      assert.equal(a.epoch, epoch);
      assert.equal(a.endpoint.relay, RELAY_ID);
      assert.equal(isUuid(a.endpoint.id), true);
      assert.deepEqual(Object.keys(a.endpoint).sort(), ["id", "relay"]);
    },
  },
]);
