/**
 * TypeBox schemas and static types of pi-tasks: endpoints, task records, events, intents, the
 * relay wire envelope and its three payload kinds, delivery receipts and every tool's parameters.
 *
 * Every object schema is strict (`additionalProperties: false`). Inside the Pi CLI,
 * `@sinclair/typebox` is served by typebox 1.x, so this module (loaded by the extension) imports
 * only the package root and `/value`.
 */
import { type Static, type TSchema, Type } from "@sinclair/typebox";
import {
  maxActivitySummaryChars,
  maxActivityToolChars,
  maxArtifactFieldChars,
  maxChoiceChars,
  maxQuestionChoices,
  minQuestionChoices,
  maxGrantCostUsd,
  maxGrantPaths,
  maxGrantToolChars,
  maxGrantTools,
  maxGrantTurns,
  maxArtifacts,
  maxClaimedNameChars,
  maxLineageChainItems,
  maxRelayPayloadBytes,
  maxProgressChars,
  maxProgressPercent,
  maxWaitTasks,
  maxErrorMessageChars,
  maxPathChars,
  maxResultContentBytes,
  maxResultFiles,
  maxReasonChars,
  maxRevisionRounds,
  maxWorkflowSteps,
  maxSequenceDigits,
  maxSummaryChars,
  maxResumeTasks,
  maxTaskIdChars,
  maxTaskTextChars,
  maxUnreportedTextChars,
  maxWireIdChars,
  maxAuditEntries,
  maxWorkerNameChars,
  minWireIdChars,
  maxTaskTimeoutMs,
  minTaskTimeoutMs,
  maxWaitTimeoutMs,
  minWaitTimeoutMs,
} from "./limits.ts";
import { TASK_PROTOCOL_VERSION, WIRE_PROTOCOL_VERSION } from "./names.ts";

const strict = { additionalProperties: false } as const;

// ---------------------------------------------------------------------------------------------
// Scalars
// ---------------------------------------------------------------------------------------------

export const Id = Type.String({ minLength: 1, maxLength: maxTaskIdChars });
export const WireId = Type.String({ minLength: minWireIdChars, maxLength: maxWireIdChars });
export const TaskText = Type.String({ minLength: 1, maxLength: maxTaskTextChars });
export const Summary = Type.String({ minLength: 1, maxLength: maxSummaryChars });
export const Millis = Type.Integer({ minimum: 0 });

/**
 * A whole number for tool parameters. Pi coerces `integer` fields by truncation before tools run
 * (1000.5 would silently become 1000), so tool schemas declare `number` with `multipleOf: 1`,
 * which Pi's validator and ours both refuse for fractions.
 */
function wholeNumber(minimum: number, maximum: number) {
  return Type.Number({ multipleOf: 1, minimum, maximum });
}
/** A positive decimal sequence number, compared as BigInt. */
export const Sequence = Type.String({ pattern: `^[1-9][0-9]{0,${maxSequenceDigits - 1}}$` });
/** A JSON object with any members (for open payloads such as `result`). */
export const JsonObject = Type.Record(Type.String(), Type.Unknown());

export const TaskEndpoint = Type.Object(
  { relay: Type.String({ minLength: 1, maxLength: maxWireIdChars }), id: Type.String({ minLength: 1, maxLength: maxWireIdChars }) },
  strict,
);
export type TaskEndpoint = Static<typeof TaskEndpoint>;

export const TaskStatus = Type.Union([
  Type.Literal("active"),
  Type.Literal("completed"),
  Type.Literal("failed"),
  Type.Literal("cancelled"),
  Type.Literal("timed_out"),
]);
export type TaskStatus = Static<typeof TaskStatus>;

export const TerminalStatus = Type.Union([Type.Literal("completed"), Type.Literal("failed"), Type.Literal("cancelled")]);
export type TerminalStatus = Static<typeof TerminalStatus>;

// ---------------------------------------------------------------------------------------------
// Task record and events
// ---------------------------------------------------------------------------------------------

/**
 * Where a task sits in a delegation chain: its root task, its parent (when delegated onward), the
 * owner (the root origin, whose human is responsible for the chain) and the sessions of the chain
 * from the owner to this task's target (`depth` of them).
 */
export const Lineage = Type.Object(
  {
    rootTaskId: Id,
    parentTaskId: Type.Optional(Id),
    // Bounded for size only: the depth cap (lower) is the receiver's rule, refused by name
    // (DELEGATION_DEPTH_EXCEEDED, lineage.ts), not as a malformed delivery.
    depth: Type.Integer({ minimum: 2, maximum: maxLineageChainItems }),
    owner: Type.Object({ endpoint: TaskEndpoint, key: Type.String({ minLength: 1, maxLength: maxWireIdChars }) }, strict),
    chain: Type.Array(TaskEndpoint, { minItems: 2, maxItems: maxLineageChainItems }),
  },
  strict,
);
export type Lineage = Static<typeof Lineage>;

