/**
 * Every bound of pi-tasks, named once with its unit.
 *
 * The wire's bounds are listed in docs/wire.md ("Limits"), the task and tool bounds in
 * docs/protocol.md. No other module may repeat these numbers; import the constant instead.
 * Every export is a number, named in one order — camelCase, its kind first (`max`, `min`,
 * `default`), its unit last: `maxLeaseMs` (tests/unit/limits.test.ts). The names that are not
 * bounds (paths, headers, versions, domains, defaults) are in src/protocol/names.ts.
 */

export const KiB = 1024;
export const MiB = 1024 * KiB;

// ---------------------------------------------------------------------------------------------
// Session names and TCP ports
// ---------------------------------------------------------------------------------------------

/** A generated session name: the project directory's slug (at most this long) plus a random suffix. */
export const maxGeneratedSessionSlugChars = 24;
export const generatedSessionSuffixChars = 6;
/** Valid TCP port range for `WOLFPACK_PORT` and `--port` (0 only on the CLI: "pick a free port"). */
export const minTcpPort = 1;
export const maxTcpPort = 65535;

// ---------------------------------------------------------------------------------------------
// Client transport (relay-client)
// ---------------------------------------------------------------------------------------------

/** Requests in flight at once for ordinary operations (resolve, send, receive, watch, …). */
export const maxInFlightRequests = 8;
/** Extra slots only `acknowledge` and `connect` may use, so ACKs and lease renewal never starve. */
export const reservedRequestSlots = 2;
/** Default per-request deadline, covering the complete response body. */
export const defaultRequestDeadlineMs = 12_000;
/** Smallest configurable request deadline. */
export const minRequestDeadlineMs = 1;
/** Largest configurable request deadline. */
export const maxRequestDeadlineMs = 15_000;
/** Renew the lease when less than (request deadline + this margin) remains. */
export const leaseRenewMarginMs = 10_000;
/** Largest response body the client reads before failing with `INVALID_RESPONSE`. */
export const maxResponseBodyBytes = 300 * KiB;
/** Largest request body (client pre-check `PAYLOAD_TOO_LARGE`; relay answers 413). */
export const maxRequestBodyBytes = 64 * KiB;

// ---------------------------------------------------------------------------------------------
// Envelopes, pages and cursors (shared by client and relay)
// ---------------------------------------------------------------------------------------------

/** Largest canonical-JSON payload of one envelope (`MAX_RELAY_PAYLOAD_BYTES`). */
export const maxRelayPayloadBytes = 48 * KiB;
/** Most deliveries one receive page holds. */
export const maxReceivePageItems = 50;
/** Most bytes one receive page holds, measured over each item's canonical `{cursor, envelope}`. */
export const maxReceivePageBytes = 256 * KiB;
/** Most decimal digits of a relay cursor. */
export const maxCursorDigits = 32;
/** Length bounds of opaque ids on the wire (`envelopeId`, `callerSession`, `generation`). */
export const minWireIdChars = 1;
export const maxWireIdChars = 512;
/** Bounds of `protocolVersions` in `connect`. */
export const minProtocolVersionsItems = 1;
export const maxProtocolVersionsItems = 16;

// ---------------------------------------------------------------------------------------------
// Leases
// ---------------------------------------------------------------------------------------------

/** Lease the client asks for, and the relay default when `leaseMs` is omitted. */
export const defaultLeaseMs = 60_000;
/** Smallest lease the relay grants. */
export const minLeaseMs = 1;
/** Largest lease the relay grants. */
export const maxLeaseMs = 300_000;

// ---------------------------------------------------------------------------------------------
// The refresh pass (TaskCore)
// ---------------------------------------------------------------------------------------------

/** Scoped sends (the current work's own envelopes) one pass may attempt. */
export const maxScopedSendsPerPass = 56;
/** Rotating old-work retry sends one pass may attempt. */
export const maxOldWorkSendsPerPass = 8;
/** ACK attempts (including repair) one pass may make. */
export const maxAckAttemptsPerPass = 48;
/** `ack-batch-v1`: the most envelope ids one `acknowledge` request may carry (a pass's ACK budget). */
export const maxAckBatchItems = maxAckAttemptsPerPass;
/**
 * `send-batch-v1` / `ack-carry-v1`: the most envelopes one `send` (`envelopes`) or one `acknowledge`
 * (carried `envelopes`) request may hold; the request body stays within `maxRequestBodyBytes`.
 */
