/**
 * A fetch wrapper that logs every relay request a client makes — including the ones that never
 * reach a server (connection refused) — with its operation, timing, outcome and, for `send` and
 * `acknowledge`, the envelope id. The bench counts requests and times ACKs with it.
 */
import { requestText } from "../../testkit/observing-fetch.ts";
import { now } from "./stats.ts";

export interface LoggedRequest {
  readonly operation: string;
  readonly envelopeId?: string;
  /** An `ack-batch-v1` acknowledge: every id it carries. */
  readonly envelopeIds?: readonly string[];
  readonly startedAt: number;
  /** Monotonic time the reply body was read (or the failure surfaced). */
  endedAt: number;
  /** HTTP status, or 0 when no reply arrived. */
  status: number;
  /** The relay reply said `ok:true`. */
  ok: boolean;
}

export interface RequestLog {
  readonly entries: LoggedRequest[];
  readonly fetch: typeof fetch;
  /** Requests started so far (optionally of one operation). */
  count(operation?: string): number;
  /** Requests started within [from, to) (monotonic ms). */
  countBetween(from: number, to: number): number;
  byOperation(from?: number, to?: number): Record<string, number>;
  /** Monotonic time the first successful `acknowledge` of this envelope returned. */
  ackedAt(envelopeId: string): number | undefined;
  /** Called after each successful acknowledge (envelope id, time). */
  onAck(listener: (envelopeId: string, at: number) => void): void;
}

function operationOf(
  input: string | URL | Request,
  text: string,
): { operation: string; envelopeId?: string; envelopeIds?: readonly string[] } {
  if (text.length > 0) {
    try {
      const body = JSON.parse(text) as {
        operation?: unknown;
        envelopeId?: unknown;
        envelopeIds?: unknown;
        envelope?: { envelopeId?: unknown };
      };
      const operation = typeof body.operation === "string" ? body.operation : "other";
      if (Array.isArray(body.envelopeIds))
        return { operation, envelopeIds: body.envelopeIds.filter((id): id is string => typeof id === "string") };
      const envelopeId =
        typeof body.envelopeId === "string"
          ? body.envelopeId
          : typeof body.envelope?.envelopeId === "string"
            ? body.envelope.envelopeId
            : undefined;
      return envelopeId === undefined ? { operation } : { operation, envelopeId };
    } catch {
      return { operation: "other" };
    }
  }
  const url = input instanceof Request ? input.url : String(input);
  if (url.includes("/profile")) return { operation: "profile" };
  if (url.includes("/session-control/")) return { operation: "session-control" };
  return { operation: "other" };
}

/**
 * The ids an answered `acknowledge` acknowledged: the one it named, or those of its batch whose
 * outcome is not `withheld` (`ack-carry-v1`: withheld when a carried receipt was not accepted).
 */
function acknowledgedIds(entry: LoggedRequest, reply: string): readonly string[] {
  if (entry.envelopeIds === undefined) return entry.envelopeId === undefined ? [] : [entry.envelopeId];
  if (!reply.includes('"withheld"')) return entry.envelopeIds;
  const results = (JSON.parse(reply) as { value?: { results?: { envelopeId: string; outcome: string }[] } }).value?.results ?? [];
  return results.filter((result) => result.outcome !== "withheld").map((result) => result.envelopeId);
}

/** The request of the log that acknowledged `envelopeId` first (see `ackedAt`). */
export function ackRequestOf(log: RequestLog, envelopeId: string): LoggedRequest | undefined {
  const at = log.ackedAt(envelopeId);
  return at === undefined
    ? undefined
    : log.entries.find(
        (entry) =>
          entry.operation === "acknowledge" &&
          entry.endedAt === at &&
          (entry.envelopeId === envelopeId || entry.envelopeIds?.includes(envelopeId) === true),
      );
}

export function createRequestLog(): RequestLog {
  const entries: LoggedRequest[] = [];
  const acked = new Map<string, number>();
  const listeners: ((envelopeId: string, at: number) => void)[] = [];
  const wrapped = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const startedAt = now();
    const text = await requestText(input, init);
    const entry: LoggedRequest = { ...operationOf(input, text), startedAt, endedAt: Number.NaN, status: 0, ok: false };
    entries.push(entry);
    let response: Response;
    try {
      response = await fetch(input, init);
    } catch (error) {
      entry.endedAt = now();
      throw error;
    }
    // Read the body here so the end time covers it, then hand the client an identical response.
    let reply: string;
    try {
      reply = await response.text();
    } catch (error) {
      entry.endedAt = now();
      throw error;
    }
    entry.endedAt = now();
    entry.status = response.status;
    entry.ok = response.status === 200 && reply.startsWith('{"ok":true');
    if (entry.ok && entry.operation === "acknowledge") {
      for (const envelopeId of acknowledgedIds(entry, reply)) {
        if (acked.has(envelopeId)) continue;
        acked.set(envelopeId, entry.endedAt);
        for (const listener of listeners) listener(envelopeId, entry.endedAt);
      }
    }
    return new Response(reply, { status: response.status, headers: response.headers });
  };
  return {
    entries,
    fetch: wrapped as typeof fetch,
    count: (operation) => (operation === undefined ? entries.length : entries.filter((entry) => entry.operation === operation).length),
    countBetween: (from, to) => entries.filter((entry) => entry.startedAt >= from && entry.startedAt < to).length,
    byOperation(from = Number.NEGATIVE_INFINITY, to = Number.POSITIVE_INFINITY) {
      const out: Record<string, number> = {};
      for (const entry of entries)
        if (entry.startedAt >= from && entry.startedAt < to) out[entry.operation] = (out[entry.operation] ?? 0) + 1;
      return out;
    },
    ackedAt: (envelopeId) => acked.get(envelopeId),
    onAck(listener) {
      listeners.push(listener);
    },
  };
}