/**
 * What a task's worker may do (src/protocol/grant.ts): tool names, path scopes for file tools,
 * `bash` or not, and budgets — turns, cost, wall time. Absent fields grant what the worker's Pi
 * allows; a sub-delegation's grant is always narrowed to its parent's.
 */
/** What a grant allows besides budgets: the part a worker may ask to widen (grant-requests.ts). */
const grantScopeFields = {
  tools: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: maxGrantToolChars }), { maxItems: maxGrantTools })),
  bash: Type.Optional(Type.Boolean()),
  /** Whether the worker's commands may reach the network (its sandbox cuts it otherwise). */
  network: Type.Optional(Type.Boolean()),
  read: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: maxPathChars }), { maxItems: maxGrantPaths })),
  write: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: maxPathChars }), { maxItems: maxGrantPaths })),
};
export const Grant = Type.Object(
  {
    ...grantScopeFields,
    maxTurns: Type.Optional(Type.Integer({ minimum: 1, maximum: maxGrantTurns })),
    maxCostUsd: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: maxGrantCostUsd })),
    maxWallMs: Type.Optional(Type.Integer({ minimum: 1, maximum: maxTaskTimeoutMs })),
  },
  strict,
);
export type Grant = Static<typeof Grant>;
/**
 * What a worker asks to have beside its grant (`agent_task_request_grant`): tools, `bash`,
 * `network`, read or write paths — never budgets. Each field names only what it adds.
 */
export const GrantRequest = Type.Object(grantScopeFields, { ...strict, minProperties: 1 });
export type GrantRequest = Static<typeof GrantRequest>;

export const TaskRecord = Type.Object(
  {
    taskId: Id,
    protocolVersion: Type.Literal(TASK_PROTOCOL_VERSION),
    origin: TaskEndpoint,
    target: TaskEndpoint,
    task: TaskText,
    createdAt: Millis,
    expiresAt: Millis,
    status: TaskStatus,
    lineage: Type.Optional(Lineage),
    /** 1 at creation, one more per reassignment: mail of an older generation is refused. */
    generation: Type.Optional(Type.Integer({ minimum: 1 })),
    /** What the worker may do (signed with the record); absent: what the worker's Pi allows. */
    grant: Type.Optional(Grant),
    /** How many times the origin sent the result back for revision (absent: none). */
    revision: Type.Optional(Type.Integer({ minimum: 1, maximum: maxRevisionRounds })),
  },
  strict,
);
export type TaskRecord = Static<typeof TaskRecord>;

export const TASK_EVENT_TYPE_NAMES = [
  "task.created",
  "task.information",
  "task.question",
  "task.answer",
  "task.completed",
  "task.failed",
  "task.cancelled",
  "task.timed_out",
  "task.delivery_receipt",
  "task.parent_acknowledged",
  "task.late_terminal",
  "task.reassigned",
  "task.refused",
  "task.progress",
  "task.cancel_outcome",
  "task.orphaned",
  "task.correction",
  "task.audit_requested",
  "task.audit_view",
  "task.activity",
  "task.unreported",
  "task.revision_requested",
  "task.grant_requested",
  "task.grant_decided",
] as const;
export type TaskEventType = (typeof TASK_EVENT_TYPE_NAMES)[number];

export const TaskEventTypeSchema = Type.Union(TASK_EVENT_TYPE_NAMES.map((name) => Type.Literal(name)));

/** A canonical task event. `payload` is checked per type against `TASK_EVENT_TYPES`. */
export const TaskEvent = Type.Object(
  {
    eventId: Id,
    taskId: Id,
    type: TaskEventTypeSchema,
    sequence: Sequence,
    source: TaskEndpoint,
    target: TaskEndpoint,
    occurredAt: Millis,
    payload: JsonObject,
  },
  strict,
);
export interface TaskEvent<P extends Record<string, unknown> = Record<string, unknown>> {
  readonly eventId: string;
  readonly taskId: string;
  readonly type: TaskEventType;
  readonly sequence: string;
  readonly source: TaskEndpoint;
  readonly target: TaskEndpoint;
  readonly occurredAt: number;
  readonly payload: P;
}

// ---------------------------------------------------------------------------------------------
// Per-type payloads (intent payloads; the canonical payload adds `intentId` when it came from one)
// ---------------------------------------------------------------------------------------------

export const Artifact = Type.Object(
  {
    path: Type.String({ minLength: 1, maxLength: maxArtifactFieldChars }),
    mimeType: Type.Optional(Type.String({ minLength: 1, maxLength: maxArtifactFieldChars })),
    description: Type.Optional(Type.String({ minLength: 1, maxLength: maxArtifactFieldChars })),
  },
  strict,
);
export type Artifact = Static<typeof Artifact>;

