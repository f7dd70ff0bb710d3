/**
 * Fault: receive replies over the response cap. The worker's first three receive replies are
 * padded past the response body cap: with a Content-Length, chunked without one, and one byte over.
 *
 * Proves that the client bounds what it reads in every framing (refusing the reply rather than
 * buffering it) and that the refused pages' mail is fetched again and shown once.
 */
import { maxResponseBodyBytes } from "../../src/protocol/limits.ts";
import { fromEndpoint, ruleFault } from "./shared/scenario.ts";

export const oversizedReply = ruleFault(
  "oversized reply",
  `the worker's first 3 receive replies are padded past the ${maxResponseBodyBytes / 1024} KiB response cap (with Content-Length, chunked, and 1 byte over).`,
  (rig) => {
    const when = fromEndpoint(rig.worker.core().endpoint()!);
    return [
      { operation: "receive", kind: "oversized", when },
      { operation: "receive", kind: "oversized", chunked: true, when },
      { operation: "receive", kind: "oversized", bytes: maxResponseBodyBytes + 1, when },
    ];
  },
);
