/**
 * An in-memory relay and VolatileTaskSession fakes for virtual-time UNIT tests of the core only
 * (budgets, slices, deadlines, cooldowns). Everything else runs against the real relay.
 *
 * Hooks let a test fail or delay any operation; delays use the test's TaskTimers.
 */
import type { TaskTimers } from "../../src/core/timers.ts";
import { TaskError } from "../../src/protocol/errors.ts";
import { RELAY_ID } from "../../src/protocol/names.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import { FEATURE_SUCCESSOR, FEATURE_WATCH, type RelayOperation } from "../../src/protocol/wire.ts";
import type {
  Binding,
  InboxPage,
  VolatileTaskSession,
  Resolution,
  SendAcceptance,
  SessionStatus,
  WatchResult,
} from "../../src/relay-client/session.ts";
import { validatePage } from "../../src/relay-client/session.ts";
import type { RelayTransport } from "../../src/relay-client/transport.ts";

export type Hook = (request: {
  operation: RelayOperation;
  session: string;
  body: Record<string, unknown>;
  signal?: AbortSignal;
}) => void | Promise<void>;

interface Item {
  cursor: bigint;
  envelopeId: string;
  envelope: Record<string, unknown>;
}

export interface FakeRelay {
  readonly epoch: string;
  readonly requests: { operation: RelayOperation; session: string; at: number }[];
  /** Runs before the operation takes effect; throw to fail it, await to delay it. */
  hook(operation: RelayOperation, hook: Hook): void;
  clearHooks(): void;
  session(name: string): VolatileTaskSession;
  count(operation: RelayOperation): number;
  mailbox(endpointId: string): readonly Item[];
  /** Forgets a registration (the target disappears). */
  unregister(name: string): void;
}

