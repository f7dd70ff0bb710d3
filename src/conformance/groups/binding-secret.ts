/** binding-secret-v1: a registration protected by its client's secret. */
import assert from "node:assert/strict";
import { HTTP_STATUS } from "../../protocol/http.ts";
import { minBindingSecretChars, defaultLeaseMs, minLeaseMs, maxWireIdChars, minWatchWaitMs } from "../../protocol/limits.ts";
import { SESSION_LIST_PATH, SESSION_STATUS_PATH } from "../../protocol/names.ts";
import { FEATURE_BINDING_SECRET, FEATURE_WATCH, mintBindingSecret } from "../../protocol/wire.ts";
import {
  above,
  atLeast,
  atMost,
  type ConformanceCheck,
  type ConformanceKit,
  deepEqual,
  equal,
  exactLength,
  idsOf,
  inGroup,
  lacks,
  type ReplyLike,
  sleep,
} from "../kit.ts";
import { type ConnectOptions, connectRequest, getPath, postJson, uniqueName, type WireReply, type WireSession } from "../wire-client.ts";

/** The kit plus the tools of this group's checks. */
interface SecretKit extends ConformanceKit {
  /** A session protected by a secret of its own choosing (`extra.bindingSecret` to pick it). */
  protectedSession(label: string, extra?: ConnectOptions): Promise<WireSession>;
  /** `owner`'s bound request as any process could send it: with `secret` in place of the owner's (`undefined`: none). */
  asOwner(owner: WireSession, operation: string, fields: Record<string, unknown>, secret: string | undefined): Promise<WireReply>;
  /** A connect under `owner`'s name: a new generation and no secret unless `fields` say otherwise. */
  connectAs(owner: WireSession, fields: Record<string, unknown>): Promise<WireReply>;
  statusOf(name: string): Promise<WireReply>;
  /** A 403 SESSION_PROTECTED whose retryAfterMs is within the holder's lease. */
  expectProtected(reply: ReplyLike, label: string): void;
}

function secretKit(kit: ConformanceKit): SecretKit {
  const { baseUrl } = kit;
  return {
    ...kit,
    protectedSession: (label, extra = {}) => kit.session(label, { bindingSecret: mintBindingSecret(), ...extra }),
    asOwner: (owner, operation, fields, secret) => postJson(baseUrl, { ...owner.request(operation, fields), bindingSecret: secret }),
    connectAs: (owner, fields) =>
      postJson(baseUrl, { ...connectRequest({ callerSession: owner.callerSession, generation: crypto.randomUUID() }), ...fields }),
    statusOf: (name) => getPath(baseUrl, `${SESSION_STATUS_PATH}?session=${encodeURIComponent(name)}`),
    expectProtected: (reply, label) => {
      equal(reply.status, HTTP_STATUS.forbidden, label);
      const error = kit.expectError(reply, "SESSION_PROTECTED");
      above(error.retryAfterMs, 0, label);
      atMost(error.retryAfterMs, defaultLeaseMs, label);
    },
  };
}

/** A check of this group: it needs binding-secret-v1 and runs with the group's tools. */
function secured(check: { readonly name: string; run(kit: SecretKit): Promise<void> }): Omit<ConformanceCheck, "group"> {
  return { name: check.name, feature: FEATURE_BINDING_SECRET, run: (kit) => check.run(secretKit(kit)) };
}

