/**
 * What a Pi process needs to find its relay and name itself, from the environment:
 *
 * - the relay: `PI_TASKS_RELAY_URL` (a bare origin; plain HTTP only on loopback), else
 *   `http://127.0.0.1:${WOLFPACK_PORT ?? 18790}` — the default loopback relay, which pi-tasks may
 *   start itself unless `PI_TASKS_EMBEDDED_RELAY=0`;
 * - the session name: `WOLFPACK_SESSION_NAME`, else a readable unique name from the project
 *   directory plus a short random suffix (`myproject-k3x9q2`);
 * - the home directory of pi-tasks' own files (spawned workers, logs, embedded relays):
 *   `PI_TASKS_HOME`, else `$PI_CODING_AGENT_DIR/pi-tasks`, else `~/.pi/agent/pi-tasks`.
 */
import { homedir } from "node:os";
import { basename, join, resolve } from "node:path";
import { customAlphabet } from "nanoid";
import { TaskError } from "../protocol/errors.ts";
import {
  fallbackRelayPorts,
  generatedSessionSuffixChars,
  maxGeneratedSessionSlugChars,
  maxTcpPort,
  minTcpPort,
} from "../protocol/limits.ts";
import { DEFAULT_RELAY_PORT } from "../protocol/names.ts";

export type Env = Record<string, string | undefined>;

function invalid(message: string, details: Record<string, unknown>): TaskError {
  return new TaskError("INVALID_CONFIGURATION", { message, details });
}

const LOOPBACK_HOSTS: ReadonlySet<string> = new Set(["127.0.0.1", "[::1]", "localhost"]);

/** Whether `url` is plain HTTP on loopback (`127.0.0.1`, `[::1]`, `localhost`): the only plain HTTP a relay URL may use. */
export function isLoopbackHttpUrl(url: string): boolean {
  try {
    const parsed = new URL(url);
    return parsed.protocol === "http:" && LOOPBACK_HOSTS.has(parsed.hostname);
  } catch {
    return false;
  }
}

/** Validates a relay base URL: a bare https origin, or a bare http origin on loopback. */
export function normaliseRelayUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw invalid(`relay URL ${value} is not a URL`, { url: value });
  }
  if (url.pathname !== "/" || url.search !== "" || url.hash !== "" || url.username !== "" || url.password !== "") {
    throw invalid(`relay URL ${value} must be a bare origin (no path, query or credentials)`, { url: value });
  }
  if (url.protocol !== "https:" && !isLoopbackHttpUrl(url.href)) {
    throw invalid(`relay URL ${value} must be https, or http on 127.0.0.1, [::1] or localhost`, { url: value });
  }
  return url.origin;
}

export interface RelayConfig {
  readonly url: string;
  /** Where the URL came from. */
  readonly source: "PI_TASKS_RELAY_URL" | "WOLFPACK_PORT" | "default";
  /** The loopback port of the default relay (absent for an explicit URL). */
  readonly port?: number;
  /** pi-tasks may start a relay at this URL when none answers (default loopback relay, not opted out). */
  readonly embedded: boolean;
}

function parsePort(text: string): number {
  const port = Number(text);
  if (!/^\d+$/.test(text) || port < minTcpPort || port > maxTcpPort) {
    throw invalid(`WOLFPACK_PORT must be an integer from ${minTcpPort} to ${maxTcpPort}`, { WOLFPACK_PORT: text });
  }
  return port;
}

/** `PI_TASKS_EMBEDDED_RELAY`: unset or `1` allows starting a relay; `0` opts out. */
function embeddedAllowed(env: Env): boolean {
  const value = env.PI_TASKS_EMBEDDED_RELAY?.trim();
  if (value === undefined || value === "" || value === "1") return true;
  if (value === "0") return false;
  throw invalid("PI_TASKS_EMBEDDED_RELAY must be 0 (never start a relay) or 1 (the default)", { PI_TASKS_EMBEDDED_RELAY: value });
}

/** The port of the default loopback relay: `WOLFPACK_PORT`, else 18790. */
export function defaultRelayPort(env: Env): number {
  const portText = env.WOLFPACK_PORT?.trim();
  return portText ? parsePort(portText) : DEFAULT_RELAY_PORT;
}

/** The ports where the user's relay runs beside a server on `port` that is not a volatile-v1 relay, in the order tried. */
export function fallbackPortsOf(port: number): number[] {
  return Array.from({ length: fallbackRelayPorts }, (_, index) => port + 1 + index).filter((next) => next <= maxTcpPort);
}

export function relayConfigFromEnv(env: Env): RelayConfig {
  const explicit = env.PI_TASKS_RELAY_URL?.trim();
  if (explicit) return { url: normaliseRelayUrl(explicit), source: "PI_TASKS_RELAY_URL", embedded: false };
  const embedded = embeddedAllowed(env);
  const port = defaultRelayPort(env);
  return { url: `http://127.0.0.1:${port}`, source: env.WOLFPACK_PORT?.trim() ? "WOLFPACK_PORT" : "default", port, embedded };
}

export function relayUrlFromEnv(env: Env): string {
  return relayConfigFromEnv(env).url;
}

export interface SessionName {
  readonly name: string;
  readonly source: "WOLFPACK_SESSION_NAME" | "generated";
}

const suffix = customAlphabet("0123456789abcdefghijklmnopqrstuvwxyz", generatedSessionSuffixChars);

/** A readable slug of a directory name: lower case letters, digits and dashes. */
export function projectSlug(directory: string): string {
  const slug = basename(resolve(directory))
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, maxGeneratedSessionSlugChars)
    .replace(/-+$/, "");
  return slug.length > 0 ? slug : "pi";
}

/** `WOLFPACK_SESSION_NAME` when set; otherwise `<project slug>-<random suffix>`, unique per process. */
export function sessionNameFromEnv(env: Env, cwd: string, random: () => string = suffix): SessionName {
  const explicit = env.WOLFPACK_SESSION_NAME?.trim();
  if (explicit) return { name: explicit, source: "WOLFPACK_SESSION_NAME" };
  return { name: `${projectSlug(cwd)}-${random()}`, source: "generated" };
}

/** The directory of pi-tasks' own files (spawned workers, logs, embedded relays, identity). */
export function piTasksHome(env: Env): string {
  const explicit = env.PI_TASKS_HOME?.trim();
  if (explicit) return resolve(explicit);
  const agentDir = env.PI_CODING_AGENT_DIR?.trim();
  return join(agentDir ? resolve(agentDir) : join(homedir(), ".pi", "agent"), "pi-tasks");
}
