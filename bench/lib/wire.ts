/**
 * Wire values the bench builds itself: bound sessions on a relay and raw `volatile-v1` envelopes
 * with a payload of a given size (what a TaskCore would send, without the task layer).
 */
import { type EncodedEnvelope, mintBindingSecret } from "../../src/protocol/wire.ts";
import { WireSession } from "../../src/conformance/wire-client.ts";
import { canonicalBytes } from "../../src/protocol/canonical-json.ts";
import { RELAY_PROFILE, WIRE_PROTOCOL_VERSION } from "../../src/protocol/names.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import { createVolatileTaskSession, type VolatileTaskSession } from "../../src/relay-client/session.ts";

let serial = 0;

export function benchName(role: string): string {
  serial += 1;
  return `bench-${role}-${process.pid}-${serial}-${crypto.randomUUID().slice(0, 8)}`;
}

export async function boundSession(
  url: string,
  role: string,
  fetchImpl?: typeof fetch,
): Promise<{ session: VolatileTaskSession; endpoint: TaskEndpoint }> {
  const session = createVolatileTaskSession({
    url,
    callerSession: benchName(role),
    ...(fetchImpl === undefined ? {} : { fetch: fetchImpl }),
  });
  const binding = await session.connect();
  return { session, endpoint: binding.endpoint };
}

/**
 * A registration of a raw `fetch` client, protected like our client's (`binding-secret-v1`, which
 * our relay offers): `base` holds the fields every bound request carries, the secret among them.
 * A `VolatileTaskSession` keeps its secret to itself, so a raw client cannot borrow its binding.
 */
export async function rawBinding(url: string, role: string): Promise<{ base: Record<string, unknown>; endpoint: TaskEndpoint }> {
  const wire = await WireSession.connect(url, { callerSession: benchName(role), bindingSecret: mintBindingSecret() });
  const base = { profile: RELAY_PROFILE, ...wire.binding, bindingSecret: wire.bindingSecret };
  return { base, endpoint: wire.endpoint };
}

/** Text of `chars` ASCII characters. */
export function filler(chars: number): string {
  return "x".repeat(chars);
}

/** A wire envelope whose payload carries `textChars` characters of text (a task text of that size). */
export function envelopeWithText(
  source: TaskEndpoint,
  target: TaskEndpoint,
  text: string,
): Record<string, unknown> & { envelopeId: string } {
  const taskId = crypto.randomUUID();
  return {
    envelopeId: crypto.randomUUID(),
    protocolVersion: WIRE_PROTOCOL_VERSION,
    source: { relay: source.relay, id: source.id },
    target: { relay: target.relay, id: target.id },
    payload: { taskId, kind: "canonical_event", payload: { taskId, type: "task.information", message: text } },
    createdAt: new Date().toISOString(),
  };
}

/**
 * An envelope encoded for `VolatileTaskSession.send`. The core encodes each envelope once when it makes
 * it; a harness sending prepared envelopes plays that part with one `JSON.stringify`, as the raw
 * fetch client does, so the two clients pay the same encoding cost.
 */
export function encodedForSend(envelope: { readonly envelopeId: string }): EncodedEnvelope {
  return { envelopeId: envelope.envelopeId, text: JSON.stringify(envelope) };
}

export function canonicalSize(value: unknown): number {
  return canonicalBytes(value);
}
