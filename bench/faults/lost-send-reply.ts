/**
 * Fault: the reply to a send is lost. The proxy forwards each of the first three sends, then sends
 * half of the relay's reply and resets the connection (`drop-reply`): the relay accepted the
 * envelope, the client saw `RELAY_UNAVAILABLE`.
 *
 * Proves that a send whose outcome is unknown is retried safely: the retry carries the identical
 * envelope, the relay answers `duplicate:true`, and the receiver is shown it once.
 */
import { ruleFault } from "./shared/scenario.ts";

export const lostSendReply = ruleFault(
  "lost send reply",
  "the proxy forwards a send, then sends half of the relay's reply and resets the connection (`drop-reply`) — the first 3 sends; the relay accepted each, the client saw `RELAY_UNAVAILABLE`; retries resend the identical envelope and the relay answers `duplicate:true`.",
  () => [{ operation: "send", kind: "drop-reply", times: 3 }],
);