export function createFakeRelay(timers: TaskTimers): FakeRelay {
  const epoch = crypto.randomUUID();
  const registrations = new Map<string, { endpointId: string; generation: string; alive: boolean; successors: string[] }>();
  const retired = new Map<string, string>();
  const mailboxes = new Map<string, { items: Item[]; highest: bigint }>();
  const receipts = new Map<string, { text: string; acceptanceId: string; target: string }>();
  const hooks = new Map<RelayOperation, Hook[]>();
  const requests: FakeRelay["requests"] = [];

  const endpointOf = (id: string): TaskEndpoint => ({ relay: RELAY_ID, id });
  const live = (id: string) => [...registrations.values()].some((entry) => entry.alive && entry.endpointId === id);

  async function gate(operation: RelayOperation, session: string, body: Record<string, unknown>, signal?: AbortSignal): Promise<void> {
    requests.push({ operation, session, at: timers.now() });
    for (const hook of hooks.get(operation) ?? []) await hook({ operation, session, body, signal });
    if (signal?.aborted) throw new TaskError("ABORTED", { details: { operation } });
  }

  function mailbox(id: string) {
    let box = mailboxes.get(id);
    if (box === undefined) mailboxes.set(id, (box = { items: [], highest: 0n }));
    return box;
  }

  function createSession(name: string): VolatileTaskSession {
    let status: SessionStatus = "unbound";
    let generation = crypto.randomUUID();
    let binding: Binding | undefined;
    const listeners = new Set<(error: TaskError) => void>();

    async function connect(signal?: AbortSignal): Promise<Binding> {
      if (status === "closed") throw new TaskError("RELAY_CLOSED");
      if (status === "reset") throw new TaskError("RELAY_REBIND_REQUIRED");
      await gate("connect", name, { generation }, signal);
      const current = registrations.get(name);
      let endpointId: string;
      if (current !== undefined && current.generation === generation) endpointId = current.endpointId;
      else {
        endpointId = crypto.randomUUID();
        if (current !== undefined) retired.set(current.endpointId, endpointId);
        registrations.set(name, { endpointId, generation, alive: true, successors: [] });
      }
      binding = {
        epoch,
        endpoint: endpointOf(endpointId),
        generation,
        callerSession: name,
        url: "fake://relay",
        leaseDeadline: Number.POSITIVE_INFINITY,
      };
      status = "ready";
      return binding;
    }

    async function bound(operation: RelayOperation, body: Record<string, unknown>, signal?: AbortSignal): Promise<Binding> {
      if (status === "closed") throw new TaskError("RELAY_CLOSED", { details: { operation } });
      if (status === "reset") throw new TaskError("RELAY_REBIND_REQUIRED", { details: { operation } });
      const current = binding ?? (await connect(signal));
      try {
        await gate(operation, name, body, signal);
      } catch (error) {
        if (error instanceof TaskError && error.code === "RELAY_RESET") {
          status = "reset";
          for (const listener of listeners) listener(error);
        }
        throw error instanceof TaskError ? error.withDetails({ operation }) : error;
      }
      return current;
    }

    const session: VolatileTaskSession = {
      callerSession: name,
      url: "fake://relay",
      transport: { usage: () => ({ ordinary: 0, reserved: 0, waiting: 0 }) } as unknown as RelayTransport,
      status: () => status,
      binding: () => binding,
      features: () => new Set([FEATURE_WATCH, FEATURE_SUCCESSOR]),
      connect,
      lease: async (signal) => binding ?? connect(signal),
      async rebind(signal) {
        generation = crypto.randomUUID();
        binding = undefined;
        status = "unbound";
        return connect(signal);
      },
      async resolve(target, options = {}): Promise<Resolution> {
        await bound("resolve", { target }, options.signal);
        if (live(target.id)) return { endpoint: endpointOf(target.id) };
        const successor = retired.get(target.id);
        if (options.followSuccessor && successor !== undefined && live(successor))
          return { endpoint: endpointOf(successor), successorOf: target };
        throw new TaskError("TARGET_NOT_REGISTERED", { details: { operation: "resolve" } });
      },
      async send(envelope, signal): Promise<SendAcceptance> {
        const { envelopeId, text } = envelope;
        const value = JSON.parse(text) as { target: TaskEndpoint };
        await bound("send", { envelope: value }, signal);
        const target = value.target;
        const receipt = receipts.get(envelopeId);
        if (receipt !== undefined) {
          if (receipt.text !== text) throw new TaskError("ENVELOPE_CONFLICT", { details: { operation: "send" } });
          return { envelopeId, acceptanceId: receipt.acceptanceId, duplicate: true, forwarding: "local" };
        }
        if (!live(target.id)) throw new TaskError("TARGET_NOT_REGISTERED", { details: { operation: "send" } });
        const box = mailbox(target.id);
        box.highest += 1n;
        box.items.push({ cursor: box.highest, envelopeId, envelope: JSON.parse(text) });
        const acceptanceId = crypto.randomUUID();
        receipts.set(envelopeId, { text, acceptanceId, target: target.id });
        return { envelopeId, acceptanceId, duplicate: false, forwarding: "local" };
      },
      async receive(cursor, options = {}): Promise<InboxPage> {
        const current = await bound("receive", { cursor }, options.signal);
        const limit = options.limit ?? 50;
        const box = mailbox(current.endpoint.id);
        const after = BigInt(cursor);
        const eligible = box.items.filter((item) => item.cursor > after);
        const page = eligible.slice(0, limit);
        return validatePage(
          {
            kind: "page",
            deliveries: page.map((item) => ({ cursor: item.cursor.toString(), envelope: item.envelope })),
            nextCursor: page.at(-1)?.cursor.toString() ?? cursor,
            hasMore: eligible.length > page.length,
          },
          cursor,
          limit,
          current.endpoint,
        );
      },
      async acknowledge(envelopeId, signal) {
        const current = await bound("acknowledge", { envelopeId }, signal);
        const box = mailbox(current.endpoint.id);
        const index = box.items.findIndex((item) => item.envelopeId === envelopeId);
        if (index >= 0) {
          box.items.splice(index, 1);
          return { duplicate: false };
        }
        if (receipts.get(envelopeId)?.target === current.endpoint.id) return { duplicate: true };
        throw new TaskError("INVALID_REQUEST", { details: { operation: "acknowledge" } });
      },
      // A relay without ack-batch-v1 (like plain Wolfpack): one ACK per envelope.
      async acknowledgeBatch() {
        throw new TaskError("INCOMPATIBLE_PROTOCOL", { details: { operation: "acknowledge", feature: "ack-batch-v1" } });
      },
      // Nor send-batch-v1 or ack-carry-v1: one request per envelope.
      async sendBatch() {
        throw new TaskError("INCOMPATIBLE_PROTOCOL", { details: { operation: "send", feature: "send-batch-v1" } });
      },
      async acknowledgeCarrying() {
        throw new TaskError("INCOMPATIBLE_PROTOCOL", { details: { operation: "acknowledge", feature: "ack-carry-v1" } });
      },
      async watch(): Promise<WatchResult> {
        throw new TaskError("INCOMPATIBLE_PROTOCOL", { details: { operation: "watch" } });
      },
      async health() {
        await bound("health", {});
        return {};
      },
      async disconnect() {
        await bound("disconnect", {});
        const entry = registrations.get(name);
        if (entry) entry.alive = false;
      },
      onRetire(listener) {
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
      close() {
        status = "closed";
      },
    };
    return session;
  }

  return {
    epoch,
    requests,
    hook(operation, hook) {
      const list = hooks.get(operation) ?? [];
      list.push(hook);
      hooks.set(operation, list);
    },
    clearHooks: () => hooks.clear(),
    session: createSession,
    count: (operation) => requests.filter((request) => request.operation === operation).length,
    mailbox: (endpointId) => mailbox(endpointId).items,
    unregister(name) {
      const entry = registrations.get(name);
      if (entry) entry.alive = false;
    },
  };
}
