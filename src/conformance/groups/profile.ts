/** The profile (`GET` discovery) and what every reply carries: the epoch and `Cache-Control: no-store`. */
import assert from "node:assert/strict";
import { isUuid } from "../../protocol/endpoint.ts";
import { HTTP_STATUS } from "../../protocol/http.ts";
import { RELAY_ENDPOINT_PATH, RELAY_PROFILE } from "../../protocol/names.ts";
import { ANY_ADDITION, type ConformanceCheck, contains, inGroup, show } from "../kit.ts";
import { type Binding, connectRequest, getPath, getProfile, makeEnvelope, postJson, uniqueName } from "../wire-client.ts";

export function profileChecks(features: readonly string[]): ConformanceCheck[] {
  return inGroup("profile and response envelope", [
    {
      name: "GET profile answers ok, profile, epoch, endpointPath and federation",
      serial: true,
      run: async ({ baseUrl, epoch }) => {
        const reply = await getProfile(baseUrl);
        assert.equal(reply.status, HTTP_STATUS.ok);
        assert.equal(reply.headers.get("cache-control"), "no-store");
        assert.equal(reply.body.ok, true);
        assert.equal(reply.body.profile, RELAY_PROFILE);
        assert.equal(isUuid(reply.body.epoch), true);
        assert.equal(reply.body.epoch, epoch);
        assert.equal(reply.body.endpointPath, RELAY_ENDPOINT_PATH);
        assert.equal(typeof reply.body.federation, "string");
      },
    },
    {
      name: `additions: the profile advertises every required feature (${features.join(", ")})`,
      serial: true,
      feature: ANY_ADDITION,
      run: async ({ baseUrl, features }) => {
        const reply = await getProfile(baseUrl);
        assert.ok(Array.isArray(reply.body.features), `expected an array, got ${show(reply.body.features)}`);
        for (const feature of features) contains(reply.body.features, feature);
      },
    },
    {
      name: "every success carries the epoch and Cache-Control: no-store",
      serial: true,
      run: async ({ baseUrl, epoch, expectValue }) => {
        const name = uniqueName("envelope");
        const connected = expectValue(
          await postJson(baseUrl, connectRequest({ callerSession: name, generation: crypto.randomUUID() })),
          "connected",
        );
        const binding: Binding = { epoch, callerSession: name, endpoint: connected.endpoint };
        const call = (operation: string, fields: Record<string, unknown> = {}) =>
          postJson(baseUrl, { operation, profile: RELAY_PROFILE, ...binding, ...fields });
        expectValue(await call("resolve", { target: binding.endpoint }), "resolved");
        // A self-addressed envelope (origin → itself) must work.
        const envelope = makeEnvelope(binding.endpoint, binding.endpoint);
        expectValue(await call("send", { envelope }), "accepted");
        expectValue(await call("receive", { cursor: "0" }), "page");
        expectValue(await call("acknowledge", { envelopeId: envelope.envelopeId }), "acknowledged");
        expectValue(await call("health"), "health");
        expectValue(await call("disconnect"), "disconnected");
      },
    },
    {
      name: "OPTIONS answers 204",
      serial: true,
      run: async ({ baseUrl }) => {
        const reply = await getPath(baseUrl, RELAY_ENDPOINT_PATH, { method: "OPTIONS" });
        assert.equal(reply.status, 204);
        assert.equal(reply.text, "");
      },
    },
  ]);
}
