/**
 * One connection to Redis through Bun's client (`Bun.RedisClient`), with bounded waits:
 * connecting gives up after the connect timeout, a command after the command timeout, and both
 * fail as `REDIS_UNAVAILABLE` (the relay answers 503 `RELAY_UNAVAILABLE`). Commands are never
 * queued while disconnected and never retried: a lost connection fails the commands on it, and
 * the next command connects anew (one attempt at a time).
 *
 * A connection that cannot be made is told apart: nothing accepts TCP at the address, or something
 * does but the Redis handshake fails (a wrong or missing password, a database number Redis does not
 * have, or TLS where there is none).
 */
import type { RedisClient } from "bun";
import { within } from "../../../platform/waits.ts";
import { TaskError } from "../../../protocol/errors.ts";
import { REDIS_PASSWORD_FILE_VARIABLE, REDIS_PASSWORD_VARIABLE, type RedisTarget } from "./url.ts";

export interface RedisLinkOptions {
  readonly connectTimeoutMs: number;
  readonly commandTimeoutMs: number;
  /** Called when an established connection is lost (not for a failed attempt). */
  readonly onLost?: (error: TaskError) => void;
}

export interface RedisLink {
  /** The connected client, connecting first when there is none. */
  client(): Promise<RedisClient>;
  /** One command within the command timeout; an error reply of Redis is `REDIS_UNAVAILABLE` with `details.reply`. */
  send(command: string, args: readonly string[]): Promise<unknown>;
  /** Commands sent so far (round trips to Redis), for the relay's metrics. */
  sent(): number;
  close(): void;
}

export function unavailable(target: RedisTarget, problem: string, cause?: unknown): TaskError {
  return new TaskError("REDIS_UNAVAILABLE", {
    message: `Redis at ${target.display} ${problem}`,
    details: {
      store: target.display,
      problem,
      ...(cause === undefined ? {} : { cause: cause instanceof Error ? cause.message : String(cause) }),
    },
  });
}

/** An error reply of Redis to a command (Bun rejects those with this code). */
function isErrorReply(error: unknown): error is Error {
  return error instanceof Error && (error as { code?: unknown }).code === "ERR_REDIS_SERVER_ERROR";
}

/** Redis answered a command with an error (`details.reply` is its text, e.g. `NOSCRIPT …`, `OOM …`). */
function replied(target: RedisTarget, command: string, reply: string): TaskError {
  return new TaskError("REDIS_UNAVAILABLE", {
    message: `Redis at ${target.display} refused ${command}: ${reply}`,
    details: { store: target.display, command, reply },
  });
}

/** The error text of Redis when `error` is its error reply (see `RedisLink.send`). */
export function errorReply(error: unknown): string | undefined {
  return error instanceof TaskError && typeof error.details.reply === "string" ? error.details.reply : undefined;
}

/** Whether something accepts TCP at the target within `timeoutMs`. */
async function acceptsTcp(target: RedisTarget, timeoutMs: number): Promise<boolean> {
  const attempt = new Promise<boolean>((resolve) => {
    Bun.connect({
      hostname: target.host.replace(/^\[|\]$/g, ""),
      port: target.port,
      socket: {
        open(socket) {
          socket.end();
          resolve(true);
        },
        data() {},
        error() {
          resolve(false);
        },
        connectError() {
          resolve(false);
        },
      },
    }).catch(() => resolve(false));
  });
  return (await within(attempt, timeoutMs)) === true;
}

/** The work's result, or `timedOut()` thrown when it has not settled within `ms`. */
export async function bounded<T>(work: Promise<T>, ms: number, timedOut: () => TaskError): Promise<T> {
  const outcome = await within(
    work.then((value) => ({ value })),
    ms,
  );
  if (outcome === undefined) throw timedOut();
  return outcome.value;
}

