/**
 * Fault: a burst of Wolfpack's generic rate-limit replies. The next eight sends, receives and
 * acknowledges are answered 429 `{"error":"rate limit exceeded"}` without a `profile` (not a
 * relay body), as Wolfpack's request bucket answers.
 *
 * Proves that a rate limit outside the relay profile is a transient failure: the client backs off
 * (its capacity cooldowns pass on jump timers) and retries, and nothing is lost or shown twice.
 */
import { ruleFault } from "./shared/scenario.ts";

export const rateLimitBurst = ruleFault(
  "429 burst without profile",
  'Wolfpack\'s generic rate-limit reply (429 `{"error":"rate limit exceeded"}`, no `profile`) to the next 8 sends, receives and acknowledges; capacity cooldowns pass on jump timers.',
  () => [{ operation: ["send", "receive", "acknowledge"], kind: "status-429", times: 8 }],
);
