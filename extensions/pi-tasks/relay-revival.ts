/**
 * The embedded relay, started again when it went away. After a pass that could not reach the relay
 * (`RELAY_UNAVAILABLE`), this Pi looks at the relay's port (`reviveRelay` of
 * src/host/embedded-relay.ts) — at most once per `relayReviveIntervalMs`, one look at a time:
 *
 * - the person stopped it (`/tasks relay stop` in any Pi): nothing is started, and `problem()` is
 *   `RELAY_STOPPED` — the footer says so, with `/tasks relay start`, instead of "unreachable";
 * - it went away otherwise (a crash, a kill): the first Pi to look starts it under the start lock,
 *   the others find it answering; the Pi that started it says so once;
 * - a relay the person named (`PI_TASKS_RELAY_URL`) is never started: its outage is just that.
 *
 * Once the relay answers again, the core meets its new epoch and recovers as after any relay
 * restart (its mail is sent again).
 */
import { type RelayRevival, reviveRelay } from "../../src/host/embedded-relay.ts";
import { TaskError } from "../../src/protocol/errors.ts";
import { relayReviveIntervalMs } from "../../src/protocol/limits.ts";
import type { Env, RelayConfig } from "../../src/relay-client/config.ts";

export interface RelayRevivalWatch {
  /** A pass could not reach the relay: look at its port, unless a look is under way or was made lately. */
  unreachable(): void;
  /** `RELAY_STOPPED` while the last look found the person's stop, else undefined. */
  problem(): TaskError | undefined;
  /** A pass reached the relay: whatever a look found before is over. */
  reached(): void;
}

export interface RelayRevivalOptions {
  readonly env: Env;
  /**
   * How the run chose its relay, from the environment at its start: a look follows the same rules
   * (a relay the person named is never started, whatever the environment says later).
   */
  readonly config: RelayConfig;
  /** The relay this Pi uses. */
  readonly url: string;
  readonly now: () => number;
  /** This Pi started the relay again (say so; ask for a pass). */
  readonly onStarted: (url: string) => void;
  /** The look (tests). */
  readonly revive?: typeof reviveRelay;
}

/** When the person stopped the relay, in their words (a local time of day). */
function stoppedProblem(found: Extract<RelayRevival, { kind: "stopped" }>): TaskError {
  const at = new Date(found.mark.at);
  const when = Number.isNaN(at.getTime()) ? found.mark.at : at.toLocaleTimeString();
  return new TaskError("RELAY_STOPPED", {
    message: `relay on port ${found.port} stopped by you (/tasks relay stop at ${when})`,
    details: { port: found.port, at: found.mark.at, by: found.mark.by },
  });
}

export function createRelayRevival(options: RelayRevivalOptions): RelayRevivalWatch {
  const revive = options.revive ?? reviveRelay;
  let looking = false;
  let lastLookAt: number | undefined;
  let stopped: TaskError | undefined;

  async function look(): Promise<void> {
    const found = await revive({ env: options.env, config: options.config, url: options.url });
    stopped = found.kind === "stopped" ? stoppedProblem(found) : undefined;
    if (found.kind === "looked" && found.relay.state === "started" && found.relay.url === options.url) options.onStarted(found.relay.url);
  }

  return {
    unreachable() {
      const now = options.now();
      if (looking || (lastLookAt !== undefined && now - lastLookAt < relayReviveIntervalMs)) return;
      looking = true;
      lastLookAt = now;
      // A look that fails leaves things as they were; the next outage pass looks again.
      void look()
        .catch(() => undefined)
        .finally(() => {
          looking = false;
        });
    },
    problem: () => stopped,
    reached() {
      stopped = undefined;
    },
  };
}
