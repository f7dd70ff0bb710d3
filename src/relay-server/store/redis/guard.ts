/**
 * The start-up guard of the Redis store: a volatile-v1 relay is memory-only, so it refuses a Redis
 * that persists to disk (`save` points or `appendonly yes`: accepted mail would outlive a Redis
 * restart, and a restart would no longer be a new epoch) unless the operator says that is intended
 * (`--allow-persistent-store`). It always refuses a Redis that may evict keys: an evicted mailbox
 * key or counter would corrupt admission and dedupe without anyone noticing.
 *
 * Managed Redis services often disable `CONFIG`; then nothing can be checked, the relay says so and
 * starts only with `--allow-persistent-store` (the operator vouches for the configuration).
 */
import { TaskError } from "../../../protocol/errors.ts";
import { errorReply } from "./link.ts";
import type { RedisTarget } from "./url.ts";

export interface GuardOptions {
  readonly allowPersistentStore: boolean;
  /** A message for the operator (the CLI writes it to stderr). */
  readonly notice: (message: string) => void;
}

/** What the guard reads of the configuration, or why it could not. */
type Settings =
  | { readonly ok: true; readonly save: string; readonly appendonly: string; readonly eviction: string }
  | { readonly ok: false; readonly problem: string };

/** One `CONFIG GET` value from a RESP3 map (an object) or a RESP2 pair list. */
function configValue(reply: unknown, name: string): string | undefined {
  if (Array.isArray(reply)) {
    const index = reply.indexOf(name);
    return index >= 0 && index + 1 < reply.length ? String(reply[index + 1]) : undefined;
  }
  if (reply !== null && typeof reply === "object") {
    const value = (reply as Record<string, unknown>)[name];
    return value === undefined || value === null ? undefined : String(value);
  }
  return undefined;
}

async function readSettings(send: (command: string, args: readonly string[]) => Promise<unknown>): Promise<Settings> {
  const values: string[] = [];
  for (const name of ["save", "appendonly", "maxmemory-policy"]) {
    let reply: unknown;
    try {
      reply = await send("CONFIG", ["GET", name]);
    } catch (error) {
      const reply = errorReply(error);
      if (reply === undefined) throw error; // Redis did not answer: nothing was refused
      return { ok: false, problem: `CONFIG GET ${name} was refused (${reply})` };
    }
    const value = configValue(reply, name);
    if (value === undefined) return { ok: false, problem: `CONFIG GET ${name} answered nothing` };
    values.push(value);
  }
  const [save, appendonly, eviction] = values as [string, string, string];
  return { ok: true, save, appendonly, eviction };
}

export async function guardRedisConfig(
  target: RedisTarget,
  send: (command: string, args: readonly string[]) => Promise<unknown>,
  options: GuardOptions,
): Promise<void> {
  const settings = await readSettings(send);
  if (!settings.ok) {
    if (!options.allowPersistentStore) {
      throw new TaskError("REDIS_PERSISTENT", {
        message: `cannot check that Redis at ${target.display} keeps its data in memory only: ${settings.problem}. Make sure it runs with save "" and appendonly no (and maxmemory-policy noeviction), then start the relay with --allow-persistent-store to skip this check.`,
        details: { store: target.display, problem: settings.problem },
      });
    }
    options.notice(
      `Redis at ${target.display}: configuration not checked (${settings.problem}); starting because of --allow-persistent-store`,
    );
    return;
  }
  if (settings.eviction !== "noeviction") {
    throw new TaskError("REDIS_EVICTS", {
      message: `Redis at ${target.display} runs with maxmemory-policy ${settings.eviction}: it may evict relay keys, which would corrupt mailboxes and budgets. Set maxmemory-policy noeviction (the default); a full Redis then refuses writes and the relay answers RELAY_UNAVAILABLE.`,
      details: { store: target.display, maxmemoryPolicy: settings.eviction },
    });
  }
  const persists = settings.save.trim() !== "" || settings.appendonly === "yes";
  if (!persists) return;
  const how = `save ${JSON.stringify(settings.save)}, appendonly ${settings.appendonly}`;
  if (!options.allowPersistentStore) {
    throw new TaskError("REDIS_PERSISTENT", {
      message: `Redis at ${target.display} persists to disk (${how}). The relay is memory-only: accepted mail must not outlive the store, and a Redis restart must be a new epoch (RELAY_RESET). Turn persistence off (redis-server --save "" --appendonly no, or CONFIG SET save "" and CONFIG SET appendonly no), or pass --allow-persistent-store if a persistent store is intended.`,
      details: { store: target.display, save: settings.save, appendonly: settings.appendonly },
    });
  }
  options.notice(
    `Redis at ${target.display} persists to disk (${how}); starting because of --allow-persistent-store: a Redis restart then keeps the relay's state and epoch`,
  );
}
