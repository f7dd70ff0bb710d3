/**
 * The fault proxy's vocabulary (testkit/fault-proxy.ts describes the proxy and each fault): the
 * requests it logs, the faults and the rules that apply them, its statistics, and the proxy's own
 * interface. Re-exported by testkit/fault-proxy.ts, which tests import.
 */

export type ProxyOperation = string;

export interface ProxyRequest {
  /** 1-based arrival number. */
  readonly seq: number;
  readonly operation: ProxyOperation;
  readonly method: string;
  /** Path and query as received. */
  readonly path: string;
  /** The parsed JSON body (POST), or undefined. */
  readonly body: unknown;
  /** The raw body text ("" for GET). */
  readonly text: string;
  readonly headers: Readonly<Record<string, string>>;
  /** The fault applied, or undefined when passed through. */
  readonly fault: FaultKind | undefined;
  readonly receivedAt: number;
  /** `Date.now()` when the client disconnected before the proxy answered it; undefined otherwise. */
  readonly clientGoneAt?: number;
}

export interface RewriteContext {
  readonly status: number;
  readonly operation: ProxyOperation;
  readonly request: ProxyRequest;
  readonly headers: Headers;
}

export type Fault =
  | { readonly kind: "drop-reply" }
  | { readonly kind: "status-429"; readonly retryAfter?: string; readonly body?: unknown }
  | {
      readonly kind: "capacity";
      readonly retryAfterMs?: number;
      readonly epoch?: string;
      readonly message?: string;
      readonly status?: number;
    }
  | { readonly kind: "delay"; readonly ms: number }
  | { readonly kind: "hang" }
  | { readonly kind: "hold" }
  | { readonly kind: "slow-body"; readonly ms: number }
  | { readonly kind: "malformed-json"; readonly text?: string; readonly status?: number }
  | { readonly kind: "wrong-profile"; readonly profile?: string }
  | { readonly kind: "oversized"; readonly chunked?: boolean; readonly bytes?: number }
  | { readonly kind: "rewrite"; readonly rewrite: (body: any, context: RewriteContext) => unknown; readonly status?: number }
  | { readonly kind: "reply"; readonly status: number; readonly body: unknown; readonly headers?: Readonly<Record<string, string>> };

export type FaultKind = Fault["kind"];

export type FaultRule = Fault & {
  /** Operation name(s) to match, or `"*"` for every request. */
  readonly operation: ProxyOperation | readonly ProxyOperation[];
  /** How many matching requests this rule faults (default 1; `Infinity` = until cleared). */
  readonly times?: number;
  /** Extra predicate on the request (e.g. a body field). */
  readonly when?: (request: ProxyRequest) => boolean;
};

export interface RuleHandle {
  /** Requests this rule has faulted so far. */
  hits(): number;
  /** Uses left. */
  remaining(): number;
  /** Removes the rule (requests it already holds stay held until released). */
  cancel(): void;
}

export interface OperationStats {
  seen: number;
  forwarded: number;
  faulted: number;
}

export interface ProxyStats {
  readonly operations: Readonly<Record<ProxyOperation, Readonly<OperationStats>>>;
  readonly total: Readonly<OperationStats>;
  /** Requests whose proxy handler has not returned yet. */
  readonly inFlight: number;
  /** Highest `inFlight` since start (or the last `resetStats()`). */
  readonly maxInFlight: number;
  /** Requests parked by `hold` right now. */
  readonly held: number;
}

export interface FaultProxy {
  readonly url: string;
  readonly port: number;
  /** Adds a rule after the existing ones. */
  push(rule: FaultRule): RuleHandle;
  /** Removes every rule (held requests stay held until `release()` or `stop()`). */
  clear(): void;
  stats(): ProxyStats;
  /** Zeroes the counters and the log; `maxInFlight` restarts from the current `inFlight`. */
  resetStats(): void;
  requests(): readonly ProxyRequest[];
  /** Forwards the oldest `count` held requests (default: all); returns how many were released. */
  release(count?: number): number;
  /** Polls `predicate(stats)` every few ms until true; rejects after `timeoutMs` (default 5 s). */
  waitFor(predicate: (stats: ProxyStats) => boolean, timeoutMs?: number): Promise<void>;
  /** Ends held and hanging requests, stops listening and closes connections. */
  stop(): Promise<void>;
}

export interface FaultProxyOptions {
  /** Relay origin to forward to, e.g. `http://127.0.0.1:18790`. */
  readonly target: string;
  /** Listen port (default 0 = free port). */
  readonly port?: number;
}
