/**
 * The presentation oracle: which task events each side's model must be shown, derived from who
 * authored them — never from the core's own visibility rule (src/core/intake.ts, presentation.ts),
 * which it checks.
 *
 * It uses only facts the test observes: the intents each party sent on the wire (sender endpoint
 * and intent id, from its transport or relay, opened as the parties open sealed mail), the origin's canonical log (which events exist),
 * and the event-type table `TASK_EVENT_TYPES` as data (whether a type is for a model at all).
 *
 * Authorship:
 * - an event recording an intent a party sent is that party's (its `message`, `done`);
 * - `task.timed_out` is no party's call: the origin's clock decided it (the test moves the clock);
 * - every other event is the origin's own (`createTask`, `message`, `cancel`, `acknowledge`).
 * A model-visible event must be shown exactly once to each side that did not author it — both
 * sides for the clock's — and never to the target that authored it (its copy is an echo).
 * One archived type is shown too: a worker's result that arrived after the clock timed the task
 * out (`task.late_terminal` of a worker's intent) is for the origin's model — it settles the outcome.
 */
import { requestEnvelopes } from "../../src/protocol/wire.ts";
import { TASK_EVENT_TYPES } from "../../src/protocol/events.ts";
import type { TaskEndpoint, TaskEvent } from "../../src/protocol/schemas.ts";
import type { ObservedReply } from "../../testkit/observing-fetch.ts";
import { clearEnvelope } from "../../testkit/sealed.ts";

/** Event types no party's call creates: the origin's clock decides them, and both models are told. */
const CLOCK_TYPES: ReadonlySet<string> = new Set(["task.timed_out"]);

/** Who sent which intent, as seen on the wire. */
export interface IntentAuthors {
  /** Notes an envelope a party sent (every attempt; only intents name an author). */
  sent(envelope: unknown): void;
  /** The endpoint id that sent this intent, or undefined when nobody was seen sending it. */
  authorOf(intentId: string): string | undefined;
}

export function intentAuthors(): IntentAuthors {
  const authors = new Map<string, string>();
  return {
    sent(wire) {
      // Sealed mail is read as its parties read it (every party of a test shares one identity by default).
      const envelope = typeof wire === "object" && wire !== null && "payload" in wire ? clearEnvelope(wire) : wire;
      const sent = envelope as { source?: { id?: unknown }; payload?: { kind?: unknown; payload?: { intentId?: unknown } } } | undefined;
      const intentId = sent?.payload?.payload?.intentId;
      const source = sent?.source?.id;
      if (sent?.payload?.kind === "intent" && typeof intentId === "string" && typeof source === "string") authors.set(intentId, source);
    },
    authorOf: (intentId) => authors.get(intentId),
  };
}

/** The intents parties sent, from the send requests their transports recorded (answered or not). */
export function authorsFromReplies(parties: readonly { readonly replies: readonly ObservedReply[] }[]): IntentAuthors {
  const authors = intentAuthors();
  for (const party of parties)
    for (const entry of party.replies)
      if (entry.operation === "send") for (const envelope of requestEnvelopes(entry.request)) authors.sent(envelope);
  return authors;
}

/** Which sides of a task must be shown an event of the origin's log. */
export interface Audience {
  readonly origin: boolean;
  readonly target: boolean;
}

const NOBODY: Audience = { origin: false, target: false };

/** A worker's result recorded after the task's first terminal event, which was the clock's timeout. */
function lateAfterTimeout(event: TaskEvent, events: readonly TaskEvent[]): boolean {
  if (event.type !== "task.late_terminal" || typeof (event.payload as { intentId?: unknown }).intentId !== "string") return false;
  const first = events.find((candidate) => TASK_EVENT_TYPES[candidate.type].terminalStatus !== null);
  return first !== undefined && CLOCK_TYPES.has(first.type);
}

/**
 * The audience of one event of a task whose origin and target are given. Throws when the event
 * records an intent nobody was seen sending (the test's observation has a hole).
 */
export function audienceOf(
  event: TaskEvent,
  task: { readonly origin: TaskEndpoint; readonly target: TaskEndpoint; readonly events?: readonly TaskEvent[] },
  authors: IntentAuthors,
): Audience {
  if (lateAfterTimeout(event, task.events ?? [])) return { origin: true, target: false };
  if (!TASK_EVENT_TYPES[event.type].modelVisible) return NOBODY;
  if (CLOCK_TYPES.has(event.type)) return { origin: true, target: true };
  const intentId = (event.payload as { intentId?: unknown }).intentId;
  let author = task.origin.id;
  if (typeof intentId === "string") {
    const sender = authors.authorOf(intentId);
    if (sender === undefined) throw new Error(`${event.type} ${event.eventId} records intent ${intentId}, which no party was seen sending`);
    author = sender;
  }
  return { origin: author !== task.origin.id, target: author !== task.target.id };
}

/** What each side of the tasks must and must not have been shown (event ids). */
export interface Expected {
  readonly atOrigin: string[];
  readonly atTarget: string[];
  /** Events for no model (archived everywhere). */
  readonly neverAtOrigin: string[];
  /** Events for no model, and echoes of what the target authored itself. */
  readonly neverAtTarget: string[];
}

/** The expectations for the given tasks of one origin (their events as the origin holds them). */
export function expectedPresentations(
  tasks: Iterable<{ readonly origin: TaskEndpoint; readonly target: TaskEndpoint; readonly events: readonly TaskEvent[] }>,
  authors: IntentAuthors,
): Expected {
  const expected: Expected = { atOrigin: [], atTarget: [], neverAtOrigin: [], neverAtTarget: [] };
  for (const task of tasks) {
    for (const event of task.events) {
      const audience = audienceOf(event, task, authors);
      if (audience.origin) expected.atOrigin.push(event.eventId);
      else if (!TASK_EVENT_TYPES[event.type].modelVisible) expected.neverAtOrigin.push(event.eventId);
      (audience.target ? expected.atTarget : expected.neverAtTarget).push(event.eventId);
    }
  }
  return expected;
}
