/**
 * Seeing a relay client's traffic from its side: a fetch that records each request with the reply
 * the client got (unaltered), and the request body text both this and the bench's request log read.
 */

export interface ObservedReply {
  readonly operation: string;
  /** The parsed request body. */
  readonly request: Record<string, unknown>;
  /** The parsed reply body, or undefined when the reply never arrived complete. */
  readonly reply: Record<string, unknown> | undefined;
  readonly status: number | undefined;
  readonly at: number;
  /** Process-wide order of request starts and reply ends (to order requests of several parties). */
  readonly startSeq: number;
  readonly endSeq: number;
}

/** The body text of a fetch call (a string body, or a POST `Request`'s body), else "". */
export async function requestText(input: string | URL | Request, init: RequestInit | undefined): Promise<string> {
  if (typeof init?.body === "string") return init.body;
  if (input instanceof Request && input.method === "POST") return await input.clone().text();
  return "";
}

function parsed(text: string): Record<string, unknown> | undefined {
  try {
    return JSON.parse(text) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

let observedSeq = 0;

/** A fetch that records each request with the reply the client got (the reply is not altered). */
export function observingFetch(log: ObservedReply[]): typeof fetch {
  const wrapped = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const text = await requestText(input, init);
    const request = (text === "" ? undefined : parsed(text)) ?? {};
    const operation = typeof request.operation === "string" ? request.operation : "other";
    const startSeq = ++observedSeq;
    let response: Response;
    try {
      response = await fetch(input, init);
    } catch (error) {
      log.push({ operation, request, reply: undefined, status: undefined, at: Date.now(), startSeq, endSeq: ++observedSeq });
      throw error;
    }
    const reply = await response
      .clone()
      .text()
      .then(parsed, () => undefined);
    log.push({ operation, request, reply, status: response.status, at: Date.now(), startSeq, endSeq: ++observedSeq });
    return response;
  };
  return wrapped as typeof fetch;
}