/**
 * File content a worker's result carries (`result.content`, docs/protocol.md "Results that travel"):
 * a unified diff against the worktree's base commit, or the changed files themselves; each hashed
 * (SHA-256, hex). `omitted` says content was too large to attach; `absent` names changed files that
 * no longer exist.
 */
const Sha256Hex = Type.String({ pattern: "^[0-9a-f]{64}$" });
const ResultPath = Type.String({ minLength: 1, maxLength: maxPathChars });
export const ResultContent = Type.Object(
  {
    patch: Type.Optional(
      Type.Object(
        {
          format: Type.Literal("git-diff"),
          text: Type.String({ minLength: 1, maxLength: maxResultContentBytes }),
          sha256: Sha256Hex,
          base: Type.String({ pattern: "^[0-9a-f]{40,64}$" }),
        },
        strict,
      ),
    ),
    files: Type.Optional(
      Type.Array(
        Type.Object(
          {
            path: ResultPath,
            encoding: Type.Union([Type.Literal("utf8"), Type.Literal("base64")]),
            data: Type.String({ maxLength: maxResultContentBytes }),
            sha256: Sha256Hex,
          },
          strict,
        ),
        { maxItems: maxResultFiles },
      ),
    ),
    absent: Type.Optional(Type.Array(ResultPath, { maxItems: maxResultFiles })),
    omitted: Type.Optional(
      Type.Object(
        {
          code: Type.Literal("RESULT_TOO_LARGE"),
          bytes: Type.Integer({ minimum: 0 }),
          maxBytes: Type.Integer({ minimum: 0 }),
          files: Type.Optional(Type.Integer({ minimum: 0 })),
          maxFiles: Type.Optional(Type.Integer({ minimum: 0 })),
        },
        strict,
      ),
    ),
  },
  strict,
);
export type ResultContent = Static<typeof ResultContent>;

export const TaskFailure = Type.Object(
  {
    code: Type.String({ minLength: 1, maxLength: maxWireIdChars }),
    message: Type.String({ minLength: 1, maxLength: maxErrorMessageChars }),
    retryable: Type.Boolean(),
  },
  strict,
);
export type TaskFailure = Static<typeof TaskFailure>;

/** The author's word on an answer or result: `interim` (more may follow) or `final`. It closes nothing. */
export const Finality = Type.Union([Type.Literal("interim"), Type.Literal("final")]);

const terminalFields = {
  summary: Summary,
  finality: Type.Optional(Finality),
  /** Set by the origin when the task provably never ran (refused, undeliverable). */
  noEffect: Type.Optional(Type.Literal(true)),
  result: Type.Optional(JsonObject),
  error: Type.Optional(TaskFailure),
  artifacts: Type.Optional(Type.Array(Artifact, { maxItems: maxArtifacts })),
};
const intentIdField = { intentId: Type.Optional(Id) };

export const CreatedPayload = Type.Object({ task: TaskText }, strict);
/** A question or answer of another task this one is bound to (questions raised up a chain). */
const TaskEventRef = Type.Object({ taskId: Id, eventId: Id }, strict);
/** A question's choices (the answer must be one of them) and the one suggested (docs/protocol.md, "Questions with choices"). */
const Choice = Type.String({ minLength: 1, maxLength: maxChoiceChars });
const choiceFields = {
  choices: Type.Optional(Type.Array(Choice, { minItems: minQuestionChoices, maxItems: maxQuestionChoices })),
  defaultChoice: Type.Optional(Choice),
};
export const ConversationPayload = Type.Object(
  {
    ...intentIdField,
    message: TaskText,
    inReplyTo: Type.Optional(Id),
    raises: Type.Optional(TaskEventRef),
    ...choiceFields,
    /** Information the origin steers into the worker's running turn (never waiting for it to end). */
    steer: Type.Optional(Type.Literal(true)),
  },
  strict,
);
export const AnswerPayload = Type.Object(
  { ...intentIdField, message: TaskText, inReplyTo: Id, relayedFrom: Type.Optional(TaskEventRef), finality: Type.Optional(Finality) },
  strict,
);
/**
 * A correction (or withdrawal) of an answer or result its author gave earlier (`supersedes`): the
 * original stays stored and is shown as superseded.
 */