export const bindingSecretChecks: readonly ConformanceCheck[] = inGroup("binding-secret-v1", [
  secured({
    name: "connect with the client's bindingSecret protects the registration; no reply or route ever carries the secret",
    run: async ({ baseUrl, expectError, expectValue, session, protectedSession, statusOf }) => {
      const secret = mintBindingSecret();
      const reply = await postJson(
        baseUrl,
        connectRequest({ callerSession: uniqueName("secret-shown"), generation: crypto.randomUUID(), bindingSecret: secret }),
      );
      const value = expectValue(reply, "connected");
      lacks(Object.keys(value), "bindingSecret");
      lacks(reply.text, secret);
      const a = await protectedSession("secret-shown");
      // A plain registration is unprotected; renewed with a secret, it is protected by it.
      const plain = await session("secret-plain");
      expectValue(await plain.call("health"), "health");
      const renewed = await plain.renew({ bindingSecret: secret });
      lacks(Object.keys(expectValue(renewed, "connected")), "bindingSecret");
      lacks(renewed.text, secret);
      expectError(await plain.call("health"), "BINDING_SECRET_REQUIRED");
      expectValue(await plain.call("health", { bindingSecret: secret }), "health");
      const shown = [
        await a.renew(),
        await statusOf(a.callerSession),
        await getPath(baseUrl, SESSION_LIST_PATH),
        await a.call("health"),
        await a.call("resolve", { target: a.endpoint }),
      ];
      for (const shownReply of shown) {
        equal(shownReply.status, HTTP_STATUS.ok, shownReply.text);
        lacks(shownReply.text, a.bindingSecret!);
      }
      // Protected: a bound operation without the secret is refused.
      expectError(await a.call("health", { bindingSecret: undefined }), "BINDING_SECRET_REQUIRED");
    },
  }),
  secured({
    name: "every bound operation on a protected registration: no secret 401 BINDING_SECRET_REQUIRED, a wrong one 403 BINDING_SECRET_INVALID; nothing is read, acknowledged or ended",
    run: async ({ hasFeature, expectError, expectValue, session, protectedSession, asOwner }) => {
      const sender = await session("secret-sender");
      const [owner, other] = await Promise.all([protectedSession("secret-owner"), protectedSession("secret-other")]);
      const { envelope } = await sender.sendOk(owner.endpoint);
      const operations: Record<string, Record<string, unknown>> = {
        resolve: { target: sender.endpoint },
        send: { envelope: owner.envelopeTo(sender.endpoint) },
        receive: { cursor: "0" },
        acknowledge: { envelopeId: envelope.envelopeId },
        health: {},
        disconnect: {},
        ...(hasFeature(FEATURE_WATCH) ? { watch: { cursor: "0", waitMs: minWatchWaitMs } } : {}),
      };
      for (const [operation, fields] of Object.entries(operations)) {
        const missing = await asOwner(owner, operation, fields, undefined);
        equal(missing.status, HTTP_STATUS.unauthorized, operation);
        expectError(missing, "BINDING_SECRET_REQUIRED");
        equal(missing.headers.get("www-authenticate"), FEATURE_BINDING_SECRET, operation);
        for (const secret of [mintBindingSecret(), other.bindingSecret]) {
          const wrong = await asOwner(owner, operation, fields, secret);
          equal(wrong.status, HTTP_STATUS.forbidden, operation);
          expectError(wrong, "BINDING_SECRET_INVALID");
        }
      }
      // Nothing happened: the owner is live and its mail unacknowledged; nobody sent as it.
      assert.deepEqual(idsOf(await owner.drain()), [envelope.envelopeId]);
      assert.equal(expectValue(await owner.acknowledge(envelope.envelopeId), "acknowledged").duplicate, false);
      assert.deepEqual(await sender.drain(), []);
      expectValue(await other.call("health"), "health");
    },
  }),
  secured({
    name: "a secret on an unprotected registration is 403 BINDING_SECRET_INVALID",
    run: async ({ expectError, expectValue, session }) => {
      const plain = await session("secret-unasked");
      expectError(await plain.call("health", { bindingSecret: mintBindingSecret() }), "BINDING_SECRET_INVALID");
      expectValue(await plain.call("health"), "health");
    },
  }),
  secured({
    name: "connect under a live protected registration's name without its secret: 403 SESSION_PROTECTED with retryAfterMs within its lease; it keeps its endpoint and mail",
    run: async ({ expectValue, session, protectedSession, connectAs, statusOf, expectProtected }) => {
      const sender = await session("protected-sender");
      const owner = await protectedSession("protected-owner");
      const { envelope } = await sender.sendOk(owner.endpoint);
      const attempts: Record<string, Record<string, unknown>> = {
        "a new generation": {},
        "a new generation with another secret": { bindingSecret: mintBindingSecret() },
        "the same generation": { generation: owner.generation },
        "the same generation with another secret": { generation: owner.generation, bindingSecret: mintBindingSecret() },
      };
      for (const [label, fields] of Object.entries(attempts)) expectProtected(await connectAs(owner, fields), label);
      assert.deepEqual((await statusOf(owner.callerSession)).body.taskEndpoint, owner.endpoint);
      assert.deepEqual(idsOf(await owner.drain()), [envelope.envelopeId]);
      assert.equal(expectValue(await owner.acknowledge(envelope.envelopeId), "acknowledged").duplicate, false);
    },
  }),
  secured({
    name: "a connect repeated with the same secret (as after a lost reply) succeeds and keeps the registration; with another secret it is SESSION_PROTECTED",
    run: async ({ expectError, expectValue, session, protectedSession, asOwner, statusOf, expectProtected }) => {
      const sender = await session("retry-sender");
      const owner = await protectedSession("retry-owner");
      const { envelope } = await sender.sendOk(owner.endpoint);
      // The reply to the first connect never arrived: the client sends the very same connect again, at once.
      for (const attempt of ["first retry", "second retry"]) {
        const again = expectValue(await owner.renew(), "connected");
        deepEqual(again.endpoint, owner.endpoint, attempt);
        atLeast(Date.parse(again.leaseExpiresAt), Date.parse(owner.leaseExpiresAt), attempt);
      }
      expectProtected(await owner.renew({ bindingSecret: mintBindingSecret() }), "the same generation with another secret");
      // Still the one registration, protected by the owner's secret, with its mail.
      assert.deepEqual((await statusOf(owner.callerSession)).body.taskEndpoint, owner.endpoint);
      expectError(await asOwner(owner, "health", {}, mintBindingSecret()), "BINDING_SECRET_INVALID");
      assert.deepEqual(idsOf(await owner.drain()), [envelope.envelopeId]);
      assert.equal(expectValue(await owner.acknowledge(envelope.envelopeId), "acknowledged").duplicate, false);
    },
  }),
  secured({
    name: "the holder renews and replaces its registration (new generation) with its own secret; the retired generation cannot come back",
    run: async ({ expectError, expectValue, protectedSession, connectAs, statusOf, expectProtected }) => {
      const owner = await protectedSession("holder");
      assert.deepEqual(expectValue(await owner.renew(), "connected").endpoint, owner.endpoint);
      expectProtected(await owner.renew({ bindingSecret: undefined }), "a renewal without the secret");
      expectValue(await owner.call("health"), "health");
      const successor = await protectedSession("holder", { callerSession: owner.callerSession, bindingSecret: owner.bindingSecret });
      assert.notEqual(successor.endpoint.id, owner.endpoint.id);
      assert.deepEqual((await statusOf(owner.callerSession)).body.taskEndpoint, successor.endpoint);
      expectError(await owner.call("health"), "REGISTRATION_EXPIRED");
      expectError(await owner.renew(), "REGISTRATION_EXPIRED");
      expectError(await successor.call("health", { bindingSecret: undefined }), "BINDING_SECRET_REQUIRED");
      expectValue(await successor.call("health"), "health");
      expectProtected(await connectAs(owner, { bindingSecret: mintBindingSecret() }), "another secret after the replacement");
    },
  }),
  secured({
    name: "once a protected registration ended, a new generation may take the name; reviving the same generation needs the secret",
    run: async ({ expectError, expectValue, session, protectedSession }) => {
      const first = await protectedSession("ended");
      expectValue(await first.disconnect(), "disconnected");
      const missing = await first.renew({ bindingSecret: undefined });
      assert.equal(missing.status, HTTP_STATUS.unauthorized);
      expectError(missing, "BINDING_SECRET_REQUIRED");
      expectError(await first.renew({ bindingSecret: mintBindingSecret() }), "BINDING_SECRET_INVALID");
      assert.deepEqual(expectValue(await first.renew(), "connected").endpoint, first.endpoint);
      expectValue(await first.disconnect(), "disconnected");
      const taker = await session("ended", { callerSession: first.callerSession });
      assert.notEqual(taker.endpoint.id, first.endpoint.id);
      expectError(await first.renew(), "REGISTRATION_EXPIRED");
      // A lapsed lease frees the name too, for a client with another secret.
      const lapsing = await protectedSession("lapsed", { leaseMs: minLeaseMs });
      await sleep(minLeaseMs + 20);
      const next = await protectedSession("lapsed", { callerSession: lapsing.callerSession });
      assert.notEqual(next.endpoint.id, lapsing.endpoint.id);
    },
  }),
  secured({
    name: "malformed binding-secret fields are 400 INVALID_REQUEST: a connect secret is a string of at least minBindingSecretChars characters; previousSecret is no field",
    run: async ({ baseUrl, expectError, expectValue, protectedSession }) => {
      const owner = await protectedSession("secret-fields");
      const connect = () => connectRequest({ callerSession: uniqueName("secret-fields-c"), generation: crypto.randomUUID() });
      const tooShort = exactLength(minBindingSecretChars - 1);
      for (const bindingSecret of [true, false, 1, null, "", tooShort, exactLength(maxWireIdChars + 1)]) {
        const reply = await postJson(baseUrl, { ...connect(), bindingSecret });
        expectError(reply, "INVALID_REQUEST");
        lacks(reply.text, tooShort);
      }
      expectValue(await postJson(baseUrl, { ...connect(), bindingSecret: exactLength(minBindingSecretChars) }), "connected");
      expectError(
        await postJson(baseUrl, { ...connect(), bindingSecret: mintBindingSecret(), previousSecret: mintBindingSecret() }),
        "INVALID_REQUEST",
      );
      for (const bindingSecret of [true, 7, "", exactLength(maxWireIdChars + 1)]) {
        expectError(await owner.call("health", { bindingSecret }), "INVALID_REQUEST");
      }
      expectValue(await owner.call("health"), "health");
    },
  }),
]);
