/**
 * The `watch-v1` doorbell of the Redis store: one pub/sub channel per endpoint, on a connection of
 * its own (a subscribed Redis connection runs no other commands). A watch listens first — its
 * channel is subscribed when `listen` resolves — and only then looks at the mailbox, so a ring
 * published after the look is never missed. The scripts publish on the channel: `r` when mail is
 * admitted, the endpoint disconnects or is superseded; `w<serial>` when a watch of the endpoint
 * parks, on whatever relay. Serials come from one Redis counter, so every relay agrees which watch
 * is newer: a parked watch is answered (not rung) once `relayWatchesPerEndpoint` newer ones parked.
 *
 * When the subscription connection is lost, every parked watch is answered at once (it then looks
 * again: the state, or `RELAY_UNAVAILABLE` if Redis is gone); the next watch subscribes anew.
 */
import { relayWatchesPerEndpoint } from "../../../protocol/limits.ts";
import { bounded, createRedisLink, type RedisLinkOptions, unavailable } from "./link.ts";
import type { RedisTarget } from "./url.ts";

export interface DoorbellListener {
  /**
   * Waits as the watch of `serial`: true when rung; false when `waitMs` elapses, the signal aborts,
   * a newer watch of the endpoint replaces this one, the subscription is lost or the doorbell closes.
   */
  wait(serial: number, waitMs: number, signal?: AbortSignal): Promise<boolean>;
  /** Stops listening (the channel is unsubscribed when its last listener leaves). */
  release(): void;
}

export interface RedisDoorbell {
  /** Subscribes to the endpoint's channel (resolves once subscribed); throws `REDIS_UNAVAILABLE`. */
  listen(endpointId: string): Promise<DoorbellListener>;
  /** Watches parked in this process. */
  waiting(): number;
  close(): void;
}

interface Waiter {
  readonly serial: number;
  settle(rang: boolean): void;
}

interface Channel {
  readonly name: string;
  /** The subscription connection this channel is subscribed on, once it is (a lost one ends it). */
  connection: number;
  subscribed: Promise<void>;
  readonly waiters: Set<Waiter>;
  listeners: number;
  /** The newest watch serials announced on the channel, ascending (at most `relayWatchesPerEndpoint`). */
  newest: number[];
}

const RING = "r";
const WATCH_PREFIX = "w";

export function createRedisDoorbell(
  target: RedisTarget,
  options: Omit<RedisLinkOptions, "onLost">,
  channelOf: (endpointId: string) => string,
): RedisDoorbell {
  const channels = new Map<string, Channel>();
  /** UNSUBSCRIBEs in flight by channel name: a new subscription of the name waits for its own. */
  const unsubscribing = new Map<string, Promise<void>>();
  let connection = 0;
  let closed = false;
  const link = createRedisLink(target, { ...options, onLost: () => lose() });

  function settleAll(): void {
    for (const channel of channels.values()) for (const waiter of [...channel.waiters]) waiter.settle(false);
  }

  function lose(): void {
    connection += 1;
    settleAll();
    channels.clear();
    unsubscribing.clear();
  }

  /** Records a parked watch's serial; every older watch beyond the bound is answered. */
  function announce(channel: Channel, serial: number): void {
    if (!channel.newest.includes(serial))
      channel.newest = [...channel.newest, serial].sort((a, b) => a - b).slice(-relayWatchesPerEndpoint);
    if (channel.newest.length < relayWatchesPerEndpoint) return;
    const oldestKept = channel.newest[0]!;
    for (const waiter of [...channel.waiters]) if (waiter.serial < oldestKept) waiter.settle(false);
  }

  function onMessage(message: string, name: string): void {
    const channel = channels.get(name);
    if (channel === undefined) return; // an UNSUBSCRIBE in flight: nobody listens any more
    if (message === RING) {
      for (const waiter of [...channel.waiters]) waiter.settle(true);
    } else if (message.startsWith(WATCH_PREFIX)) {
      announce(channel, Number(message.slice(WATCH_PREFIX.length)));
    }
  }

  async function subscribe(name: string): Promise<void> {
    await unsubscribing.get(name);
    const client = await link.client();
    await bounded(client.subscribe(name, onMessage), options.commandTimeoutMs, () =>
      unavailable(target, `did not confirm SUBSCRIBE within ${options.commandTimeoutMs} ms`),
    );
  }

  function release(channel: Channel): void {
    channel.listeners -= 1;
    if (channel.listeners > 0 || channels.get(channel.name) !== channel) return;
    channels.delete(channel.name);
    if (channel.connection !== connection || closed) return; // its subscription ended with its connection
    // A failed UNSUBSCRIBE means the connection is going (its loss answers everyone, `lose`) or the
    // channel stays subscribed with nobody listening: its messages are ignored (`onMessage`).
    const done = channel.subscribed
      .then(async () => {
        const client = await link.client();
        await bounded(client.unsubscribe(channel.name), options.commandTimeoutMs, () => unavailable(target, "did not confirm UNSUBSCRIBE"));
      })
      .then(
        () => undefined,
        () => undefined,
      )
      .finally(() => {
        if (unsubscribing.get(channel.name) === done) unsubscribing.delete(channel.name);
      });
    unsubscribing.set(channel.name, done);
  }

  function waiterOf(channel: Channel, serial: number, waitMs: number, signal: AbortSignal | undefined): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      let done = false;
      const timer = setTimeout(() => settle(false), waitMs);
      const onAbort = () => settle(false);
      const waiter: Waiter = { serial, settle };
      function settle(rang: boolean): void {
        if (done) return;
        done = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        channel.waiters.delete(waiter);
        resolve(rang);
      }
      if (signal?.aborted === true || closed || channels.get(channel.name) !== channel) return settle(false);
      signal?.addEventListener("abort", onAbort, { once: true });
      channel.waiters.add(waiter);
      announce(channel, serial);
    });
  }

  return {
    async listen(endpointId) {
      if (closed) throw unavailable(target, "is closed (the relay is stopping)");
      const name = channelOf(endpointId);
      let channel = channels.get(name);
      if (channel === undefined) {
        const created: Channel = { name, connection, subscribed: Promise.resolve(), waiters: new Set(), listeners: 0, newest: [] };
        created.subscribed = subscribe(name).then(() => {
          created.connection = connection;
          // A connection lost while this one subscribed (on its successor) cleared the channels.
          if (!closed && !channels.has(name)) channels.set(name, created);
        });
        channels.set(name, created);
        channel = created;
      }
      channel.listeners += 1;
      const listening = channel;
      try {
        await listening.subscribed;
      } catch (error) {
        listening.listeners -= 1;
        if (channels.get(name) === listening) channels.delete(name);
        throw error;
      }
      let released = false;
      return {
        wait: (serial, waitMs, signal) => waiterOf(listening, serial, waitMs, signal),
        release() {
          if (released) return;
          released = true;
          release(listening);
        },
      };
    },
    waiting: () => [...channels.values()].reduce((sum, channel) => sum + channel.waiters.size, 0),
    close() {
      closed = true;
      settleAll();
      channels.clear();
      link.close();
    },
  };
}
