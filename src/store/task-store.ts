/**
 * The RAM TaskStore: everything one endpoint lifetime knows about its tasks, kept as immutable
 * encoded rows with indexes, synchronous transactions with full rollback, post-commit change
 * notification and lower-only bounds (`maxStoreRecords` records / `maxStoreEncodedBytes` per
 * endpoint; see rows.ts for what the byte bound counts).
 *
 * This file is the wiring: each table belongs to one part — a small factory in its own file that
 * owns the table's rows, index and counters (tables.ts lists which) — and `createTaskStore`
 * composes those parts over one shared kernel (kernel.ts), which gives all of them one
 * transaction, one rollback and one change notification. The store's contract (its types) is in
 * store-types.ts, re-exported here, so the parts can name it without importing this wiring.
 *
 * The store is generic storage: what the core keeps per row (outbox purposes, delivery stages and
 * data, operation keys) is the core's typed `Bookkeeping`, opaque here; the store holds no core
 * policy. Envelopes are stored once, as the exact text that goes on the wire, beside the small
 * rows that track them.
 *
 * There is no persistence: a new lifetime starts empty. Values returned are deep-frozen and
 * shared between reads; snapshots are fresh top-level objects around those frozen values.
 */
import { createAckCheckpoint } from "./ack-checkpoint.ts";
import { createCooldowns } from "./cooldowns.ts";
import { createEnvelopes } from "./envelopes.ts";
import { createEvents } from "./events.ts";
import { createInbox } from "./inbox.ts";
import { createStoreIndexes } from "./indexes.ts";
import { createIntents } from "./intents.ts";
import { createStoreKernel } from "./kernel.ts";
import { createLocalPresentations } from "./local-presentation.ts";
import { createOperations } from "./operations.ts";
import { createOutbox } from "./outbox.ts";
import { createQuarantine } from "./quarantine.ts";
import { createRetryRotation } from "./retry-rotation.ts";
import { resolveOptions } from "./store-options.ts";
import type { Bookkeeping, TaskStore, TaskStoreOptions } from "./store-types.ts";
import { createTaskSnapshots } from "./task-snapshots.ts";
import { createTasks } from "./tasks.ts";
import { createWithdrawals } from "./withdrawals.ts";

export type * from "./store-types.ts";

export function createTaskStore<B extends Bookkeeping = Bookkeeping>(options?: TaskStoreOptions): TaskStore<B> {
  const keeper = createStoreIndexes();
  const { indexes } = keeper;
  const kernel = createStoreKernel(resolveOptions(options), keeper);
  // Relay deliveries and local presentations share one intake order.
  const intake = kernel.counter();
  const tasks = createTasks<B>(kernel, indexes.task);
  const events = createEvents(kernel, indexes.event, tasks);
  const envelopes = createEnvelopes(kernel);
  const rotation = createRetryRotation(kernel, indexes.rotation);
  const quarantine = createQuarantine<B>(kernel);
  const outbox = createOutbox<B>(kernel, indexes.outbox, { envelopes, quarantine, rotation });
  const operations = createOperations<B>(kernel, indexes.operation);
  const intents = createIntents(kernel);
  const inbox = createInbox<B>(kernel, indexes.delivery, createAckCheckpoint(kernel), intake);
  const local = createLocalPresentations(kernel, indexes.local, events, intake);
  const withdrawals = createWithdrawals<B>(kernel, { tasks, events, local, envelopes, outbox, quarantine, operations, intents });

  return {
    transaction: (fn) => kernel.rows.transaction(fn),
    onChange: (listener) => kernel.rows.onCommit(listener),
    clear: () => kernel.clear(),
    stats: () => ({
      ...kernel.rows.stats(),
      tasks: tasks.count(),
      activeTasks: tasks.activeCount(),
      events: events.count(),
      pendingOutbox: outbox.api.pendingOutboxCount(),
      quarantined: quarantine.count(),
      pendingDeliveries: inbox.pendingDeliveryCount(),
      localPresentations: local.count(),
    }),
    debugIndexes: () => kernel.debugIndexes(),
    ...tasks.api,
    ...events.api,
    ...createTaskSnapshots(tasks, events),
    ...envelopes.api,
    ...outbox.api,
    ...rotation.api,
    ...quarantine.api,
    ...withdrawals,
    ...createCooldowns(kernel),
    ...operations.api,
    ...intents.api,
    ...inbox,
    ...local.api,
  };
}
