/**
 * The in-process `RelayStore`: one relay process, all state in RAM, a fresh epoch per store.
 * Every method runs to completion without awaiting, so each is atomic within the process (the
 * async signatures are the seam's, for stores that do I/O).
 */
import { matchSecret } from "../binding-secret.ts";
import { createBudgets } from "./budgets.ts";
import { createDoorbell } from "./doorbell.ts";
import { createMailboxes, storedCursor } from "./mailbox.ts";
import { createRegistry } from "./registry.ts";
import { isLive, type RelayStore } from "./store.ts";

export function createMemoryStore(): RelayStore {
  const epoch = crypto.randomUUID();
  const registry = createRegistry();
  const doorbell = createDoorbell();
  const budgets = createBudgets();
  const mailboxes = createMailboxes(budgets, (endpointId) => doorbell.ring(endpointId));

  return {
    epoch: async () => epoch,

    async connect(request) {
      const before = registry.current(request.session);
      const outcome = registry.connect(
        request,
        (endpointId) => mailboxes.pinsMail(endpointId),
        (reclaimed) => {
          // A place taken back under contention: its mail expires (its senders are told on a resend).
          mailboxes.drop(reclaimed, "expired", request.now);
          doorbell.ring(reclaimed);
        },
      );
      if (outcome.kind === "connected" && before !== undefined && before.endpointId !== outcome.registration.endpointId) {
        // The old generation is retired: its mailbox can never be received again.
        mailboxes.drop(before.endpointId, "dropped", request.now);
        doorbell.ring(before.endpointId);
      }
      return outcome;
    },

    async binding(session, endpointId, secretDigest, now) {
      const registration = registry.get(endpointId);
      const secret = registration === undefined ? "ok" : matchSecret(registration.secretDigest, secretDigest);
      // Only the owner's own passing binding counts as use of the place.
      if (
        now !== undefined &&
        registration !== undefined &&
        secret === "ok" &&
        registration.session === session &&
        isLive(registration, now)
      )
        registry.touch(registration, now);
      return { callerKnown: registry.current(session) !== undefined, registration, secret };
    },

    registration: async (endpointId) => registry.get(endpointId),
    successor: async (endpointId, now) => registry.successor(endpointId, now),

    async disconnect(endpointId, now) {
      const registration = registry.get(endpointId);
      if (registration === undefined) return;
      registry.disconnect(registration, now);
      doorbell.ring(endpointId);
    },

    sessionRegistration: async (session) => registry.current(session),

    async liveRegistrations(now) {
      return [...registry.currents()].filter((registration) => isLive(registration, now));
    },

    async admit(request) {
      const target = registry.get(request.target.id);
      if (target === undefined || !isLive(target, request.now)) return { kind: "target-not-live" };
      return mailboxes.admit(request);
    },

    page: async (endpointId, after, limit) => mailboxes.page(endpointId, after, limit),
    acknowledge: async (endpointId, envelopeId) => mailboxes.acknowledge(endpointId, envelopeId),

    async watch({ endpointId, after, waitMs, signal, onPark }) {
      const from = storedCursor(after);
      const highest = mailboxes.highestCursor(endpointId);
      if (from > highest) return { kind: "cursor-ahead", highestCursor: highest.toString() };
      if (!mailboxes.hasPendingAfter(endpointId, from) && waitMs > 0) {
        onPark?.();
        await doorbell.wait(endpointId, waitMs, signal);
      }
      return {
        kind: "watch",
        pending: mailboxes.hasPendingAfter(endpointId, from),
        highestCursor: mailboxes.highestCursor(endpointId).toString(),
      };
    },

    async maintain(now) {
      // Mail first: a registration whose mail expired now is reaped in the same run.
      const { expiredMail, expiredReceipts } = mailboxes.expire(now);
      const reaped = registry.reap(now, (endpointId) => mailboxes.pinsMail(endpointId));
      // A reaped registration's mailbox goes with it (its mail, if any were left, expires).
      for (const endpointId of reaped) mailboxes.drop(endpointId, "expired", now);
      budgets.audit(mailboxes.usages());
      return { reaped: reaped.length, expiredReceipts, expiredMail };
    },

    async usage() {
      const counts = registry.counts();
      return {
        ...budgets.usage(),
        registrations: counts.registrations,
        sessions: counts.sessions,
        metadataBytes: counts.metadataBytes,
        expiryEntries: mailboxes.counts().expiryEntries,
        watching: doorbell.waiting(),
      };
    },

    async close() {
      doorbell.close();
    },
  };
}
