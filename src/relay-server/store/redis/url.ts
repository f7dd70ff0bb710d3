/**
 * The `--store` URL of a Redis store: `redis://[USER[:PASSWORD]@]HOST[:PORT][/DB]`, or `rediss://…`
 * for TLS. The password comes from the URL, else from `PI_TASKS_REDIS_PASSWORD`; it never appears
 * in `display` (what the relay prints and errors name). Anything else is `CLI_USAGE`.
 */
import { TaskError } from "../../../protocol/errors.ts";
import { MAX_TCP_PORT, MIN_TCP_PORT, redisDefaultPort } from "../../../protocol/limits.ts";

/** Where the password comes from when the URL carries none. */
export const REDIS_PASSWORD_VARIABLE = "PI_TASKS_REDIS_PASSWORD";

export interface RedisTarget {
  /** The URL handed to the client: scheme, credentials, host, port and database. */
  readonly url: string;
  /** The same without credentials (for logs and errors). */
  readonly display: string;
  readonly host: string;
  readonly port: number;
  readonly database: number;
  readonly tls: boolean;
}

const SCHEMES: Readonly<Record<string, boolean>> = { "redis:": false, "rediss:": true };

function refuse(text: string, problem: string): TaskError {
  return new TaskError("CLI_USAGE", {
    message: `store URL ${JSON.stringify(redact(text))} ${problem}: expected redis://HOST[:PORT][/DB] or rediss://HOST[:PORT][/DB]`,
    details: { problem },
  });
}

/** The text with anything between `//` and `@` hidden, so a refused URL never echoes a password. */
function redact(text: string): string {
  return text.replace(/\/\/[^/@]*@/, "//…@");
}

function portOf(text: string, url: URL): number {
  if (url.port === "") return redisDefaultPort;
  const port = Number(url.port);
  if (!Number.isInteger(port) || port < MIN_TCP_PORT || port > MAX_TCP_PORT) throw refuse(text, "has an invalid port");
  return port;
}

function databaseOf(text: string, url: URL): number {
  const path = url.pathname;
  if (path === "" || path === "/") return 0;
  const match = /^\/(\d+)$/.exec(path);
  if (match === null || !Number.isSafeInteger(Number(match[1]))) throw refuse(text, "has a path that is not a database number");
  return Number(match[1]);
}

export function parseRedisUrl(text: string, env: Record<string, string | undefined> = {}, password?: string): RedisTarget {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw refuse(text, "is not a URL");
  }
  const tls = SCHEMES[url.protocol];
  if (tls === undefined) throw refuse(text, `has the scheme ${url.protocol.replace(/:$/, "")}`);
  if (url.hostname === "") throw refuse(text, "names no host");
  if (url.search !== "" || url.hash !== "") throw refuse(text, "has a query or fragment");
  const port = portOf(text, url);
  const database = databaseOf(text, url);
  const secret = url.password !== "" ? decodeURIComponent(url.password) : (password ?? env[REDIS_PASSWORD_VARIABLE]);
  const client = new URL(`${url.protocol}//${url.host}/${database}`);
  if (url.username !== "") client.username = url.username;
  if (secret !== undefined && secret !== "") client.password = secret;
  const host = url.hostname;
  return { url: client.href, display: `${url.protocol}//${url.host}/${database}`, host, port, database, tls };
}
