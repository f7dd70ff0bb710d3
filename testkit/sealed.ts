/**
 * Sealed mail as tests read it (src/trust/sealing.ts): a wire envelope's payload opened with an
 * identity of the test — by default this process's in-memory identity, the one every core of a
 * test shares unless it is given another. A party can open what it sent and what it received.
 */
import { type Carriage, openPayload, sealSigned } from "../src/core/envelopes.ts";
import { canonicalJson } from "../src/protocol/canonical-json.ts";
import { processLocalTrust } from "../src/core/trust.ts";
import type { TaskWirePayload } from "../src/protocol/schemas.ts";
import type { Identity } from "../src/trust/keys.ts";

type AnyPayload = { readonly kind?: string; readonly sealed?: unknown; readonly payload?: unknown; readonly taskId?: string };

/** An opened payload as tests read it: its inner payload loosely typed (tests probe any field). */
export type ClearPayload = Omit<TaskWirePayload, "payload"> & { readonly payload: any };

/** The payload as its parties read it: opened when sealed (undefined when it is not for `identity`), else as it is. */
export function clearPayload(payload: unknown, identity: Identity = processLocalTrust().identity): ClearPayload | undefined {
  const wire = payload as AnyPayload | undefined;
  if (wire === undefined || wire.sealed === undefined) return wire as ClearPayload | undefined;
  try {
    return openPayload(identity, wire as never).payload as ClearPayload;
  } catch {
    return undefined;
  }
}

/** A wire envelope with its payload opened (see `clearPayload`). */
export function clearEnvelope<E extends { readonly payload?: unknown }>(envelope: E, identity?: Identity): E & { payload: ClearPayload } {
  return { ...envelope, payload: clearPayload(envelope.payload, identity) } as E & { payload: ClearPayload };
}

/** Whether a wire envelope is a hello (a proof request or answer, src/core/proofs.ts), not task mail. */
export function isHello(envelope: { readonly payload?: unknown } | undefined): boolean {
  return (envelope?.payload as AnyPayload | undefined)?.kind === "hello";
}

/** How a test's forged mail travels the way real mail does: sealed to `identity`'s seal key (default this process's identity). */
export function sealedTo(identity: Identity = processLocalTrust().identity): Exclude<Carriage, "clear"> {
  if (identity.seal === undefined) throw new Error("sealedTo: the identity has no seal keys");
  return { sealTo: identity.seal().publicKey };
}

/**
 * A clear wire envelope (as `clearEnvelope` gives) sealed again the way a sender seals: by `sealer`
 * (the signer, whose binding travels inside) to `recipient`. Unsigned mail stays in the clear (only
 * signed content is sealed). What a test's hostile relay does when it is given the keys to forge with.
 */
export function resealed<E extends { readonly payload: ClearPayload }>(
  envelope: E,
  sealer: Identity = processLocalTrust().identity,
  recipient: Identity = processLocalTrust().identity,
): E {
  const { taskId, kind, payload, signature } = envelope.payload;
  if (signature === undefined) return envelope;
  const text = sealSigned(sealer, sealedTo(recipient).sealTo, taskId, kind, canonicalJson(payload), signature);
  return { ...envelope, payload: JSON.parse(text) };
}