export const CorrectionPayload = Type.Object(
  {
    ...intentIdField,
    supersedes: Id,
    message: TaskText,
    result: Type.Optional(JsonObject),
    withdrawn: Type.Optional(Type.Literal(true)),
    finality: Type.Optional(Finality),
  },
  strict,
);
export const ProgressPayload = Type.Object(
  {
    ...intentIdField,
    message: Type.String({ minLength: 1, maxLength: maxProgressChars }),
    percent: Type.Optional(Type.Integer({ minimum: 0, maximum: maxProgressPercent })),
  },
  strict,
);
export const CancelOutcome = Type.Union([Type.Literal("aborted"), Type.Literal("idle"), Type.Literal("busy")]);
export type CancelOutcome = Static<typeof CancelOutcome>;
/** The origin's record that a task's worker is gone (not registered since `since`). */
export const OrphanedPayload = Type.Object({ since: Millis, target: TaskEndpoint }, strict);
/** The origin asks the worker for its view of the task (audit.ts). */
export const AuditRequestedPayload = Type.Object({}, strict);
/** One event as a side holds it: enough to join two views into one timeline. */
export const AuditEntry = Type.Object({ eventId: Id, type: TaskEventTypeSchema, sequence: Sequence, occurredAt: Millis }, strict);
export type AuditEntry = Static<typeof AuditEntry>;
/** The worker's view: its status and its newest `maxAuditEntries` events (`omitted` older ones left out). */
export const AuditViewPayload = Type.Object(
  {
    ...intentIdField,
    requestEventId: Id,
    status: TaskStatus,
    events: Type.Array(AuditEntry, { maxItems: maxAuditEntries }),
    omitted: Type.Integer({ minimum: 0 }),
  },
  strict,
);
export type AuditViewPayload = Static<typeof AuditViewPayload>;
export const ActivityState = Type.Union([Type.Literal("running"), Type.Literal("idle"), Type.Literal("waiting"), Type.Literal("stuck")]);
export type ActivityState = Static<typeof ActivityState>;
const usageFields = {
  turns: Type.Integer({ minimum: 0 }),
  tokens: Type.Integer({ minimum: 0 }),
  cost: Type.Optional(Type.Number({ minimum: 0 })),
};
/**
 * What the worker's model has used so far in this Pi session (cost where the model reports it), and
 * `chain`: the same summed over this worker and every worker of the sub-tasks it delegated from the
 * task (as they last reported, their own chains included) — absent while it delegated none.
 */
export const ActivityUsage = Type.Object(
  {
    ...usageFields,
    chain: Type.Optional(Type.Object({ ...usageFields, workers: Type.Integer({ minimum: 1 }) }, strict)),
  },
  strict,
);
export type ActivityUsage = Static<typeof ActivityUsage>;
/**
 * A worker's activity (never an event in the task's log: the origin keeps the newest as the task's
 * state): running (its current tool and a short summary of the call), idle, waiting for an answer,
 * or stuck; `since` when it entered that state.
 */
export const ActivityPayload = Type.Object(
  {
    ...intentIdField,
    state: ActivityState,
    tool: Type.Optional(Type.String({ minLength: 1, maxLength: maxActivityToolChars })),
    summary: Type.Optional(Type.String({ maxLength: maxActivitySummaryChars })),
    since: Millis,
    usage: ActivityUsage,
  },
  strict,
);
export type ActivityPayload = Static<typeof ActivityPayload>;
/** A worker's model ended its turns without reporting the task: what it last said, for the origin to decide. */
export const UnreportedPayload = Type.Object(
  { ...intentIdField, message: Type.String({ maxLength: maxUnreportedTextChars }), reminders: Type.Integer({ minimum: 0 }) },
  strict,
);
/**
 * The origin sends a completed result back to its worker (docs/protocol.md, "Revisions"): which
 * result, why, which round, and until when the task now runs.
 */
export const RevisionPayload = Type.Object(
  { result: Id, reason: TaskText, round: Type.Integer({ minimum: 1, maximum: maxRevisionRounds }), expiresAt: Millis },
  strict,
);
/** A worker asks its origin's person for more than its grant allows, once per task, with a reason. */
export const GrantRequestedPayload = Type.Object({ ...intentIdField, request: GrantRequest, reason: TaskText }, strict);
/**
 * The origin's person decided a grant request (`request`: its event id). Approved: `grant` is the
 * task's grant from now on (the old one widened by the request, narrowed to what the origin holds).
 */
export const GrantDecidedPayload = Type.Object(
  { request: Id, approved: Type.Boolean(), grant: Type.Optional(Grant), note: Type.Optional(TaskText) },
  strict,
);
/** What a worker's Pi did with a cancel: its turn aborted, it was already idle, or it was still busy after the grace period. */
export const CancelOutcomePayload = Type.Object({ ...intentIdField, cancelEventId: Id, outcome: CancelOutcome }, strict);
export const TerminalPayload = Type.Object({ ...intentIdField, ...terminalFields }, strict);
export type TerminalPayload = Static<typeof TerminalPayload>;
export const TimedOutPayload = Type.Object({ expiresAt: Millis }, strict);