export const maxSendBatchItems = 16;
/** Room a client leaves in a batch request for everything but the envelopes (operation, binding, secret, brackets). */
export const sendBatchHeadroomBytes = 2 * KiB;
/** Longest string canonical JSON scans for characters to escape itself; a longer one goes to `JSON.stringify` whole. */
export const maxCanonicalScanChars = 256;
/** Fetching pauses while this many relay deliveries are fetched but unacknowledged. */
export const maxFetchedUnacknowledgedDeliveries = 200;
/** Overall deadline of one background pass. */
export const passDeadlineMs = 2_000;
/** Retry and ACK-repair attempt slices: no new attempt starts after a slice ends. */
export const passSliceMs = 250;
/** Minimum cooldown of an envelope or ACK refused for capacity (a longer `retryAfterMs` wins). */
export const capacityCooldownMs = 5_000;
/**
 * After a configuration refusal (authentication, profile, address policy) all relay work holds
 * this long, doubling on each further refusal up to `maxConfigHoldMs`; a success ends the hold.
 */
export const configHoldInitialMs = 5_000;
export const maxConfigHoldMs = 60_000;

// ---------------------------------------------------------------------------------------------
// Background cadence and waiting (extension)
// ---------------------------------------------------------------------------------------------

/** Poll interval while a task is active, the outbox is pending or a gated worker waits. */
export const activePollIntervalMs = 1_000;
/**
 * After a request found the relay unreachable, sends wait this long instead of each trying the
 * network (one background pass at the active cadence probes meanwhile); see src/core/relay-health.ts.
 */
export const outageWaitMs = activePollIntervalMs;
/** Poll interval otherwise. */
export const idlePollIntervalMs = 5_000;
/** `agent_task_wait` re-check backoff: first delay, doubling up to the maximum. */
export const waitBackoffInitialMs = 250;
export const maxWaitBackoffMs = 2_000;
/** `watch-v1` wait the client asks for (the relay allows up to `maxWatchWaitMs`). */
export const watchClientWaitMs = 20_000;
/**
 * Poll interval with nothing active while a `watch-v1` watch is held. The doorbell brings mail at
 * once, and the watches keep the lease: each goes out right after the last answered (at most
 * `watchClientWaitMs` apart, within the `defaultRequestDeadlineMs + leaseRenewMarginMs` window in
 * which a request renews the lease: tests/extension/scheduler.test.ts), and renews it when due. The
 * pass is then a safety net, once a lease.
 */
export const idleWatchedPollIntervalMs = defaultLeaseMs;
/** A Pi wake that does not appear as a message within this time counts as not observed. */
export const wakeObservationMs = 1_000;
/** Trailing session-branch entries read to confirm an insertion. */
export const insertionScanEntries = 64;

// ---------------------------------------------------------------------------------------------
// The RAM TaskStore (per endpoint lifetime, lower-only)
// ---------------------------------------------------------------------------------------------

/** Most records (rows) one endpoint keeps. */
export const maxStoreRecords = 16_384;
/** Most encoded bytes one endpoint keeps (row text + key + per-record overhead). */
export const maxStoreEncodedBytes = 32 * MiB;
/** Bytes charged per record on top of its encoded text and key. */
export const storeRecordOverheadBytes = 64;

// ---------------------------------------------------------------------------------------------
// Tasks and tools
// ---------------------------------------------------------------------------------------------

/** Longest task text and message text, in characters (UTF-16 code units). */
export const maxTaskTextChars = 16 * KiB;
/** Longest `agent_task_done` summary, in characters. */
export const maxSummaryChars = 1_200;
/** Longest cancel reason, in characters. */
export const maxReasonChars = 1_200;
/** Longest error message inside `agent_task_done.error`, in characters. */
export const maxErrorMessageChars = 4 * KiB;
/** Most artifacts one `agent_task_done` may list. */
export const maxArtifacts = 64;
/** Longest artifact path or mime type or description, in characters. */
export const maxArtifactFieldChars = 1_024;
/** Longest task, event, intent or envelope id accepted from tools and the wire. */
export const maxTaskIdChars = maxWireIdChars;
/** Task timeout bounds and default (a failure deadline, not a poll interval). */
export const minTaskTimeoutMs = 1_000;
export const maxTaskTimeoutMs = 86_400_000;
export const defaultTaskTimeoutMs = 1_800_000;
/** `agent_task_wait` timeout: same bounds and default as the task timeout. */
export const minWaitTimeoutMs = minTaskTimeoutMs;
export const maxWaitTimeoutMs = maxTaskTimeoutMs;
export const defaultWaitTimeoutMs = defaultTaskTimeoutMs;
/** Most digits of a task event `sequence` (a positive decimal string). */
export const maxSequenceDigits = 32;

// ---------------------------------------------------------------------------------------------
// The standalone relay (relay-server) — docs/wire.md, "Request rules", "Limits" and "Our additions"
// ---------------------------------------------------------------------------------------------

