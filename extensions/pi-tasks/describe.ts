/**
 * A task's state in plain words, from this session's side, for people (the `/tasks` board and the
 * footer) and for the model (`agent_task_status`). Derived from the task view only.
 */
import { awaitedAnswers, openQuestions } from "../../src/core/attention.ts";
import type { TaskView } from "../../src/core/task-core.ts";
import type { Signer } from "../../src/core/trust.ts";
import type { DeferralCause } from "../../src/protocol/errors.ts";
import { latestAssignment } from "../../src/protocol/events.ts";
import { maxActivitySummaryChars, msPerSecond } from "../../src/protocol/limits.ts";
import type { WorkerActivity } from "../../src/core/bookkeeping.ts";
import { inlineText, oneLine } from "./quote.ts";

function acknowledged(task: TaskView): boolean {
  return task.events.some((event) => event.type === "task.parent_acknowledged");
}

/** The current assignment was refused by a key this origin does not trust (the task stays active). */
function refusedUnverified(task: TaskView): boolean {
  const assignment = latestAssignment(task.events);
  return task.events.some(
    (event) => event.type === "task.refused" && event.payload.eventId === assignment?.eventId && event.payload.verified !== true,
  );
}

/** A result this session assigned that waits for its acknowledgement (done, failed, or finished after its timeout). */
export function awaitsAcknowledgement(task: TaskView): boolean {
  if (task.role !== "origin" || acknowledged(task)) return false;
  return task.status === "completed" || task.status === "failed" || (task.status === "timed_out" && task.outcome !== "unknown");
}

function originWords(task: TaskView): string {
  const evidence = task.deliveryEvidence;
  if (task.attention === "orphaned") return "orphaned — its worker is gone: reassign or cancel it";
  switch (task.status) {
    case "completed":
      return acknowledged(task) ? "done, acknowledged" : "done — verify and acknowledge";
    case "failed":
      return acknowledged(task) ? "failed, acknowledged" : "failed — review and acknowledge";
    case "cancelled":
      return acknowledged(task) ? "cancelled, acknowledged" : "cancelled";
    case "timed_out":
      if (task.outcome !== "unknown")
        return `finished after its timeout (${task.outcome})${acknowledged(task) ? ", acknowledged" : " — verify and acknowledge"}`;
      return acknowledged(task) ? "timed out, acknowledged" : "timed out — the worker's outcome is unknown";
  }
  if (task.attention === "indeterminate") return "reconnecting with the worker after a relay restart";
  if (openQuestions(task).length > 0) return "question waiting for you";
  if (awaitedAnswers(task).length > 0) return "waiting for the worker's answer";
  if (refusedUnverified(task)) return "refused by the worker (unverified: it does not trust your identity) — pair, or cancel";
  if (evidence.relayAcceptance === "blocked") return "could not be delivered to the worker";
  if (evidence.relayAcceptance === "pending") return "sending to the worker";
  if (task.activity !== undefined) return `worker ${activityState(task.activity)}`;
  if (evidence.piInsertion === "confirmed") return "worker is working on it";
  if (evidence.piInsertion === "blocked") return "waiting for the worker's Pi to take it";
  return evidence.receiverReceipt === "confirmed" ? "worker received it" : "waiting for the worker";
}

function workerWords(task: TaskView): string {
  const delivery = task.terminalDelivery;
  if (task.status === "active" && task.attention === "indeterminate") return "reconnecting with the origin after a relay restart";
  if (task.status === "active") {
    if (delivery.state === "delivery_blocked") return `result could not be delivered (${delivery.error.code})`;
    if (delivery.state === "pending") return "sending the result";
    if (delivery.state === "accepted") return "result delivered — waiting for the origin";
    if (openQuestions(task).length > 0) return "question waiting for you";
    if (awaitedAnswers(task).length > 0) return "waiting for the origin's answer";
    return "working on it";
  }
  if (acknowledged(task)) return `${task.status.replace("_", " ")}, acknowledged by the origin`;
  if (delivery.state === "delivery_blocked")
    return `${task.status.replace("_", " ")}; the result could not be delivered (${delivery.error.code})`;
  return `${task.status.replace("_", " ")} — waiting for the origin to acknowledge`;
}

/** The task's state in plain words from this side. */
export function taskWords(task: TaskView): string {
  return task.role === "origin" ? originWords(task) : workerWords(task);
}

/** Characters of a task's title where a list shows it (the board, the quit notice). */
export const TASK_TITLE_CHARS = 48;

/**
 * The first line of the task text, quoted and escaped (quote.ts `inlineText`): what the board shows
 * as its title. The origin wrote it, so it is shown as a string of its, never as words of ours.
 */
export function taskTitle(task: TaskView, maxChars: number): string {
  const assignment = latestAssignment(task.events);
  const text = (typeof assignment?.payload.task === "string" ? assignment.payload.task : task.task).split("\n")[0]!.trim();
  return inlineText(text, maxChars);
}