export const ReceiptStage = Type.Union([
  Type.Literal("receiver_recorded"),
  Type.Literal("pi_inserted"),
  Type.Literal("wake_requested"),
  Type.Literal("wake_accepted"),
  Type.Literal("pi_insertion"),
]);
export type ReceiptStage = Static<typeof ReceiptStage>;
export const ReceiptState = Type.Union([Type.Literal("confirmed"), Type.Literal("blocked")]);
export type ReceiptState = Static<typeof ReceiptState>;

/** A delivery receipt (intent payload of `task.delivery_receipt`). */
export const DeliveryReceiptPayload = Type.Object(
  { ...intentIdField, eventId: Id, stage: ReceiptStage, state: ReceiptState, retryable: Type.Optional(Type.Boolean()) },
  strict,
);
export type DeliveryReceiptPayload = Static<typeof DeliveryReceiptPayload>;

export const ParentAcknowledgedPayload = Type.Object({ acknowledgedEventId: Id }, strict);
export const LateTerminalPayload = Type.Object(
  {
    ...intentIdField,
    lateType: Type.Union([Type.Literal("task.completed"), Type.Literal("task.failed"), Type.Literal("task.cancelled")]),
    ...terminalFields,
  },
  strict,
);
export const ReassignedPayload = Type.Object({ task: TaskText, previousTarget: TaskEndpoint }, strict);

/** The worker's refusal of an assignment (intent payload; the canonical payload adds who refused). */
export const RefusedPayload = Type.Object(
  {
    ...intentIdField,
    /** The assignment event refused. */
    eventId: Id,
    /** The signature (`sig`) of the refused assignment, as the worker received it. */
    assignmentSig: Type.String({ minLength: 1, maxLength: maxWireIdChars }),
    /** Why: the trust gate's code (e.g. UNKNOWN_PEER). */
    reason: Type.String({ minLength: 1, maxLength: maxWireIdChars }),
    /** Added by the origin: whether a key it trusts signed the refusal (then the task failed). */
    verified: Type.Optional(Type.Boolean()),
    /** Added by the origin: the refusing key and its fingerprint, as verified. */
    refusedBy: Type.Optional(
      Type.Object(
        {
          key: Type.String({ minLength: 1, maxLength: maxWireIdChars }),
          fingerprint: Type.String({ minLength: 1, maxLength: maxWireIdChars }),
          claimedName: Type.Optional(Type.String({ minLength: 1, maxLength: maxClaimedNameChars })),
        },
        strict,
      ),
    ),
  },
  strict,
);

// ---------------------------------------------------------------------------------------------
// Signatures (src/trust/signing.ts)
// ---------------------------------------------------------------------------------------------

/** An Ed25519 signature as text: 64 bytes, base64url without padding. */
const Ed25519SignatureText = Type.String({ pattern: "^[A-Za-z0-9_-]{86}$" });

/** A signature block next to a wire payload: the signer, the signed time and endpoints, the signature. */
export const SignatureBlock = Type.Object(
  {
    v: Type.Literal(1),
    key: Type.String({ pattern: "^ed25519:[A-Za-z0-9_-]{43}$" }),
    at: Type.String({ minLength: 1, maxLength: 64 }),
    from: TaskEndpoint,
    to: TaskEndpoint,
    sig: Ed25519SignatureText,
    /** The sender's claimed name: unsigned, untrusted, shown only as a claim. */
    name: Type.Optional(Type.String({ minLength: 1, maxLength: maxClaimedNameChars })),
  },
  strict,
);
export type SignatureBlock = Static<typeof SignatureBlock>;

// ---------------------------------------------------------------------------------------------
// Intents (receiver → origin requests; never authoritative)
// ---------------------------------------------------------------------------------------------

export const ReceiverIntentType = Type.Union([
  Type.Literal("task.information"),
  Type.Literal("task.question"),
  Type.Literal("task.answer"),
  Type.Literal("task.completed"),
  Type.Literal("task.failed"),
  Type.Literal("task.cancelled"),
  Type.Literal("task.delivery_receipt"),
  Type.Literal("task.refused"),
  Type.Literal("task.progress"),
  Type.Literal("task.cancel_outcome"),
  Type.Literal("task.correction"),
  Type.Literal("task.audit_view"),
  Type.Literal("task.activity"),
  Type.Literal("task.unreported"),
  Type.Literal("task.grant_requested"),
]);
export type ReceiverIntentType = Static<typeof ReceiverIntentType>;

export const TaskIntent = Type.Object(
  { intentId: Id, taskId: Id, type: ReceiverIntentType, payload: JsonObject, generation: Type.Optional(Type.Integer({ minimum: 1 })) },
  strict,
);
export type TaskIntent = Static<typeof TaskIntent>;

