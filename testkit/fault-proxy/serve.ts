/**
 * The fault proxy's request handler: it reads a request that arrives, takes the first rule that
 * matches it, logs it, and answers — forwarded to the relay and its reply passed back, or with the
 * rule's fault — noting a client that leaves before its answer.
 */
import { applyFault, type Exchange } from "./faults.ts";
import type { Observation } from "./observation.ts";
import type { Parking } from "./parking.ts";
import { readRequest } from "./requests.ts";
import { jsonResponse } from "./responses.ts";
import type { RuleBook } from "./rules.ts";
import type { FaultRule, ProxyRequest } from "./types.ts";
import { forwardTo, relayed } from "./upstream.ts";

/** The parts of one proxy the handler works with. */
export interface ProxyParts {
  /** The relay origin requests are forwarded to. */
  readonly target: string;
  readonly rules: RuleBook;
  readonly observed: Observation;
  readonly parking: Parking;
}

function exchangeOf(parts: ProxyParts, incoming: Request, request: ProxyRequest): Exchange {
  const { target, observed, parking } = parts;
  return {
    incoming,
    request,
    parking,
    forward: () => {
      observed.counter(request.operation).forwarded += 1;
      return forwardTo(target, request, incoming);
    },
  };
}

async function handle(parts: ProxyParts, incoming: Request, rule: FaultRule | undefined, request: ProxyRequest): Promise<Response> {
  const exchange = exchangeOf(parts, incoming, request);
  const { observed } = parts;
  if (rule === undefined) return relayed(await exchange.forward());
  observed.counter(request.operation).faulted += 1;
  return applyFault(rule, exchange);
}

async function serve(parts: ProxyParts, incoming: Request): Promise<Response> {
  const { rules, observed, parking } = parts;
  observed.enter();
  try {
    const draft = await readRequest(incoming, observed.nextSeq);
    const rule = parking.stopping() ? undefined : rules.take(draft);
    const request: ProxyRequest = { ...draft, fault: rule?.kind };
    observed.record(request);
    if (parking.stopping()) return jsonResponse(503, { error: "fault proxy stopping" });
    let answered = false;
    incoming.signal.addEventListener("abort", () => {
      if (!answered) observed.clientGone(request.seq);
    });
    try {
      return await handle(parts, incoming, rule, request);
    } finally {
      answered = true;
    }
  } catch (error) {
    return jsonResponse(502, { error: `fault proxy: ${error instanceof Error ? error.message : String(error)}` });
  } finally {
    observed.leave();
  }
}

/** The `fetch` handler of the proxy's server. */
export function createHandler(parts: ProxyParts): (incoming: Request) => Promise<Response> {
  return (incoming) => serve(parts, incoming);
}
