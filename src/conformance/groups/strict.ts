/**
 * Strict answers (`strict-answers-v1`, ours): where Wolfpack's relay gives an answer its spec
 * allows but looser than ours, our relay gives the one docs/wire.md names. Without the feature the
 * plain checks accept either answer (error-table.ts, limits.ts, admission.ts).
 */
import assert from "node:assert/strict";
import { maxWireIdChars } from "../../protocol/limits.ts";
import { RELAY_ID } from "../../protocol/names.ts";
import { FEATURE_STRICT_ANSWERS } from "../../protocol/wire.ts";
import { type ConformanceCheck, equal, exactLength, inGroup } from "../kit.ts";
import { connectRequest, postJson, uniqueName } from "../wire-client.ts";

const strict = (checks: readonly Omit<ConformanceCheck, "group" | "feature">[]) =>
  inGroup(
    "strict answers",
    checks.map((check) => ({ ...check, feature: FEATURE_STRICT_ANSWERS })),
  );

export const strictChecks: readonly ConformanceCheck[] = strict([
  {
    name: "an envelope with an extra key is a malformed envelope: 409 SOURCE_MISMATCH, nothing admitted",
    run: async ({ expectError, pair }) => {
      const [a, b] = await pair("strict-envelope");
      const reply = await a.send({ ...a.envelopeTo(b.endpoint), extra: true });
      equal(reply.status, 409);
      expectError(reply, "SOURCE_MISMATCH");
      assert.deepEqual(await b.drain(), []);
    },
  },
  {
    name: "a binding endpoint with an extra key is not this session's: 409 SOURCE_MISMATCH",
    run: async ({ baseUrl, expectError, session }) => {
      const a = await session("strict-binding");
      expectError(await postJson(baseUrl, { ...a.request("health"), endpoint: { ...a.endpoint, extra: true } }), "SOURCE_MISMATCH");
    },
  },
  {
    name: "a resolve target with an extra key is a bad field: 400 INVALID_REQUEST (not TARGET_NOT_REGISTERED)",
    run: async ({ expectError, session }) => {
      const a = await session("strict-resolve");
      const reply = await a.call("resolve", { target: { relay: RELAY_ID, id: crypto.randomUUID(), extra: true } });
      expectError(reply, "INVALID_REQUEST");
    },
  },
  {
    name: "connect with a malformed epoch is a bad field: 400 INVALID_REQUEST (not RELAY_RESET)",
    run: async ({ baseUrl, expectError }) => {
      const connect = connectRequest({ callerSession: uniqueName("strict-epoch"), generation: crypto.randomUUID() });
      expectError(await postJson(baseUrl, { ...connect, epoch: "not-a-uuid" }), "INVALID_REQUEST");
    },
  },
  {
    name: `a bound callerSession of maxWireIdChars + 1 (${maxWireIdChars + 1}) is a bad field: 400 INVALID_REQUEST (not CALLER_NOT_FOUND)`,
    run: async ({ expectError, session }) => {
      const a = await session("strict-caller");
      expectError(await a.call("health", { callerSession: exactLength(maxWireIdChars + 1) }), "INVALID_REQUEST");
    },
  },
  {
    name: "leaseMs: null is a bad field: 400 INVALID_REQUEST (not the default lease)",
    run: async ({ baseUrl, expectError }) => {
      const connect = connectRequest({ callerSession: uniqueName("strict-lease"), generation: crypto.randomUUID() });
      expectError(await postJson(baseUrl, { ...connect, leaseMs: null }), "INVALID_REQUEST");
    },
  },
]);