// ---------------------------------------------------------------------------------------------
// Relay wire envelope and the three task payload kinds
// ---------------------------------------------------------------------------------------------

/** A relay envelope carrying `payload`: exactly these keys. */
function envelopeSchema<Payload extends TSchema>(payload: Payload) {
  return Type.Object(
    {
      envelopeId: WireId,
      protocolVersion: Type.Literal(WIRE_PROTOCOL_VERSION),
      source: TaskEndpoint,
      target: TaskEndpoint,
      payload,
      createdAt: Type.String({ minLength: 1, maxLength: maxWireIdChars }),
    },
    strict,
  );
}

/** The relay's view of an envelope: its payload is any JSON. */
export const WireEnvelope = envelopeSchema(Type.Unknown());
export type WireEnvelope = Static<typeof WireEnvelope>;

export const EnvelopeKind = Type.Union([Type.Literal("assignment"), Type.Literal("intent"), Type.Literal("canonical_event")]);
export type EnvelopeKind = Static<typeof EnvelopeKind>;

/** `assignment`: origin → target; `event` is `task.created` or `task.reassigned`. */
export const AssignmentPayload = Type.Object(
  {
    task: TaskRecord,
    event: TaskEvent,
    history: Type.Optional(Type.Array(TaskEvent)),
    historyTruncated: Type.Optional(Type.Boolean()),
  },
  strict,
);
export type AssignmentPayload = Static<typeof AssignmentPayload>;

const signature = Type.Optional(SignatureBlock);
export const AssignmentWirePayload = Type.Object(
  { taskId: Id, kind: Type.Literal("assignment"), payload: AssignmentPayload, signature },
  strict,
);
export const IntentWirePayload = Type.Object({ taskId: Id, kind: Type.Literal("intent"), payload: TaskIntent, signature }, strict);
export const CanonicalWirePayload = Type.Object(
  { taskId: Id, kind: Type.Literal("canonical_event"), payload: TaskEvent, signature },
  strict,
);
export const TaskWirePayload = Type.Union([AssignmentWirePayload, IntentWirePayload, CanonicalWirePayload]);
export type TaskWirePayload = Static<typeof TaskWirePayload>;

/** A pi-tasks envelope as the trust gate and intake read it: the wire envelope with an (opened) task payload. */
export const TaskEnvelope = envelopeSchema(TaskWirePayload);
export type TaskEnvelope = Static<typeof TaskEnvelope>;

// ---------------------------------------------------------------------------------------------
// Sealed task mail and proofs of endpoints (src/trust/sealing.ts, src/core/proofs.ts)
// ---------------------------------------------------------------------------------------------

const SealKeyText = Type.String({ pattern: "^x25519:[A-Za-z0-9_-]{43}$" });
const Base64Url = (maxLength: number) => Type.String({ minLength: 1, maxLength, pattern: "^[A-Za-z0-9_-]+$" });

/** What travels instead of a task payload's content and signature: `{payload, signature, binding}` sealed to the recipient. */
export const SealedBox = Type.Object(
  { v: Type.Literal(1), from: SealKeyText, to: SealKeyText, nonce: Base64Url(64), box: Base64Url(maxRelayPayloadBytes) },
  strict,
);
export const SealedWirePayload = Type.Object({ taskId: Id, kind: EnvelopeKind, sealed: SealedBox }, strict);
export type SealedWirePayload = Static<typeof SealedWirePayload>;

/** What a sealed box holds: the payload, its signature, and the signer's binding of the seal key the box came from. */
export const SealedContent = Type.Object({ payload: JsonObject, signature: SignatureBlock, binding: Ed25519SignatureText }, strict);
export type SealedContent = Static<typeof SealedContent>;

/**
 * A content-free proof request or answer: "which key holds this endpoint?" answered by a signature
 * of that key made for this request (`inReplyTo`). `taskId` carries the hello's own id (the wire
 * needs one; it names no task). It states the sender's seal key and its binding, and nothing else.
 */
/**
 * A resumed origin's question on its hello — "do you still hold these tasks?" (`tasks`) — and the
 * worker's answer on its reply: the tasks asked about (`tasks`) and those of them it holds for the
 * asking key (`held`). Task ids only: no content (src/core/resume.ts).
 */
export const ResumeList = Type.Object(
  {
    tasks: Type.Array(Id, { minItems: 1, maxItems: maxResumeTasks }),
    held: Type.Optional(Type.Array(Id, { maxItems: maxResumeTasks })),
  },
  strict,
);
export type ResumeList = Static<typeof ResumeList>;

