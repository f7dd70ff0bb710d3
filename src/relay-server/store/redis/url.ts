/**
 * The `--store` URL of a Redis store: `redis://[USER@]HOST[:PORT][/DB]`, or `rediss://…` for TLS.
 *
 * The password never travels in the URL: a command line is visible to every user of the machine
 * (`ps`), so a URL carrying one is refused (`REDIS_PASSWORD_IN_URL`). It comes from a file named by
 * `PI_TASKS_REDIS_PASSWORD_FILE` (a regular file of this user's, mode 0600; its text less one final
 * newline), or from `PI_TASKS_REDIS_PASSWORD` — one of them, never both — or, for the library,
 * from the `password` argument.
 *
 * No message echoes what was typed. A refused URL is described by its problem alone: a password with
 * an unencoded `/` or `@` shifts where a parser sees the host and the path, so even those may be
 * pieces of the password. An accepted one is shown as `display` (scheme, host, port and database;
 * no credentials), and one refused for its password with `***` in its place. Anything malformed is
 * `CLI_USAGE`.
 */
import { readFileSync } from "node:fs";
import { TaskError } from "../../../protocol/errors.ts";
import { maxTcpPort, minTcpPort } from "../../../protocol/limits.ts";
import { DEFAULT_REDIS_PORT } from "../../../protocol/names.ts";
import { readPrivateFile } from "../../../platform/private-file.ts";

/** The variable holding the password itself. */
export const REDIS_PASSWORD_VARIABLE = "PI_TASKS_REDIS_PASSWORD";
/** The variable naming a PEM file of the certificate authority that signed a `rediss://` Redis's certificate (else the system's). */
export const REDIS_CA_FILE_VARIABLE = "PI_TASKS_REDIS_CA_FILE";
/** The variable naming a file that holds the password (mode 0600, the user's own). */
export const REDIS_PASSWORD_FILE_VARIABLE = "PI_TASKS_REDIS_PASSWORD_FILE";
/** A password file is a secret: group and others may not even read it. */
const GROUP_OTHER_BITS = 0o077;
const USAGE = "expected redis://HOST[:PORT][/DB] or rediss://HOST[:PORT][/DB] (a user name may precede HOST: USER@HOST)";

export interface RedisTarget {
  /** The ACL user of the URL (`redis://USER@HOST`), percent-decoded; none is Redis's `default`. */
  readonly username?: string;
  /** The password (from the environment or the library's option: never in the URL), taken as written. */
  readonly password?: string;
  /** The same without credentials (for logs and errors). */
  readonly display: string;
  readonly host: string;
  readonly port: number;
  readonly database: number;
  readonly tls: boolean;
  /** The certificate authority (PEM) a `rediss://` Redis's certificate must be signed by, when not the system's. */
  readonly ca?: string;
}

const SCHEMES: Readonly<Record<string, boolean>> = { "redis:": false, "rediss:": true };

/** A refused URL, described by its problem only (see the header); `text` is looked at, never shown. */
function refuse(text: string, problem: string): TaskError {
  const hint = text.includes("@")
    ? `; a password never goes in the URL (use ${REDIS_PASSWORD_FILE_VARIABLE} or ${REDIS_PASSWORD_VARIABLE})`
    : "";
  return new TaskError("CLI_USAGE", { message: `the --store URL ${problem}: ${USAGE}${hint}`, details: { problem } });
}

function portOf(text: string, url: URL): number {
  if (url.port === "") return DEFAULT_REDIS_PORT;
  const port = Number(url.port);
  if (!Number.isInteger(port) || port < minTcpPort || port > maxTcpPort) throw refuse(text, "has an invalid port");
  return port;
}

function databaseOf(text: string, url: URL): number {
  const path = url.pathname;
  if (path === "" || path === "/") return 0;
  const match = /^\/(\d+)$/.exec(path);
  if (match === null || !Number.isSafeInteger(Number(match[1]))) throw refuse(text, "has a path that is not a database number");
  return Number(match[1]);
}

function passwordFileInvalid(path: string, problem: string, extra: Record<string, unknown> = {}): TaskError {
  return new TaskError("REDIS_PASSWORD_FILE_INVALID", {
    message: `${REDIS_PASSWORD_FILE_VARIABLE} names ${path}, which ${problem}.`,
    details: { variable: REDIS_PASSWORD_FILE_VARIABLE, path, problem, ...extra },
  });
}

