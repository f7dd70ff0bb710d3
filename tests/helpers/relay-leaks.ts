/**
 * Relays a test run left running. The processes the tests start with the run's environment (the
 * helpers pass `process.env`; node:child_process passes it by default, Bun.spawn only when asked)
 * carry the run's relay secret directory (`PI_TASKS_RELAY_SECRET_DIR`, tests/helpers/preload.ts),
 * so a relay process still alive with it when the last file ended was started by this run and not stopped — an embedded relay
 * that a Pi started (on the default port too: a person's Pi then finds a relay that cannot prove it
 * is theirs), or one a test started. Linux only (/proc); elsewhere nothing is found.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { RELAY_SECRET_DIR_VARIABLE } from "../../src/trust/relay-secret.ts";

export interface LeakedRelay {
  readonly pid: number;
  readonly command: string;
}

function readOr(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

/** Relay processes (`… relay …`) other than this one whose environment names `secretDir`. */
export function leakedRelays(secretDir: string): LeakedRelay[] {
  if (!existsSync("/proc/self/environ")) return [];
  const marker = `${RELAY_SECRET_DIR_VARIABLE}=${secretDir}`;
  const leaked: LeakedRelay[] = [];
  for (const entry of readdirSync("/proc")) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    const argv = readOr(`/proc/${pid}/cmdline`)
      .split("\0")
      .filter((arg) => arg !== "");
    if (!argv.includes("relay")) continue;
    if (!readOr(`/proc/${pid}/environ`).split("\0").includes(marker)) continue;
    leaked.push({ pid, command: argv.join(" ") });
  }
  return leaked;
}

/** Stops the leaked relays (the run is over) and says what they were, or nothing when none. */
export function stopLeakedRelays(secretDir: string): string | undefined {
  const leaked = leakedRelays(secretDir);
  for (const relay of leaked) {
    try {
      process.kill(relay.pid, "SIGKILL");
    } catch {
      // gone meanwhile
    }
  }
  if (leaked.length === 0) return undefined;
  return `the test run left ${leaked.length} relay process(es) running (stopped now): ${leaked.map((relay) => `${relay.pid}: ${relay.command}`).join("; ")}`;
}