/** A request body must be read completely within this time (else 408). */
export const relayBodyReadDeadlineMs = 5_000;
/** How often the relay fails body reads past `relayBodyReadDeadlineMs` (a read may take this much longer). */
export const relayBodyReadSweepMs = 250;
/** `createdAt` more than this far in the future is `ENVELOPE_EXPIRED`. */
export const maxEnvelopeFutureSkewMs = 30_000;
/** `createdAt` this old or older is `ENVELOPE_EXPIRED`. */
export const maxEnvelopeAgeMs = 150_000;
/** All active envelopes of one relay. */
export const maxRelayActiveItems = 4_096;
export const maxRelayActiveBytes = 64 * MiB;
/** One mailbox. */
export const maxRelayMailboxItems = 256;
export const maxRelayMailboxBytes = 8 * MiB;
/** One peer outbox (Wolfpack forwarding; our relay forwards nothing yet). */
export const maxRelayPeerOutboxItems = 128;
export const maxRelayPeerOutboxBytes = 8 * MiB;
/** Acknowledgement/dedupe receipts. */
export const maxRelayReceipts = 50_000;
export const maxRelayReceiptBytes = 8 * MiB;
/** Bytes charged per receipt on top of its canonical `{id, source, target}`. */
export const relayReceiptOverheadBytes = 1_024;
/** How long a receipt is kept after acceptance. */
export const relayReceiptRetentionMs = 15 * 60_000;
/** Registrations (and peer routes) of one relay, sharing one metadata budget. */
export const maxRelayRegistrations = 2_048;
export const maxRelayRoutes = 2_048;
export const maxRelayMetadataBytes = 16 * MiB;
/** Bytes charged per registration on top of its canonical size. */
export const relayRegistrationOverheadBytes = 128;
/** Maintenance timer period (lease reaping, receipt expiry). */
export const relayMaintenanceIntervalMs = 1_000;
/** Requests the relay works on at once; more get `RELAY_CAPACITY` with `retryAfterMs`. */
export const maxRelayConcurrentRequests = 28;
/** `retryAfterMs` the relay sends with an request-slot overload `RELAY_CAPACITY`. */
export const relayOverloadRetryAfterMs = 1_000;
/**
 * Wolfpack's relay: the pre-body HTTP slots its profile and endpoint routes share (requests held in
 * their body count); the next request gets `RELAY_CAPACITY` without `retryAfterMs`. The conformance
 * suite allows it without our `strict-answers-v1` (ours takes `maxRelayConcurrentRequests` at once).
 */
export const wolfpackHttpSlots = 24;
/** `watch-v1` wait bounds. */
export const minWatchWaitMs = 0;
export const maxWatchWaitMs = 25_000;
/** Grace after SIGTERM/SIGINT before the relay process must have exited. */
export const relayShutdownGraceMs = 2_000;
/**
 * How often a relay a Pi started checks that the install it runs from is still there, in
 * milliseconds (after `pi remove` it stops instead of running on from deleted files).
 */
export const embeddedRelayInstallCheckMs = 5_000;
/**
 * An expired, disconnected or superseded registration stays known this long (as long as the
 * receipts it may pin): the same generation renews it with the same endpoint id, and
 * `successor-v1` resolves a superseded one to its successor. Then it is reaped unless it pins mail.
 */
export const relayRegistrationRetentionMs = relayReceiptRetentionMs;
/** HTTP idle timeout of the relay's sockets: long enough for the longest `watch`. */
export const relayIdleTimeoutSeconds = 30;
/** Outstanding `watch` requests per endpoint; a newer watch answers the older one at once. */
export const relayWatchesPerEndpoint = 1;

// ---------------------------------------------------------------------------------------------
// Trust: identity, signed events, the trust gate, peers
// ---------------------------------------------------------------------------------------------

