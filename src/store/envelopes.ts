/**
 * Envelope texts (`envelope`): each outbox or quarantined envelope stored once, as the exact
 * canonical JSON every attempt sends (same id, same `createdAt`), beside the small rows that track
 * it. The text is never parsed on write; a read parses it once (sealed mail stays sealed).
 */
import type { RelayedEnvelope } from "../protocol/schemas.ts";
import type { StoreKernel } from "./kernel.ts";
import type { TaskStore } from "./store-types.ts";

export interface Envelopes {
  readonly api: Pick<TaskStore, "getEnvelope" | "envelopeText">;
  put(envelopeId: string, envelopeText: string): void;
  discard(envelopeId: string): void;
}

export function createEnvelopes({ rows }: StoreKernel): Envelopes {
  return {
    api: {
      getEnvelope: (envelopeId) => rows.read<RelayedEnvelope>("envelope", envelopeId),
      envelopeText: (envelopeId) => rows.text("envelope", envelopeId),
    },
    put(envelopeId, envelopeText) {
      rows.writeText("envelope", envelopeId, envelopeText);
    },
    discard(envelopeId) {
      rows.remove("envelope", envelopeId);
    },
  };
}
