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

/** Records a parked watch's serial on its channel; every older watch beyond the bound is answered. */
function announce(channel: Channel, serial: number): void {
  if (!channel.newest.includes(serial)) channel.newest = [...channel.newest, serial].sort((a, b) => a - b).slice(-relayWatchesPerEndpoint);
  if (channel.newest.length < relayWatchesPerEndpoint) return;
  const oldestKept = channel.newest[0]!;
  for (const waiter of [...channel.waiters]) if (waiter.serial < oldestKept) waiter.settle(false);
}

/** A message on a channel: a ring answers its watches, a watch's serial is announced. */
function hear(channel: Channel, message: string): void {
  if (message === RING) {
    for (const waiter of [...channel.waiters]) waiter.settle(true);
  } else if (message.startsWith(WATCH_PREFIX)) {
    announce(channel, Number(message.slice(WATCH_PREFIX.length)));
  }
}

/** Waits on `channel` as the watch of `serial`; answered at once unless `holds(channel)` (it is still listened to). */
function waitOn(
  channel: Channel,
  serial: number,
  waitMs: number,
  signal: AbortSignal | undefined,
  holds: (channel: Channel) => boolean,
): Promise<boolean> {
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
    if (signal?.aborted === true || !holds(channel)) return settle(false);
    signal?.addEventListener("abort", onAbort, { once: true });
    channel.waiters.add(waiter);
    announce(channel, serial);
  });
}

/**
 * The subscription connection: SUBSCRIBE and UNSUBSCRIBE, each bounded by the command timeout.
 * It keeps the UNSUBSCRIBEs in flight by channel name, so a new subscription of a name waits for
 * its own.
 */
interface Subscriber {
  subscribe(name: string): Promise<void>;
  /** Unsubscribes once `subscribed` settles; a failure is ignored (see `release`). */
  unsubscribe(name: string, subscribed: Promise<void>): void;
  /** Forgets the UNSUBSCRIBEs in flight (their connection is lost). */
  forget(): void;
  close(): void;
}

interface SubscriberEvents {
  readonly onLost: () => void;
  readonly onMessage: (message: string, name: string) => void;
}

function createSubscriber(target: RedisTarget, options: Omit<RedisLinkOptions, "onLost">, events: SubscriberEvents): Subscriber {
  const unsubscribing = new Map<string, Promise<void>>();
  const link = createRedisLink(target, { ...options, onLost: () => events.onLost() });
  return {
    async subscribe(name) {
      await unsubscribing.get(name);
      const client = await link.client();
      await bounded(client.subscribe(name, events.onMessage), options.commandTimeoutMs, () =>
        unavailable(target, `did not confirm SUBSCRIBE within ${options.commandTimeoutMs} ms`),
      );
    },
    unsubscribe(name, subscribed) {
      const done = subscribed
        .then(async () => {
          const client = await link.client();
          await bounded(client.unsubscribe(name), options.commandTimeoutMs, () => unavailable(target, "did not confirm UNSUBSCRIBE"));
        })
        .then(
          () => undefined,
          () => undefined,
        )
        .finally(() => {
          if (unsubscribing.get(name) === done) unsubscribing.delete(name);
        });
      unsubscribing.set(name, done);
    },
    forget: () => unsubscribing.clear(),
    close: () => link.close(),
  };
}

/**
 * The channels listened to, by name, with the count of subscription connections lost (a channel
 * subscribed on an earlier one has lost its subscription) and whether the doorbell closed.
 */
interface Channels {
  readonly closed: boolean;
  get(name: string): Channel | undefined;
  /** The channel of that name with one more listener, made (its subscription started by `subscribe`) when there is none. */
  join(name: string, subscribe: (name: string) => Promise<void>): Channel;
  /** One listener fewer; true when it was the last and the channel's subscription is live (to be unsubscribed). */
  leave(channel: Channel): boolean;
  /** One listener fewer after its subscription failed: the channel is forgotten, so the next listen subscribes anew. */
  abandon(channel: Channel): void;
  /** Whether `channel` is still the one listened to by its name. */
  holds(channel: Channel): boolean;
  /** The subscription connection was lost: every parked watch is answered, every channel forgotten. */
  lose(): void;
  close(): void;
  waiting(): number;
}

function createChannels(): Channels {
  const channels = new Map<string, Channel>();
  let connection = 0;
  let closed = false;

  function clear(): void {
    for (const channel of channels.values()) for (const waiter of [...channel.waiters]) waiter.settle(false);
    channels.clear();
  }

  return {
    get closed() {
      return closed;
    },
    get: (name) => channels.get(name),
    join(name, subscribe) {
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
      return channel;
    },
    leave(channel) {
      channel.listeners -= 1;
      if (channel.listeners > 0 || channels.get(channel.name) !== channel) return false;
      channels.delete(channel.name);
      return channel.connection === connection && !closed; // else its subscription ended with its connection
    },
    abandon(channel) {
      channel.listeners -= 1;
      if (channels.get(channel.name) === channel) channels.delete(channel.name);
    },
    holds: (channel) => !closed && channels.get(channel.name) === channel,
    lose() {
      connection += 1;
      clear();
    },
    close() {
      closed = true;
      clear();
    },
    waiting: () => [...channels.values()].reduce((sum, channel) => sum + channel.waiters.size, 0),
  };
}

export function createRedisDoorbell(
  target: RedisTarget,
  options: Omit<RedisLinkOptions, "onLost">,
  channelOf: (endpointId: string) => string,
): RedisDoorbell {
  const channels = createChannels();
  const subscriber = createSubscriber(target, options, {
    onLost() {
      channels.lose();
      subscriber.forget();
    },
    onMessage(message, name) {
      const channel = channels.get(name);
      if (channel !== undefined) hear(channel, message); // else an UNSUBSCRIBE in flight: nobody listens any more
    },
  });

  /**
   * A listener's end. A failed UNSUBSCRIBE means the connection is going (its loss answers
   * everyone) or the channel stays subscribed with nobody listening: its messages are ignored.
   */
  function release(channel: Channel): void {
    if (channels.leave(channel)) subscriber.unsubscribe(channel.name, channel.subscribed);
  }

  return {
    async listen(endpointId) {
      if (channels.closed) throw unavailable(target, "is closed (the relay is stopping)");
      const name = channelOf(endpointId);
      const listening = channels.join(name, (channelName) => subscriber.subscribe(channelName));
      try {
        await listening.subscribed;
      } catch (error) {
        channels.abandon(listening);
        throw error;
      }
      let released = false;
      return {
        wait: (serial, waitMs, signal) => waitOn(listening, serial, waitMs, signal, channels.holds),
        release() {
          if (released) return;
          released = true;
          release(listening);
        },
      };
    },
    waiting: () => channels.waiting(),
    close() {
      channels.close();
      subscriber.close();
    },
  };
}