/** A signed event older than this (by its signed time) is stale. */
export const maxSignatureAgeMs = 24 * 60 * 60_000;
/** A signed event dated more than this into the future is stale. */
export const maxSignatureFutureSkewMs = 60_000;
/** Signed event ids remembered per endpoint lifetime to detect replays (oldest forgotten first). */
export const replayWindowEvents = 4_096;
/** Verified public keys kept parsed (oldest dropped first). */
export const verifyKeyCacheEntries = 256;
/** Most peers in peers.json. */
export const maxPeers = 256;
/** Longest peer name, in characters. */
export const maxPeerNameChars = 64;
/** Longest claimed (unverified) sender name carried next to a signature, in characters. */
export const maxClaimedNameChars = 64;
/** How long a peers.json change waits for another process's lock before PEERS_BUSY. */
export const peersLockWaitMs = 2_000;
/** A peers.json lock older than this whose holder is gone is taken over. */
export const peersLockStaleMs = 10_000;
/** How often a peers.json change asks again for a lock another process holds. */
export const peersLockPollMs = 25;
/** How long the interactive pairing dialog waits for the human before refusing. */
export const pairingDialogTimeoutMs = 120_000;
// Sealing (src/trust/sealing.ts) and proofs of endpoints (src/core/proofs.ts)
/** Bytes of an AES-256-GCM key and of an X25519 seed. */
export const sealKeyBytes = 32;
/** Bytes of an AES-GCM nonce (random per envelope). */
export const sealNonceBytes = 12;
/** Bytes of an AES-GCM authentication tag. */
export const sealTagBytes = 16;
/** Room kept under the payload bound for a sealed payload's header: two seal keys, a nonce, field names. */
export const sealHeaderReserveBytes = 512;
/** Peers' shared keys kept derived (oldest dropped first): one X25519 agreement per peer, not per envelope. */
export const sealSharedKeyCacheEntries = 256;
/** Endpoint proofs and seal keys a lifetime remembers (oldest forgotten first). */
export const maxProvenEndpoints = 1_024;
/** A content-free proof request (hello) to an endpoint that has not answered is asked again after this. */
export const helloRetryMs = 2_000;
/** Hellos a pass sends (asking) and answers (replying), each: a stranger's hellos cannot take a pass. */
export const maxHellosPerPass = 16;
/**
 * Tasks one resumed origin takes back from its session history (PI_TASKS_RESUME), and tasks one
 * resume question or answer names (count): the history beyond it is refused, never cut silently.
 */
export const maxResumeTasks = 64;
/** How long a resumed origin's start-up waits for its workers' word before its tools act (its tasks keep waiting after). */
export const resumeWaitMs = 3_000;
/** Between two looks at whether a resumed origin's workers answered, during `resumeWaitMs`. */
export const resumePollMs = 100;
/** Proof requests of this lifetime awaiting an answer (oldest forgotten first). */
export const maxPendingHellos = 256;
/** How long `agent_task_send` waits for a new worker to prove who it is before it answers "pending". */
export const sendProofWaitMs = 3_000;
/** Characters of the session's generation in that suffix. */
export const derivedNameSuffixChars = 8;
/** While `agent_task_send` waits for that proof, how long between two passes. */
export const sendProofPollMs = 50;
/** Room kept under the payload bound for a signature block (key, time, endpoints, signature, claimed name). */
export const signatureReserveBytes = KiB;
/** Random bytes of the binding secret our client picks (binding-secret-v1; 43 base64url characters). */
export const bindingSecretBytes = 32;
/** The relay's random key for acceptance ids (a keyed hash of the envelope id, so none is stored). */
export const acceptanceKeyBytes = 32;
/** Bytes of a UUID. */
export const uuidBytes = 16;
/** Shortest binding secret a relay accepts on connect (binding-secret-v1), in characters. */
export const minBindingSecretChars = 32;

// ---------------------------------------------------------------------------------------------
// Delegation beyond one hop, progress, cancel
// ---------------------------------------------------------------------------------------------

/**
 * The most sessions in one delegation chain, its owner included (lower-only): A→B→C has 3, so
 * with the default C may not delegate onward (DELEGATION_DEPTH_EXCEEDED).
 */
export const maxDelegationDepth = 3;
/** The most endpoints a received lineage may list (a size bound of the schema; the cap above is the rule). */
export const maxLineageChainItems = 16;
/** At the origin, a task's progress is shown to the model at most once per this interval (else archived). */
export const minProgressIntervalMs = 10_000;
/** At the origin, at most this many progress events are shown to the model per pass (the rest archived). */
export const maxProgressPresentationsPerPass = 1;
/** A progress report's `percent` runs from 0 to this. */
export const maxProgressPercent = 100;
/** Longest progress message, in characters. */
export const maxProgressChars = 1_200;
/** After a cancel reaches a busy worker, how long it may take to become idle before it counts as still busy. */
export const cancelAbortGraceMs = 5_000;
/** During that grace period, how often the worker's idleness is checked. */
export const cancelIdlePollMs = 50;
/**
 * The most tasks one session may hold active as their origin at once: a fan-out cap against runaway
 * delegation (`FANOUT_LIMIT`). The person may set a lower one (`PI_TASKS_MAX_ACTIVE_TASKS`), never a higher.
 */
export const maxActiveOriginTasks = 16;
/**
 * The most workers one Pi may have spawned and running at once (`SPAWN_LIMIT`). The person may set a
 * lower number (`PI_TASKS_MAX_WORKERS`), never a higher.
 */
