/**
 * Fault: the reply to an acknowledge is lost. `drop-reply` on the first three acknowledges of the
 * worker and the origin: the relay removed the envelope, the client saw a failure.
 *
 * Proves that an ACK is repaired, not repeated into the model: the next pass acknowledges again
 * (`duplicate:true`) and nothing is presented twice.
 */
import { ruleFault } from "./shared/scenario.ts";

export const lostAckReply = ruleFault(
  "lost ACK reply",
  "`drop-reply` on the worker's and origin's first 3 acknowledges: the relay removed the envelope, the client saw a failure; the next pass repairs the ACK (`duplicate:true`).",
  () => [{ operation: "acknowledge", kind: "drop-reply", times: 3 }],
);
