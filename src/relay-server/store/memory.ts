/**
 * The in-process `RelayStore`: one relay process, all state in RAM, a fresh epoch per store.
 * Every method runs to completion without awaiting, so each is atomic within the process (the
 * async signatures are the seam's, for stores that do I/O).
 */
import { matchSecret } from "../binding-secret.ts";
import { type Budgets, createBudgets } from "./budgets.ts";
import { createDoorbell, type Doorbell } from "./doorbell.ts";
import { createMailboxes, type Mailboxes, storedCursor } from "./mailbox.ts";
import { createRegistry, type Registry } from "./registry.ts";
import {
  type AdmitEachOutcome,
  type AdmitRequest,
  bindingPasses,
  type BoundOperation,
  type BoundOutcomes,
  type ConnectOutcome,
  type ConnectRequest,
  isLive,
  type RelayStore,
} from "./store.ts";

/** The parts of the memory store, each owning its own state; the method groups below compose them. */
interface Parts {
  readonly registry: Registry;
  readonly doorbell: Doorbell;
  readonly budgets: Budgets;
  readonly mailboxes: Mailboxes;
}

type RegistrationMethods = Pick<
  RelayStore,
  "connect" | "binding" | "registration" | "successor" | "disconnect" | "sessionRegistration" | "liveRegistrations"
>;
type MailMethods = Pick<RelayStore, "admit" | "page" | "acknowledge" | "watch">;
type BoundMethods = Pick<RelayStore, "bound">;
type UpkeepMethods = Pick<RelayStore, "maintain" | "usage" | "close">;

/**
 * A connect: the registry decides; a place it reclaims and a generation it retires lose their
 * mailboxes here, and their watches are answered.
 */
function connect({ registry, mailboxes, doorbell }: Parts, request: ConnectRequest): ConnectOutcome {
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
}

function registrationMethods(parts: Parts): RegistrationMethods {
  const { registry, doorbell } = parts;
  return {
    connect: async (request) => connect(parts, request),

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
  };
}

function mailMethods({ registry, doorbell, mailboxes }: Parts): MailMethods {
  return {
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
  };
}

function upkeepMethods({ registry, doorbell, budgets, mailboxes }: Parts): UpkeepMethods {
  return {
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

export function createMemoryStore(): RelayStore {
  const epoch = crypto.randomUUID();
  const registry = createRegistry();
  const doorbell = createDoorbell();
  const budgets = createBudgets();
  const mailboxes = createMailboxes(budgets, (endpointId) => doorbell.ring(endpointId));
  const parts: Parts = { registry, doorbell, budgets, mailboxes };
  const registrations = registrationMethods(parts);
  const mail = mailMethods(parts);
  return { epoch: async () => epoch, ...registrations, ...mail, ...boundMethods(registrations, mail), ...upkeepMethods(parts) };
}

/** The operation on the binding's endpoint. */
function runBound(mail: MailMethods, endpointId: string, operation: BoundOperation): Promise<BoundOutcomes[BoundOperation["kind"]]> {
  switch (operation.kind) {
    case "admit":
      return mail.admit(operation.request);
    case "page":
      return mail.page(endpointId, operation.after, operation.limit);
    case "acknowledge":
      return mail.acknowledge(endpointId, operation.envelopeId);
    case "acknowledgeBatch":
      return Promise.all(operation.envelopeIds.map((envelopeId) => mail.acknowledge(endpointId, envelopeId)));
    case "admitEach":
      return admitEach(mail, endpointId, operation.requests, operation.acknowledge);
  }
}

/** `admitEach` (store.ts): the admissions in order, a refused target's later envelopes skipped; the acknowledgements only after all were accepted. */
async function admitEach(
  mail: MailMethods,
  endpointId: string,
  requests: readonly AdmitRequest[],
  acknowledge: readonly string[] | undefined,
): Promise<AdmitEachOutcome> {
  const refusedTargets = new Set<string>();
  const admitted: AdmitEachOutcome["admitted"][number][] = [];
  for (const request of requests) {
    if (refusedTargets.has(request.target.id)) {
      admitted.push({ kind: "skipped" });
      continue;
    }
    const outcome = await mail.admit(request);
    if (outcome.kind !== "accepted") refusedTargets.add(request.target.id);
    admitted.push(outcome);
  }
  if (acknowledge === undefined || refusedTargets.size > 0) return { admitted };
  const acknowledged = await Promise.all(acknowledge.map((envelopeId) => mail.acknowledge(endpointId, envelopeId)));
  return { admitted, acknowledged };
}

/** A binding and its operation, one after the other (nothing runs between them in one process). */
function boundMethods(registrations: RegistrationMethods, mail: MailMethods): BoundMethods {
  return {
    async bound(binding, operation) {
      const lookup = await registrations.binding(binding.session, binding.endpointId, binding.secretDigest, binding.now);
      if (!bindingPasses(lookup, binding.session, binding.now)) return { lookup };
      return { lookup, outcome: (await runBound(mail, binding.endpointId, operation)) as never };
    },
  };
}