export const maxSpawnedWorkers = 6;
/** Most worker profiles one Pi reads (from its project and its home together). */
export const maxWorkerProfiles = 64;
/** Largest worker profile file read, in bytes. */
export const maxWorkerProfileBytes = 64 * KiB;
/** Longest `git diff --stat` a worker's result carries from its worktree, in characters (cut with a note beyond). */
export const maxWorkspaceDiffChars = 4_000;
/** Most untracked files a worker's result names from its worktree (a count of the rest beyond). */
export const maxWorkspaceUntracked = 50;
/** Largest diff of the person's uncommitted changes carried into a worker's new worktree, in bytes (beyond: WORKTREE_UNAVAILABLE). */
export const maxCarriedDiffBytes = 64 * MiB;
/** Most bytes of files a scratch copy of a project outside git may take (beyond: WORKSPACE_TOO_LARGE, nothing copied). */
export const maxScratchCopyBytes = 256 * MiB;
/** Most entries (files, directories, links) a scratch copy of a project outside git may hold (beyond: WORKSPACE_TOO_LARGE). */
export const maxScratchCopyEntries = 20_000;
/** How many times an origin may send a completed result back to its worker for revision. */
export const maxRevisionRounds = 3;
/**
 * How long a specialist started for a send by name (`agent_task_send {to: "reviewer"}`) stays warm
 * without a task of the Pi that started it, in milliseconds; then it is stopped.
 */
export const specialistIdleMs = 10 * 60_000;
/** How often the Pi looks for specialists idle longer than `specialistIdleMs`, in milliseconds. */
export const specialistPoolCheckMs = 30_000;
/** Most steps one workflow (`agent_task_workflow`) runs; each is a task, all within the fan-out cap. */
export const maxWorkflowSteps = 8;
/**
 * How often the extension looks at a running workflow's steps (to start the next of a chain, or to
 * end it) besides after every pass, in milliseconds: a look reads the steps' tasks in RAM, and runs
 * only while a workflow runs.
 */
export const workflowCheckMs = 250;
/** A question with choices offers at least this many (`agent_task_message` `choices`). */
export const minQuestionChoices = 2;
/** A question with choices offers at most this many. */
export const maxQuestionChoices = 12;
/** Longest choice of a question, in characters. */
export const maxChoiceChars = 200;
/** Most tool names a grant lists. */
export const maxGrantTools = 64;
/** Most path scopes a grant lists for reading, and for writing. */
export const maxGrantPaths = 32;
/** Longest tool name in a grant, in characters. */
export const maxGrantToolChars = 64;
/** The largest turn budget a grant may give. */
export const maxGrantTurns = 10_000;
/** The largest cost budget a grant may give, in US dollars. */
export const maxGrantCostUsd = 10_000;
/** Most task ids one `agent_task_wait` call waits on. */
export const maxWaitTasks = 32;

// ---------------------------------------------------------------------------------------------
// Worker activity and liveness (docs/protocol.md, "Worker activity")
// ---------------------------------------------------------------------------------------------

/** A worker reports a change of its activity at most once per this interval (changes in between coalesce). */
export const minActivityReportIntervalMs = 1_000;
/** While it holds an active task, a worker reports its activity at least this often (a heartbeat). */
export const heartbeatIntervalMs = 3_000;
/**
 * At the origin, a worker that has reported activity and then stays silent this long while its task
 * is active (and this side reaches the relay) is gone: the task is orphaned. Three heartbeats.
 */
export const heartbeatSilenceMs = 3 * heartbeatIntervalMs;
/** A worker whose model has been running this long without a tool call, message or turn reports `stuck`. */
export const stuckAfterMs = 120_000;
/** Longest tool name in an activity report, in characters. */
export const maxActivityToolChars = 64;
/** Longest summary of a running tool's arguments in an activity report, in characters. */
export const maxActivitySummaryChars = 120;
/** How many times a worker's model is reminded to report a task it ended its turn without reporting. */
export const maxDoneReminders = 1;
/** Longest last assistant text a worker sends when it ended without reporting, in characters. */
export const maxUnreportedTextChars = 2_000;

// ---------------------------------------------------------------------------------------------
// Outcomes under failure: orphans, reconnection after a relay restart
// ---------------------------------------------------------------------------------------------

/** How often the origin asks the relay whether an active task's worker is still registered. */
export const orphanProbeIntervalMs = 5_000;
/**
 * A worker not registered for this long (probe after probe) makes its task orphaned. With the
 * probe interval this bounds detection: orphaned at most orphanAfterMs + orphanProbeIntervalMs
 * after the relay dropped the registration (at once on disconnect, at lease expiry after a crash).
 */