/** The password in the file `path` (see the header); never quoted in an error. */
function passwordFromFile(path: string): string {
  const text = readPrivateFile(path, GROUP_OTHER_BITS, (refusal) =>
    passwordFileInvalid(path, refusal.problem, { fix: refusal.fix, ...refusal.details }),
  );
  if (text === undefined) throw passwordFileInvalid(path, "does not exist");
  const password = text.replace(/\r?\n$/, "");
  if (password === "") throw passwordFileInvalid(path, "is empty; write the Redis password into it");
  return password;
}

/** The password of the library's argument, else of the file or the variable (not both); undefined for none. */
export function redisPassword(env: Record<string, string | undefined>, given?: string): string | undefined {
  if (given !== undefined) return given;
  const file = env[REDIS_PASSWORD_FILE_VARIABLE] ?? "";
  const value = env[REDIS_PASSWORD_VARIABLE] ?? "";
  if (file !== "" && value !== "") {
    throw new TaskError("INVALID_CONFIGURATION", {
      message: `both ${REDIS_PASSWORD_FILE_VARIABLE} and ${REDIS_PASSWORD_VARIABLE} are set; set one of them (which one was meant is a guess)`,
      details: { variables: [REDIS_PASSWORD_FILE_VARIABLE, REDIS_PASSWORD_VARIABLE] },
    });
  }
  if (file !== "") return passwordFromFile(file);
  return value === "" ? undefined : value;
}

function parsed(text: string): URL | undefined {
  try {
    return new URL(text);
  } catch {
    return undefined;
  }
}

/** The CA file `PI_TASKS_REDIS_CA_FILE` names, read (only for `rediss://`); an unreadable one is a usage error. */
function caOf(env: Record<string, string | undefined>, tls: boolean): { ca?: string } {
  const file = env[REDIS_CA_FILE_VARIABLE];
  if (file === undefined || file === "") return {};
  if (!tls) throw new TaskError("CLI_USAGE", { message: `${REDIS_CA_FILE_VARIABLE} is set but the --store URL is not rediss:// (TLS)` });
  try {
    return { ca: readFileSync(file, "utf8") };
  } catch (error) {
    throw new TaskError("CLI_USAGE", {
      message: `${REDIS_CA_FILE_VARIABLE} names ${file}, which cannot be read: ${error instanceof Error ? error.message : String(error)}`,
    });
  }
}

/** The URL's user name, percent-decoded. */
function userOf(text: string, url: URL): string {
  try {
    return decodeURIComponent(url.username);
  } catch {
    throw refuse(text, "has a user name that is not valid percent-encoding");
  }
}

export function parseRedisUrl(text: string, env: Record<string, string | undefined> = {}, password?: string): RedisTarget {
  const url = parsed(text);
  if (url === undefined) throw refuse(text, "is not a URL");
  const tls = SCHEMES[url.protocol];
  // The scheme precedes "//": no part of a password can be in it.
  if (tls === undefined) throw refuse(text, `has the scheme ${url.protocol.replace(/:$/, "")}`);
  if (url.hostname === "") throw refuse(text, "names no host");
  if (url.search !== "" || url.hash !== "") throw refuse(text, "has a query or fragment");
  const port = portOf(text, url);
  const database = databaseOf(text, url);
  const display = `${url.protocol}//${url.host}/${database}`;
  if (url.password !== "") {
    const redacted = `${url.protocol}//${url.username === "" ? "" : url.username}:***@${url.host}/${database}`;
    throw new TaskError("REDIS_PASSWORD_IN_URL", {
      message: `the --store URL ${redacted} carries a password, which every user of this machine can read in the process list (ps); remove it from the URL and put it in a file named by ${REDIS_PASSWORD_FILE_VARIABLE} (mode 0600) or in ${REDIS_PASSWORD_VARIABLE}`,
      details: { store: redacted, variables: [REDIS_PASSWORD_FILE_VARIABLE, REDIS_PASSWORD_VARIABLE] },
    });
  }
  const secret = redisPassword(env, password);
  const user = url.username === "" ? {} : { username: userOf(text, url) };
  const credential = secret !== undefined && secret !== "" ? { password: secret } : {};
  return { ...user, ...credential, display, host: url.hostname, port, database, tls, ...caOf(env, tls) };
}