export const HelloPayload = Type.Object(
  { helloId: Id, inReplyTo: Type.Optional(Id), seal: SealKeyText, binding: Ed25519SignatureText, resume: Type.Optional(ResumeList) },
  strict,
);
export type HelloPayload = Static<typeof HelloPayload>;
export const HelloWirePayload = Type.Object(
  { taskId: Id, kind: Type.Literal("hello"), payload: HelloPayload, signature: SignatureBlock },
  strict,
);
export type HelloWirePayload = Static<typeof HelloWirePayload>;
export const HelloEnvelope = envelopeSchema(HelloWirePayload);
export type HelloEnvelope = Static<typeof HelloEnvelope>;

/** Anything pi-tasks puts on the wire: sealed task mail, a hello, or (legacy, unsigned peers only) a task payload in the clear. */
export const RelayedEnvelope = envelopeSchema(Type.Union([SealedWirePayload, HelloWirePayload, TaskWirePayload]));
export type RelayedEnvelope = Static<typeof RelayedEnvelope>;

// ---------------------------------------------------------------------------------------------
// Terminal delivery (receiver-side status of its terminal intent)
// ---------------------------------------------------------------------------------------------

export type TerminalDelivery =
  | { readonly state: "not_submitted" }
  | {
      readonly state: "pending" | "accepted";
      readonly intentId: string;
      readonly intentType: string;
      readonly envelopeId: string;
      readonly origin: TaskEndpoint;
    }
  | {
      readonly state: "delivery_blocked";
      readonly intentId: string;
      readonly intentType: string;
      readonly envelopeId: string;
      readonly origin: TaskEndpoint;
      readonly blockedAt: number;
      readonly error: { readonly code: string; readonly retryable: false; readonly details: Readonly<Record<string, unknown>> };
    };

// ---------------------------------------------------------------------------------------------
// Tool parameters
// ---------------------------------------------------------------------------------------------

export const SendParams = Type.Object(
  {
    to: TaskEndpoint,
    task: TaskText,
    timeoutMs: Type.Optional(wholeNumber(minTaskTimeoutMs, maxTaskTimeoutMs)),
  },
  strict,
);
export type SendParams = Static<typeof SendParams>;

export const MessageType = Type.Union([
  Type.Literal("question"),
  Type.Literal("answer"),
  Type.Literal("information"),
  Type.Literal("progress"),
  Type.Literal("correction"),
  /** From the origin only: information that reaches the worker's model inside its current run (Pi's steering queue). */
  Type.Literal("steer"),
]);
export type MessageType = Static<typeof MessageType>;

export const MessageParams = Type.Object(
  {
    taskId: Id,
    type: MessageType,
    message: TaskText,
    inReplyTo: Type.Optional(Id),
    /** A question of a sub-task this question raises on its parent task (its answer goes back down). */
    raisesQuestion: Type.Optional(Id),
    percent: Type.Optional(wholeNumber(0, maxProgressPercent)),
    /** A correction: the earlier answer or result (event id) it corrects or withdraws. */
    supersedes: Type.Optional(Id),
    /** A correction that withdraws what it supersedes (its message says why). */
    withdraw: Type.Optional(Type.Boolean()),
    /** A correction of a result: the corrected result. */
    result: Type.Optional(JsonObject),
    /** An answer or correction: `interim` or `final`. */
    finality: Type.Optional(Finality),
    /** A question: the answers it accepts (the answer must be exactly one of them). */
    choices: Type.Optional(Type.Array(Choice, { minItems: minQuestionChoices, maxItems: maxQuestionChoices })),
    /** A question with choices: the one suggested. */
    defaultChoice: Type.Optional(Choice),
  },
  strict,
);
export type MessageParams = Static<typeof MessageParams>;

export const DoneParams = Type.Object({ taskId: Id, status: TerminalStatus, ...terminalFields }, strict);
export type DoneParams = Static<typeof DoneParams>;

export const AckParams = Type.Object({ taskId: Id }, strict);
export type AckParams = Static<typeof AckParams>;

export const ReviseParams = Type.Object({ taskId: Id, reason: TaskText }, strict);
export type ReviseParams = Static<typeof ReviseParams>;

export const RequestGrantParams = Type.Object({ taskId: Id, request: GrantRequest, reason: TaskText }, strict);
export type RequestGrantParams = Static<typeof RequestGrantParams>;

export const CancelParams = Type.Object(
  { taskId: Id, reason: Type.Optional(Type.String({ minLength: 1, maxLength: maxReasonChars })) },
  strict,
);
export type CancelParams = Static<typeof CancelParams>;

export const StatusParams = Type.Object({ taskId: Id }, strict);
export type StatusParams = Static<typeof StatusParams>;

export const InboxParams = Type.Object({}, strict);
export type InboxParams = Static<typeof InboxParams>;