export const orphanAfterMs = 10_000;
/** Most events a worker puts in its audit view (the newest; the count of older ones is given). */
export const maxAuditEntries = 256;
/** The shortest task id prefix `pi-tasks audit` accepts (the board shows 8 characters). */
export const minTaskIdPrefixChars = 8;
/** Characters of a task or question id people read: on the board, the footer's notices, the widget. */
export const shortIdChars = 8;
/**
 * The shortest id prefix the tools and `/tasks` resolve among the tasks (or questions) this lifetime
 * knows. Shorter strings are not prefixes but mistakes: a model's mangled id ("3", "a") would
 * otherwise cancel or acknowledge whichever one task happens to start with it. 4 hex characters are
 * 65,536 values against at most `maxStoreRecords` records, and as many as a person types (`/tasks answer 7c1e`).
 */
export const minIdPrefixChars = 4;
/** How long `/tasks audit` waits for the worker's view before printing without it. */
export const auditWaitMs = 6_000;
/** Most registration probes (and reconnection lookups) per pass. */
export const maxPeerProbesPerPass = 8;
/**
 * After a relay restart, how long a task looks for its peer's new endpoint (by its session name)
 * before the origin declares it orphaned; the worker keeps looking, its task marked indeterminate.
 */
export const reconnectTimeoutMs = 30_000;

// ---------------------------------------------------------------------------------------------
// Units
// ---------------------------------------------------------------------------------------------

export const msPerSecond = 1_000;

// ---------------------------------------------------------------------------------------------
// Optional JWT (loopback HTTP only)
// ---------------------------------------------------------------------------------------------

/** Shortest accepted `WOLFPACK_JWT_SECRET`, in characters (after trimming). */
export const minJwtSecretChars = 32;
/** Clock tolerance when checking `exp`, `nbf` and `iat`. */
export const jwtClockToleranceMs = 30_000;
/** Lifetime of a client-minted token (`exp = iat + 60`). */
export const jwtTokenLifetimeMs = 60_000;
/** Random bytes in a token's `jti` (16 hex characters). */
export const jwtIdBytes = 8;

// ---------------------------------------------------------------------------------------------
// Worker spawning (CLI)
// ---------------------------------------------------------------------------------------------

/** Longest worker session name `agent_task_spawn` accepts, in characters. */
export const maxWorkerNameChars = 64;
/** Longest project directory path a tool accepts, in characters. */
export const maxPathChars = 4_096;
/**
 * File content a worker's result carries (a patch and small files, encoded bytes in total): more is
 * not attached, and the result says so (`content.omitted`, RESULT_TOO_LARGE). Sealed and signed it
 * stays within `maxRelayPayloadBytes` beside the rest of the result.
 */
export const maxResultContentBytes = 24 * KiB;
/** Files one result carries (count). */
export const maxResultFiles = 16;
/** Default time a spawned worker has to register its endpoint. */
export const defaultWorkerReadinessTimeoutMs = 30_000;
/** Bounds of `--readiness-timeout-ms`. */
export const minWorkerReadinessTimeoutMs = 1_000;
export const maxWorkerReadinessTimeoutMs = 600_000;
/** How often `spawn` asks the relay whether the worker registered. */
export const workerReadinessPollMs = 100;
/** How often a worker holder checks that the Pi which spawned it (and did not keep it) still runs. */
export const workerOwnerPollMs = 1_000;
/** A stopped worker gets this long to shut Pi down before it is killed. */
export const workerShutdownGraceMs = 5_000;
/** How long `kill` and cleanup wait to confirm a process is gone. */
export const processExitConfirmMs = 8_000;
/** Deadline of the CLI's own relay checks (preflight, status, list). */
export const cliRelayCheckMs = 3_000;
/** A relay started as a child process must print its readiness line within this time. */
export const relayReadyTimeoutMs = 10_000;
/**
 * How long session start waits for the default relay to answer its first probe before judging it
 * absent (nothing accepts the connection: a refusal comes at once) or slow (something accepted it).
 */
export const relayProbeMs = 1_000;
/**
 * How many times session start probes a relay whose probe timed out before it stops waiting for it
 * (attempts, the first included). A timeout is not an answer: something holds the port but did not
 * answer in time — on a loaded machine, most often the user's own relay. Each attempt waits twice
 * as long as the one before (`relayProbeMs`, then 2 s, then 4 s): the wait itself is the backoff,
 * since a pause between attempts would only delay an answer that is merely late.
 */
export const relayProbeAttempts = 3;
/**
 * Ports after the default relay port where a Pi looks for (or starts) the user's own relay when the
 * default port is held by a server that is not a volatile-v1 relay — the released Wolfpack, which
 * serves only its v2 task relay there (src/host/embedded-relay.ts, "beside"). Every Pi of the user
 * tries them in the same order, so they all find the same relay.
 */
