/**
 * One connection to Redis through node-redis (`@redis/client`, the same client on Node and Bun),
 * with bounded waits: connecting gives up after the connect timeout, a command after the command
 * timeout, and both fail as `REDIS_UNAVAILABLE` (the relay answers 503 `RELAY_UNAVAILABLE`).
 * Commands are never queued while disconnected and never retried (`disableOfflineQueue`,
 * `reconnectStrategy: false`): a lost connection fails the commands on it, and the next command
 * connects anew (one attempt at a time).
 *
 * A connection that cannot be made is told apart: nothing accepts TCP at the address, or something
 * does but the Redis handshake fails (a wrong or missing password, a database number Redis does not
 * have, or TLS where there is none).
 */
import { createConnection } from "node:net";
import { within } from "../../../platform/waits.ts";
import { TaskError } from "../../../protocol/errors.ts";
import { REDIS_PASSWORD_FILE_VARIABLE, REDIS_PASSWORD_VARIABLE, type RedisTarget } from "./url.ts";

export interface RedisLinkOptions {
  readonly connectTimeoutMs: number;
  readonly commandTimeoutMs: number;
  /** Called when an established connection is lost (not for a failed attempt). */
  readonly onLost?: (error: TaskError) => void;
}

/** A connected client: commands, or (on a connection kept for it) SUBSCRIBE and UNSUBSCRIBE. */
export interface RedisConnection {
  readonly ready: boolean;
  send(command: string, args: readonly string[]): Promise<unknown>;
  subscribe(channel: string, listener: (message: string, channel: string) => void): Promise<void>;
  unsubscribe(channel: string): Promise<void>;
  close(): void;
}

export interface RedisLink {
  /** The connected client, connecting first when there is none. */
  client(): Promise<RedisConnection>;
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

/** The host as a socket takes it (an IPv6 address without its URL brackets). */
function socketHost(target: RedisTarget): string {
  return target.host.replace(/^\[|\]$/g, "");
}

/** Whether something accepts TCP at the target within `timeoutMs`. */
async function acceptsTcp(target: RedisTarget, timeoutMs: number): Promise<boolean> {
  const socket = createConnection({ host: socketHost(target), port: target.port });
  const attempt = new Promise<boolean>((resolve) => {
    socket.once("connect", () => resolve(true));
    socket.once("error", () => resolve(false));
  });
  const accepted = (await within(attempt, timeoutMs)) === true;
  socket.destroy();
  return accepted;
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

/** An error reply of Redis to a command (node-redis's `ErrorReply`, seen through `RedisConnection.send`). */
class RedisErrorReply extends Error {}

type RedisModule = typeof import("@redis/client");
let redisModule: Promise<RedisModule> | undefined;

/**
 * node-redis, loaded with the first connection: a relay in memory never loads it, and the library
 * (`pi-tasks/relay`) leaves it out of its build — a program of its own that runs the Redis store
 * installs `@redis/client` (the `pi-tasks` command has it built in).
 */
async function loadRedis(): Promise<RedisModule> {
  redisModule ??= import("@redis/client");
  try {
    return await redisModule;
  } catch (error) {
    redisModule = undefined;
    throw new TaskError("REDIS_CLIENT_MISSING", { details: { cause: error instanceof Error ? error.message : String(error) } });
  }
}

/** A connection that never queues a command while disconnected and never reconnects by itself, with its connect and its end. */
async function clientFor(target: RedisTarget, options: RedisLinkOptions) {
  const { createClient, ErrorReply } = await loadRedis();
  const client = createClient({
    ...(target.username === undefined ? {} : { username: target.username }),
    ...(target.password === undefined ? {} : { password: target.password }),
    database: target.database,
    RESP: 3,
    disableOfflineQueue: true,
    // No CLIENT SETINFO at connect: the relay's ACL user may run only what the relay needs.
    disableClientInfo: true,
    socket: {
      host: socketHost(target),
      port: target.port,
      connectTimeout: options.connectTimeoutMs,
      reconnectStrategy: false,
      // A private certificate authority (PI_TASKS_REDIS_CA_FILE), else the system's.
      ...(target.tls ? { tls: true as const, ...(target.ca === undefined ? {} : { ca: target.ca }) } : {}),
    },
  });
  // The client reports every failure as an event too; each one also fails the command or the
  // attempt it belongs to, which is where it is handled.
  client.on("error", () => undefined);
  const replied = (error: unknown) => (error instanceof ErrorReply ? new RedisErrorReply(error.message) : error);
  const connection: RedisConnection = {
    get ready() {
      return client.isReady;
    },
    send: (command, args) =>
      client.sendCommand([command, ...args]).catch((error: unknown) => {
        throw replied(error);
      }),
    subscribe: (channel, listener) => client.subscribe(channel, listener),
    unsubscribe: (channel) => client.unsubscribe(channel),
    close: () => client.destroy(),
  };
  return { connection, connect: () => client.connect(), onEnd: (listener: (cause: unknown) => void) => client.on("terminated", listener) };
}

/** One connection attempt within the timeouts, handshake included; `onClose` hears when the connection made closes. */
async function connect(
  target: RedisTarget,
  options: RedisLinkOptions,
  onClose: (connection: RedisConnection, error: unknown) => void,
): Promise<RedisConnection> {
  const { connection, connect: open, onEnd } = await clientFor(target, options);
  try {
    // The handshake (HELLO with AUTH, SELECT) is part of connecting: it is done when this resolves.
    await bounded(open(), options.connectTimeoutMs, () => unavailable(target, `did not answer within ${options.connectTimeoutMs} ms`));
  } catch (error) {
    connection.close();
    throw error instanceof TaskError ? error : await explain(target, options, error);
  }
  onEnd((cause) => onClose(connection, cause));
  return connection;
}

/** One command on a connected client within the command timeout; every failure is `REDIS_UNAVAILABLE`. */
async function sendOn(
  target: RedisTarget,
  options: RedisLinkOptions,
  connected: RedisConnection,
  command: string,
  args: readonly string[],
): Promise<unknown> {
  try {
    return await bounded(connected.send(command, args), options.commandTimeoutMs, () =>
      unavailable(target, `did not answer ${command} within ${options.commandTimeoutMs} ms`),
    );
  } catch (error) {
    if (error instanceof TaskError) throw error;
    if (error instanceof RedisErrorReply) throw replied(target, command, error.message);
    throw unavailable(target, `failed ${command}`, error);
  }
}

/** The link's one connection: made on demand (one attempt at a time), forgotten when lost, closed for good by `close`. */
export function createRedisLink(target: RedisTarget, options: RedisLinkOptions): RedisLink {
  let current: RedisConnection | undefined;
  let connecting: Promise<RedisConnection> | undefined;
  let closed = false;

  /** Forgets a connection that went away (before or without its `onclose`), and says so once. */
  function lost(client: RedisConnection, cause?: unknown): void {
    if (current !== client) return;
    current = undefined;
    client.close();
    if (!closed) options.onLost?.(unavailable(target, "closed the connection", cause));
  }

  async function client(): Promise<RedisConnection> {
    if (closed) throw unavailable(target, "is closed (the relay is stopping)");
    if (current?.ready === true) return current;
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