export const WaitParams = Type.Object(
  {
    taskId: Type.Optional(Id),
    /** Wait until any of these is terminal (1–32 ids); give this or taskId. */
    taskIds: Type.Optional(Type.Array(Id, { minItems: 1, maxItems: maxWaitTasks, uniqueItems: true })),
    timeoutMs: Type.Optional(wholeNumber(minWaitTimeoutMs, maxWaitTimeoutMs)),
  },
  strict,
);
export type WaitParams = Static<typeof WaitParams>;

export const ReassignParams = Type.Object({ taskId: Id, to: Type.Optional(TaskEndpoint) }, strict);
export type ReassignParams = Static<typeof ReassignParams>;

/** A worker's session name: letters, digits, `.`, `_` and `-`, starting with a letter or digit. */
export const WorkerName = Type.String({ minLength: 1, maxLength: maxWorkerNameChars, pattern: "^[A-Za-z0-9][A-Za-z0-9._-]*$" });

/**
 * `agent_task_send` as the model calls it: `to` is a task endpoint, or the name of a worker profile
 * (a specialist: extensions/pi-tasks/specialists.ts resolves it to a worker's endpoint, starting one
 * when none is free). The core takes only endpoints (`SendParams`).
 */
export const SendToolParams = Type.Object(
  {
    to: Type.Union([TaskEndpoint, WorkerName]),
    task: TaskText,
    timeoutMs: Type.Optional(wholeNumber(minTaskTimeoutMs, maxTaskTimeoutMs)),
  },
  strict,
);

/**
 * `agent_task_workflow`: several tasks run by the extension without a model turn between them —
 * `all` at once, a `chain` where each step gets the previous step's result, or `lanes`: chains side
 * by side, a step's `lane` naming its chain — with one wake of the origin's model when the workflow
 * ends (extensions/pi-tasks/workflows.ts).
 */
export const WorkflowParams = Type.Object(
  {
    mode: Type.Union([Type.Literal("all"), Type.Literal("chain"), Type.Literal("lanes")]),
    steps: Type.Array(
      Type.Object(
        {
          to: Type.Union([TaskEndpoint, WorkerName]),
          task: TaskText,
          timeoutMs: Type.Optional(wholeNumber(minTaskTimeoutMs, maxTaskTimeoutMs)),
          /** In mode `lanes`: the chain this step belongs to (steps of one lane run in the order given). */
          lane: Type.Optional(WorkerName),
        },
        strict,
      ),
      { minItems: 1, maxItems: maxWorkflowSteps },
    ),
  },
  strict,
);
export type WorkflowParams = Static<typeof WorkflowParams>;

export const SpawnParams = Type.Object(
  {
    name: WorkerName,
    projectDir: Type.Optional(Type.String({ minLength: 1, maxLength: maxPathChars })),
    model: Type.Optional(Type.String({ minLength: 3, maxLength: maxWireIdChars, pattern: "^[^/\\s]+/\\S+$" })),
    /** Keep the worker running after this Pi exits (default: it stops with this Pi). */
    keep: Type.Optional(Type.Boolean()),
    /** A worker profile by name (agent_task_workers lists them): its model, grant and instructions. */
    profile: Type.Optional(WorkerName),
    /**
     * The worker's workspace (default: what its profile says, else a workspace of its own — a git
     * worktree on a new branch, or a scratch copy outside git); true: a git worktree or nothing;
     * false: the project directory itself.
     */
    worktree: Type.Optional(Type.Boolean()),
  },
  strict,
);
export type SpawnParams = Static<typeof SpawnParams>;

export const ApplyParams = Type.Object({ taskId: Id }, strict);
export type ApplyParams = Static<typeof ApplyParams>;

export const WorkersParams = Type.Object({}, strict);
export type WorkersParams = Static<typeof WorkersParams>;

export const StopParams = Type.Object({ name: WorkerName }, strict);
export type StopParams = Static<typeof StopParams>;

export const TOOL_PARAMETERS = {
  agent_task_send: SendToolParams,
  agent_task_workflow: WorkflowParams,
  agent_task_message: MessageParams,
  agent_task_done: DoneParams,
  agent_task_ack: AckParams,
  agent_task_cancel: CancelParams,
  agent_task_revise: ReviseParams,
  agent_task_request_grant: RequestGrantParams,
  agent_task_apply: ApplyParams,
  agent_task_status: StatusParams,
  agent_task_inbox: InboxParams,
  agent_task_wait: WaitParams,
  agent_task_reassign: ReassignParams,
  agent_task_spawn: SpawnParams,
  agent_task_workers: WorkersParams,
  agent_task_stop: StopParams,
} as const satisfies Record<string, TSchema>;
export type ToolName = keyof typeof TOOL_PARAMETERS;