export const fallbackRelayPorts = 4;
/** The most session start spends on those attempts: 1 s + 2 s + 4 s. */
export const relayProbeBudgetMs = relayProbeMs * (2 ** relayProbeAttempts - 1);
/** How often a Pi waiting for a relay that another process is starting asks again. */
export const relayStartPollMs = 100;
/**
 * How often, at most, a Pi whose embedded relay stopped answering looks at its port to start the
 * relay again (src/host/embedded-relay.ts `reviveRelay`): it went away without the person stopping
 * it (a crash, a kill), and every Pi of the user races for the one start lock.
 */
export const relayReviveIntervalMs = 5_000;
/** On shutdown a lifetime tells the relay it is gone (`disconnect`) within this time, best effort. */
export const shutdownDisconnectMs = 1_000;
/** Characters of one transcript line of a spawned worker's log (longer text is cut, marked `…`). */
export const maxTranscriptLineChars = 360;
/** Open tasks the notice at Pi's quit lists one by one (extensions/pi-tasks/quit-notice.ts); the rest are counted. */
export const maxQuitNoticeTasks = 10;
/** Newest transcript lines of a spawned worker `/tasks <id>` shows. */
export const maxShownTranscriptLines = 20;
/** Bytes read from the end of a spawned worker's transcript for `/tasks <id>`. */
export const maxTranscriptTailBytes = 16 * KiB;
/** Characters of a child process's stderr quoted in a diagnostic. */
export const diagnosticTailChars = 2_000;
/** The demo must see the origin acknowledge the completed task within this time. */
export const demoTimeoutMs = 90_000;

// ---------------------------------------------------------------------------------------------
// The Redis relay store (`pi-tasks relay --store redis://…`) — docs/multi-machine.md
// ---------------------------------------------------------------------------------------------

/** Connecting to Redis (at start-up, and again after the connection was lost) gives up after this. */
export const redisConnectTimeoutMs = 2_000;
/** A store call Redis has not answered within this fails (the relay answers `RELAY_UNAVAILABLE`). */
export const redisCommandTimeoutMs = 5_000;
/**
 * The cursor space of a mailbox in Redis: a cursor is a sorted-set score there, exact up to 2^53 − 1
 * (the in-process store's space is `maxCursorDigits` digits). Beyond it the mailbox is full
 * (budget `cursor`), as in memory.
 */
export const maxRedisCursor = Number.MAX_SAFE_INTEGER;

// ---------------------------------------------------------------------------------------------
// What others wrote, as pi-tasks shows it (extensions/pi-tasks/quote.ts), and pairing dialogs —
// docs/security.md, "Showing what peers wrote"
// ---------------------------------------------------------------------------------------------

/** Characters of a claimed name shown, escapes included (a longer one is cut and marked `…`). */
export const maxShownClaimChars = 64;
/** Longest quote of peer text on one line of a question notice, in characters. */
export const maxShownQuoteChars = 120;
/** The shortest fence around quoted peer text: Markdown's own shortest code fence. */
export const minQuoteFenceChars = 3;
/** Pairing dialogs open at once; mail from any further unknown key is refused (and counted). */
export const maxPendingPairingDialogs = 3;

// ---------------------------------------------------------------------------------------------
// The relay secret: who may use the embedded relay, and how a relay proves itself —
// docs/security.md, "The relay secret"; docs/wire.md, "Our additions"
// ---------------------------------------------------------------------------------------------

/** Random bytes of a relay secret a Pi makes for its embedded relay (one file per user and port). */
export const relaySecretBytes = 32;
/** Fewest bytes a relay secret file may hold (decoded), for a secret made elsewhere. */
export const minRelaySecretBytes = relaySecretBytes;
/** Largest relay secret file read. */
export const maxRelaySecretFileBytes = KiB;
/** Lifetime of a token signed with the relay secret (`exp = iat + 10`): seconds, not a minute. */
export const relayTokenLifetimeMs = 10_000;
/** Clock tolerance for relay tokens (one machine's clock, or machines kept in time). */
export const relayTokenClockToleranceMs = 2_000;
/** Random bytes in a relay token's `jti`. */
export const relayTokenIdBytes = 16;
/**
 * Token ids a relay remembers, each until its token expires, so none is accepted twice. Full of
 * unexpired ids (over ≈ 5,000 requests per second), it answers RELAY_CAPACITY rather than forget one.
 */
