/**
 * pi-tasks as a library (`import … from "pi-tasks"`): the task core and its RAM store, the relay
 * session, the configured core the Pi extension uses, and the protocol tables. The relay server
 * and the in-memory relay are `pi-tasks/relay`; the relay conformance suite is
 * `pi-tasks/conformance`; the Pi extension is `pi-tasks/extension`. See docs/library.md.
 */

// The task core and its RAM store.
export { createTaskCore, type TaskCore, type TaskCoreOptions } from "./core/task-core.ts";
export type {
  AckResult,
  CancelResult,
  CreateResult,
  DoneResult,
  EnvelopeDelivery,
  MessageResult,
  OperationOptions,
  ReassignResult,
} from "./core/task-core.ts";
export type { DeliveryEvidence, TaskView } from "./core/views.ts";
export type { ActivityNotSent, ActivityReport, UnreportedReport } from "./core/activity.ts";
export type { WorkerActivity } from "./core/bookkeeping.ts";
export type { PassReport } from "./core/pass.ts";
export type { ReceiveItem } from "./core/presentation.ts";
export { absentHost, type PresentationHost, type PresentationItem, type RejectionRecord } from "./core/host.ts";
export { systemTimers, type TaskTimers } from "./core/timers.ts";
export type { CoreBook, CoreStore } from "./core/bookkeeping.ts";
export { createTaskStore, type TaskSnapshot, type TaskStore, type TaskStoreOptions } from "./store/task-store.ts";

// The configured core: one relay session, one store, one core; relay loss re-homes its lifetime on a fresh endpoint.
export { createConfiguredTaskCore, type ConfiguredTaskCore, type ConfiguredTaskCoreOptions, type RecoveryInfo } from "./core/configured.ts";

// The relay session (the volatile task session) and its configuration.
export { createVolatileTaskSession, type VolatileTaskSession, type VolatileTaskSessionOptions } from "./relay-client/session.ts";
export { normaliseRelayUrl, relayConfigFromEnv, sessionNameFromEnv } from "./relay-client/config.ts";

// Trust: identities, peers, signatures (docs/security.md).
export { type PairingRequest, processLocalTrust, type Signer, type TrustOptions } from "./core/trust.ts";
export { homeTrust, type HomeTrustOptions } from "./core/home-trust.ts";
export { ensureIdentity, identityPath, loadIdentity } from "./trust/identity.ts";
export { fingerprintOf, generateIdentity, type Identity, isPublicKeyText } from "./trust/keys.ts";
export { addPeer, createPeerBook, listPeers, type Peer, type PeerBook, removePeer } from "./trust/peers.ts";
export { signPayload, verifyPayload } from "./trust/signing.ts";

// Protocol tables.
export { ERROR_REGISTRY, type ErrorCode, type ErrorSpec, errorSpec, sendRefusal, TaskError, toTaskError } from "./protocol/errors.ts";
export { eventTypeRow, TASK_EVENT_TYPES, type EventTypeRow } from "./protocol/events.ts";
export type {
  TaskEndpoint,
  TaskEnvelope,
  TaskEvent,
  TaskEventType,
  TaskIntent,
  TaskRecord,
  TaskStatus,
  TerminalDelivery,
} from "./protocol/schemas.ts";
export * as limits from "./protocol/limits.ts";
export * as names from "./protocol/names.ts";

// The in-memory relay fixture (the real relay answering a fetch function; also in `pi-tasks/relay`).
export { createInMemoryTaskRelay, type InMemoryTaskRelay } from "./relay-server/in-memory.ts";