/** Why a connection could not be made: nothing accepts TCP there, or the Redis handshake failed. */
async function explain(target: RedisTarget, options: RedisLinkOptions, cause: unknown): Promise<TaskError> {
  if (await acceptsTcp(target, options.connectTimeoutMs)) {
    const hint = target.tls
      ? "TLS or credentials"
      : `credentials (the password of ${REDIS_PASSWORD_FILE_VARIABLE} or ${REDIS_PASSWORD_VARIABLE}), the database number, or rediss:// for a TLS port`;
    return unavailable(target, `accepts connections but the Redis handshake failed: check the ${hint}`, cause);
  }
  return unavailable(target, `cannot be reached (nothing accepts connections there within ${options.connectTimeoutMs} ms)`, cause);
}

/** One connection attempt within the timeouts, handshake included; `onClose` hears when the connection made closes. */
async function connect(
  target: RedisTarget,
  options: RedisLinkOptions,
  onClose: (client: RedisClient, error: unknown) => void,
): Promise<RedisClient> {
  // The global, not an import of "bun": the relay's built JavaScript also runs on Node, where
  // this store is refused before it is loaded (src/cli/relay.ts).
  const client = new Bun.RedisClient(target.url, {
    connectionTimeout: options.connectTimeoutMs,
    autoReconnect: false,
    enableOfflineQueue: false,
    // A private certificate authority (PI_TASKS_REDIS_CA_FILE), else the system's.
    ...(target.tls ? { tls: target.ca === undefined ? true : { ca: target.ca } } : {}),
  });
  try {
    await bounded(client.connect(), options.connectTimeoutMs, () =>
      unavailable(target, `did not answer within ${options.connectTimeoutMs} ms`),
    );
    // The handshake (AUTH, SELECT) is done when a command answers.
    await bounded(client.send("PING", []), options.commandTimeoutMs, () =>
      unavailable(target, `did not answer within ${options.commandTimeoutMs} ms`),
    );
  } catch (error) {
    client.close();
    throw error instanceof TaskError ? error : await explain(target, options, error);
  }
  client.onclose = (error) => onClose(client, error);
  return client;
}

/** One command on a connected client within the command timeout; every failure is `REDIS_UNAVAILABLE`. */
async function sendOn(
  target: RedisTarget,
  options: RedisLinkOptions,
  connected: RedisClient,
  command: string,
  args: readonly string[],
): Promise<unknown> {
  try {
    return await bounded(connected.send(command, [...args]), options.commandTimeoutMs, () =>
      unavailable(target, `did not answer ${command} within ${options.commandTimeoutMs} ms`),
    );
  } catch (error) {
    if (error instanceof TaskError) throw error;
    if (isErrorReply(error)) throw replied(target, command, error.message);
    throw unavailable(target, `failed ${command}`, error);
  }
}

/** The link's one connection: made on demand (one attempt at a time), forgotten when lost, closed for good by `close`. */
export function createRedisLink(target: RedisTarget, options: RedisLinkOptions): RedisLink {
  let current: RedisClient | undefined;
  let connecting: Promise<RedisClient> | undefined;
  let closed = false;

  /** Forgets a connection that went away (before or without its `onclose`), and says so once. */
  function lost(client: RedisClient, cause?: unknown): void {
    if (current !== client) return;
    current = undefined;
    client.close();
    if (!closed) options.onLost?.(unavailable(target, "closed the connection", cause));
  }

  async function client(): Promise<RedisClient> {
    if (closed) throw unavailable(target, "is closed (the relay is stopping)");
    if (current?.connected === true) return current;
    if (current !== undefined) lost(current);
    connecting ??= connect(target, options, lost).then(
      (made) => {
        connecting = undefined;
        if (closed) {
          made.close();
          throw unavailable(target, "is closed (the relay is stopping)");
        }
        current = made;
        return made;
      },
      (error: unknown) => {
        connecting = undefined;
        throw error;
      },
    );
    return connecting;
  }

  let sent = 0;
  return {
    client,
    send: async (command, args) => {
      sent += 1;
      return sendOn(target, options, await client(), command, args);
    },
    sent: () => sent,
    close() {
      closed = true;
      const open = current;
      current = undefined;
      open?.close();
    },
  };
}
