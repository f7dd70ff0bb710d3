/**
 * A programmable HTTP fault proxy in front of a relay, for client fault tests and benchmarks.
 *
 * It listens on `127.0.0.1` (port 0 = a free port) and forwards every request to `target`
 * unchanged, except for requests matched by a rule, which get the rule's fault instead:
 *
 * ```ts
 * const proxy = createFaultProxy({ target: relay.url });
 * proxy.push({ operation: "send", kind: "drop-reply" });              // next send: forwarded, reply lost
 * proxy.push({ operation: "*", kind: "status-429", times: 10 });        // next 10 requests: Wolfpack 429
 * proxy.push({ operation: ["receive"], kind: "hold", times: Infinity }); // park until release()
 * const session = createVolatileTaskSession({ url: proxy.url, callerSession: "x" });
 * …
 * proxy.stats().operations.send; // { seen, forwarded, faulted }
 * await proxy.stop();
 * ```
 *
 * **Matching.** A request's operation is the `operation` field of its JSON body on the relay POST
 * route; `GET /api/task-relay/profile` is `"profile"`, `GET /api/session-control/status` is
 * `"session-status"`, anything else `"other"`. Rules are tried in push order; the first rule whose
 * `operation` matches (a name, a list of names, or `"*"`), whose optional `when` predicate accepts
 * the request and which has uses left (`times`, default 1; `Infinity` for always) is consumed.
 *
 * **Faults** (`kind`):
 * - `drop-reply`: forward (the operation takes effect), then send the relay's status and half of
 *   its body and reset the connection, so the client sees a network error mid-reply.
 * - `status-429`: answer 429 `{"error":"rate limit exceeded"}` (Wolfpack's generic bucket reply,
 *   no `profile`) without forwarding; `retryAfter` sets a `Retry-After` header, `body` replaces it.
 * - `capacity`: answer `{ok:false, profile:"volatile-v1", epoch?, error:{code:"RELAY_CAPACITY",
 *   message, retryable:true, retryAfterMs?}}` (503 unless `status` is given) without forwarding.
 * - `delay`: wait `ms`, then forward (even if the client gave up meanwhile, as a slow network would).
 * - `hang`: never answer; the request ends when the client disconnects or the proxy stops.
 * - `hold`: park the request until `release()` (or a client disconnect), then forward it.
 * - `slow-body`: forward, send the reply's headers and first half at once, the rest after `ms`
 *   (a deadline must cover the body, not just the headers).
 * - `malformed-json`: 200 (or `status`) with a body that is not JSON (`text`, default a truncated
 *   success object).
 * - `wrong-profile`: a JSON success body whose `profile` is another profile.
 * - `oversized`: forward, then pad the relay's real JSON reply with a `padding` member to exactly
 *   `bytes` (default `maxResponseBodyBytes` + 1 KiB), so only its size is wrong; sent with a
 *   `Content-Length` header, or `chunked: true` streamed without one.
 * - `rewrite`: forward, then replace the parsed JSON reply with `rewrite(body, context)` (mutate
 *   and return it, or return a new value; a returned string is sent as raw text). `status`
 *   overrides the upstream status.
 * - `reply`: answer `status` with `body` (JSON, or raw text if a string) and `headers`, without
 *   forwarding: typed relay errors, 401s, epochless errors, anything hand-made.
 *
 * **Observation.** `stats()` counts per operation the requests `seen`, `forwarded` to the relay
 * and `faulted`, plus requests currently in flight through the proxy and the maximum ever in
 * flight at once (from request arrival until the proxy's handler returns its response).
 * `requests()` is the arrival log with parsed bodies and headers (to check order or tokens), each
 * with `clientGoneAt` when its client disconnected before the proxy answered (e.g. a process that
 * exited with its long poll open).
 *
 * **Layout.** This file makes the proxy from its parts in `testkit/fault-proxy/`: the types
 * (`types.ts`, re-exported here), the rule book (`rules.ts`), the observation behind `stats()`
 * and `requests()` (`observation.ts`), the parked `hold`/`hang` requests (`parking.ts`), the
 * request handler (`serve.ts`) with how it reads a request (`requests.ts`) and forwards it
 * (`upstream.ts`), and the faults as a table of handlers (`faults.ts`) over the made-up
 * responses (`responses.ts`).
 */
import type { Server } from "bun";
import { eventually } from "./async.ts";
import { createObservation } from "./fault-proxy/observation.ts";
import { createParking } from "./fault-proxy/parking.ts";
import { createRuleBook } from "./fault-proxy/rules.ts";
import { createHandler } from "./fault-proxy/serve.ts";
import type { FaultProxy, FaultProxyOptions } from "./fault-proxy/types.ts";

export type {
  Fault,
  FaultKind,
  FaultProxy,
  FaultProxyOptions,
  FaultRule,
  OperationStats,
  ProxyOperation,
  ProxyRequest,
  ProxyStats,
  RewriteContext,
  RuleHandle,
} from "./fault-proxy/types.ts";

const WAIT_POLL_MS = 5;
const DEFAULT_WAIT_MS = 5_000;

export function createFaultProxy(options: FaultProxyOptions): FaultProxy {
  const target = options.target.replace(/\/+$/, "");
  const rules = createRuleBook();
  const observed = createObservation();
  const parking = createParking();

  const server: Server<undefined> = Bun.serve({
    hostname: "127.0.0.1",
    port: options.port ?? 0,
    // Held and hanging requests may outlive Bun's default 10 s idle timeout.
    idleTimeout: 0,
    fetch: createHandler({ target, rules, observed, parking }),
  });
  const port = server.port ?? 0;
  const snapshot = () => observed.snapshot(parking.held());

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    push: (rule) => rules.push(rule),
    clear: () => rules.clear(),
    stats: snapshot,
    resetStats: () => observed.reset(),
    requests: () => observed.requests(),
    release: (count = Number.POSITIVE_INFINITY) => parking.release(count),
    async waitFor(predicate, timeoutMs = DEFAULT_WAIT_MS) {
      if (!(await eventually(() => predicate(snapshot()), timeoutMs, WAIT_POLL_MS))) {
        throw new Error(`fault proxy: condition not met within ${timeoutMs} ms: ${JSON.stringify(snapshot())}`);
      }
    },
    async stop() {
      if (parking.stopping()) return;
      parking.stop();
      rules.clear();
      await server.stop(true);
    },
  };
}
