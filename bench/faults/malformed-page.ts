/**
 * Fault: malformed receive pages. The worker's receive replies are replaced: twice by a body that
 * is not JSON (a truncated success object), then by a page with an item repeated and by a page
 * with its cursors reversed.
 *
 * Proves that a page the client cannot trust is rejected whole (`INVALID_RESPONSE` /
 * `INVALID_INBOX`) without moving the checkpoint: the same mail is fetched again from the relay
 * and shown once.
 */
import { fromEndpoint, ruleFault } from "./shared/scenario.ts";

export const malformedPage = ruleFault(
  "malformed page",
  "the worker's receive replies are replaced: 2 × not JSON (a truncated success object), then 2 pages rewritten with an item repeated and with cursors reversed (`INVALID_RESPONSE` / `INVALID_INBOX`; the checkpoint must not move).",
  (rig) => {
    const when = fromEndpoint(rig.worker.core().endpoint()!);
    return [
      { operation: "receive", kind: "malformed-json", times: 2, when },
      {
        operation: "receive",
        kind: "rewrite",
        when,
        rewrite: (reply: { value: { deliveries: unknown[] } }) => (
          reply.value.deliveries.length > 0 && reply.value.deliveries.push(reply.value.deliveries[0]), reply
        ),
      },
      {
        operation: "receive",
        kind: "rewrite",
        when,
        rewrite: (reply: { value: { deliveries: unknown[] } }) => (reply.value.deliveries.reverse(), reply),
      },
    ];
  },
);
