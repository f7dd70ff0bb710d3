/**
 * Envelopes that must not be sent right now because something else holds them: a request for the
 * same envelope already in flight (a concurrent same-id send joins it instead of retransmitting),
 * or a `wake_accepted` receipt written before a wake and withheld until the wake is observed or
 * withdrawn (presentation.ts). The outbox waits on either before it sends an envelope or younger
 * mail to the same recipient.
 */

export interface SendRegistry {
  /** What an envelope waits for now: its own request in flight or its withheld receipt. */
  pending(envelopeId: string): Promise<unknown> | undefined;
  /** Records a request in flight until it settles (cleared then, unless another replaced it). */
  track(envelopeId: string, request: Promise<unknown>): void;
  /** Forgets a settled request, when it is still the one recorded. */
  settled(envelopeId: string, request: Promise<unknown>): void;
  /**
   * Withholds receipts while a wake is tried; the returned function releases them (every waiter
   * then goes on, and the receipts may be sent).
   */
  withhold(envelopeIds: readonly string[]): () => void;
}

export function createSendRegistry(): SendRegistry {
  const inFlight = new Map<string, Promise<unknown>>();
  const withheld = new Map<string, Promise<void>>();
  return {
    pending(envelopeId) {
      return inFlight.get(envelopeId) ?? withheld.get(envelopeId);
    },
    track(envelopeId, request) {
      inFlight.set(envelopeId, request);
    },
    settled(envelopeId, request) {
      if (inFlight.get(envelopeId) === request) inFlight.delete(envelopeId);
    },
    withhold(envelopeIds) {
      let release = () => {};
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      for (const id of envelopeIds) withheld.set(id, held);
      return () => {
        for (const id of envelopeIds) if (withheld.get(id) === held) withheld.delete(id);
        release();
      };
    },
  };
}