export const relayTokenReplayEntries = 65_536;
/** Random bytes of a challenge (the profile challenge, the instance challenge). */
export const relayChallengeBytes = 32;
/** Random bytes of an embedded relay's instance nonce (its record and the relay process know it). */
export const relayInstanceBytes = 32;

// ---------------------------------------------------------------------------------------------
// Fair shares (no one client can switch the relay off) — docs/wire.md, "Our
// additions" (`quotas-v1`, `mail-expiry-v1`), and docs/operations.md, "Budgets". A sender is a
// registration (the one identity the relay can verify); each share is a fraction of a relay-wide
// budget above, so the shares move with the budgets.
// ---------------------------------------------------------------------------------------------

/**
 * What one sender may hold of the relay-wide envelope budget (queued, unacknowledged): a quarter,
 * so a runaway session leaves three quarters to everyone else and filling the relay takes four
 * registrations. A Pi queues a few dozen envelopes while its workers receive; the busiest sender
 * measured, the bench's origin holding 1,000 active tasks whose workers never receive (growth
 * curve of createTask), about 1,010.
 */
export const maxRelaySenderActiveItems = maxRelayActiveItems / 4;
export const maxRelaySenderActiveBytes = maxRelayActiveBytes / 4;
/** One sender's share of one mailbox: half, so a flood from one sender leaves the other half to the target's other senders. */
export const maxRelaySenderMailboxItems = maxRelayMailboxItems / 2;
export const maxRelaySenderMailboxBytes = maxRelayMailboxBytes / 2;
/**
 * One sender's share of the receipt budget, i.e. of its sends within the receipt window (each
 * accepted envelope holds a receipt for `relayReceiptRetentionMs`, acknowledged or not; about
 * 1.2 KiB of the budget each): half, about 3,400 envelopes per 15 minutes (≈ 3.7/s sustained, in
 * bursts up to that), so one sender cannot spend the receipts every other sender needs for 15
 * minutes. The busiest sender measured, the bench's origin timing createTask beside 1,000 active
 * tasks (growth curve), sends about 2,400 within 15 minutes.
 */
export const maxRelaySenderReceipts = maxRelayReceipts / 2;
export const maxRelaySenderReceiptBytes = maxRelayReceiptBytes / 2;
/**
 * `retryAfterMs` of a refusal for a sender's share: room comes back when the target receives and
 * acknowledges, which an idle Pi does within one idle poll.
 */
export const relayQuotaRetryAfterMs = idlePollIntervalMs;
/**
 * Queued mail expires this long after its acceptance if its target has not acknowledged it
 * (`mail-expiry-v1`): an hour outlasts the longest lease (5 min) plus the 15 minutes an ended
 * registration stays revivable, a laptop that sleeps through a meeting or a lunch break, and twice
 * the default task timeout (30 min); it bounds how long a flood's mail holds budgets when its
 * target never receives. An ended registration that still holds mail is reaped when its mail has
 * expired, at the latest this long after it ended.
 */
export const relayMailLifetimeMs = 60 * 60_000;
/**
 * Under contention (the registration budget spent), a connect that needs a new registration
 * reclaims one that makes no use of its place, in this order: an ended one that holds no mail; one
 * that never made a bound request within `relayRegistrationGraceMs` of being made (what a process
 * registering names makes); a live one that made no bound request for this long — a Pi polls every
 * 5 s or watches 20 s at a time, so a minute without any request is no working Pi; last an ended
 * one that holds mail (which then expires).
 */
export const relayRegistrationIdleMs = defaultLeaseMs;
/**
 * How long a new registration has for its first bound request before it counts as unused: a client
 * sends one as soon as its connect is answered, within one request deadline.
 */
export const relayRegistrationGraceMs = maxRequestDeadlineMs;
/** A registration's last bound request is recorded at most this often (a shared store writes no more than that). */
export const relayActivityResolutionMs = relayMaintenanceIntervalMs;

// ---------------------------------------------------------------------------------------------
// Traces (OpenTelemetry, only when its environment asks for them: docs/operations.md, "Traces")
// ---------------------------------------------------------------------------------------------

/** Ended task spans waiting for export; past this many, new ones are dropped (one span per task). */
export const maxTraceQueuedSpans = 2048;
/** Most spans in one OTLP export request. */
export const maxTraceExportBatchSpans = 512;
/** How long ended spans wait to be batched into one export (a session's end exports at once). */
export const traceExportDelayMs = 5_000;
/** Deadline of one OTLP export request, its retries included. */
export const traceExportTimeoutMs = 2_000;
/** How long a session's end waits for its last spans to be exported (one export's deadline). */
export const traceShutdownMs = traceExportTimeoutMs;
/** Most events one task's span records (the first ones; the SDK counts the rest as dropped). */
export const maxTraceEventsPerSpan = 128;