/** Who signed the other side's mail, short: `alice ✓`, `own identity ✓`, `unverified`, `key 3f2a:… (unpaired)`. */
export function signerShort(signer: Signer | undefined): string {
  if (signer === undefined) return "no key yet";
  if (!signer.verified) return "UNVERIFIED";
  if (signer.self) return "own identity ✓";
  if (signer.peerName !== undefined) return `${signer.peerName} ✓`;
  return `key ${signer.fingerprint} (unpaired)`;
}

/** A duration for people: `12s`, `4m`, `2h`. */
export function age(ms: number): string {
  const seconds = Math.max(0, Math.round(ms / msPerSecond));
  if (seconds < 60) return `${seconds}s`;
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `${minutes}m`;
  return `${Math.round(minutes / 60)}h`;
}

/** What a worker's model is doing, as it reported it: `running bash "ls -la"`, `idle`, `waiting for an answer`. */
export function activityState(activity: WorkerActivity): string {
  switch (activity.state) {
    case "running":
      if (activity.tool === undefined) return "running (thinking)";
      return `running ${oneLine(activity.tool)}${activity.summary === undefined ? "" : ` ${inlineText(activity.summary, maxActivitySummaryChars)}`}`;
    case "idle":
      return "idle";
    case "waiting":
      return "waiting for an answer";
    case "stuck":
      return "stuck (no tool call, message or turn for a while)";
  }
}

function spentWords({ turns, tokens, cost }: { turns: number; tokens: number; cost?: number }): string[] {
  const parts = [`${turns} turn${turns === 1 ? "" : "s"}`, `${tokens.toLocaleString("en-US")} tokens`];
  if (cost !== undefined) parts.push(`$${cost.toFixed(2)}`);
  return parts;
}

/**
 * What the worker's model used so far: `3 turns · 12,345 tokens · $0.02`; with the sub-tasks it
 * delegated, the chain's total after it: `… · chain of 3 workers: 9 turns · 40,000 tokens · $0.10`.
 */
export function usageWords(activity: WorkerActivity): string {
  const { chain } = activity.usage;
  const own = spentWords(activity.usage).join(" · ");
  return chain === undefined ? own : `${own} · chain of ${chain.workers} workers: ${spentWords(chain).join(" · ")}`;
}

/** One line of a worker's activity with its ages: state (for how long), usage, when last heard. */
export function activityLine(activity: WorkerActivity, now: number): string {
  return `${activityState(activity)} for ${age(now - activity.since)} · ${usageWords(activity)} · heard ${age(now - activity.heardAt)} ago`;
}

/**
 * What a delivery waits for (`TASK_DELIVERY_DEFERRED`'s cause, src/protocol/errors.ts; `none`: it
 * names none), in the few words of a board line and whole, as a person and a model read it: a
 * healthy wait says so and when it ends; only a fault names a fix. One row per cause.
 */
const WAIT_WORDS: Readonly<Record<DeferralCause | "none", { brief(peer: string): string; whole(peer: string): string }>> = {
  proof: {
    brief: (peer) => `for ${peer} to prove its key`,
    whole: (peer) => `waiting for ${peer} to prove its key at its endpoint (it was asked; it leaves as soon as ${peer} answers)`,
  },
  reconnect: {
    brief: (peer) => `to find ${peer} again`,
    whole: (peer) => `waiting to find ${peer} again after a relay restart (it leaves once ${peer} is found)`,
  },
  order: { brief: () => "behind older mail", whole: (peer) => `behind older mail to ${peer}, which goes first` },
  capacity: { brief: () => "the relay is at capacity", whole: () => "the relay is at capacity; retried after a short cooldown" },
  outage: {
    brief: () => "the relay did not answer",
    whole: () => "the relay did not answer moments ago; sent with the first pass that reaches it",
  },
  hold: {
    brief: () => "the relay refused the configuration",
    whole: () => "the relay refused this session's configuration; sending waits (see /tasks)",
  },
  rebind: {
    brief: () => "re-sent from a new endpoint",
    whole: () => "this session got a new endpoint while it waited; sent again from it",
  },
  budget: { brief: () => "for the next pass", whole: () => "queued; the next pass sends it" },
  none: { brief: () => "for the next pass", whole: () => "queued; sent by itself when the relay takes it" },
};

/** What a delivery waits for, in the few words of a board line (`waitWords` says it whole). */
export function waitBrief(cause: DeferralCause | undefined, peer = "the other side"): string {
  return WAIT_WORDS[cause ?? "none"].brief(peer);
}

/** What a delivery waits for, whole (the words `/tasks answer`, the tools and `/tasks <id>` show). */
export function waitWords(cause: DeferralCause | undefined, peer = "the other side"): string {
  return WAIT_WORDS[cause ?? "none"].whole(peer);
}
