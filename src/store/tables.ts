/**
 * The TaskStore's tables. They live in one row engine so the record and byte bounds count every
 * row and one transaction rolls back changes across all of them. Each table belongs to one part
 * (named beside it), the only file that writes it.
 */
import type { RowEngine } from "./rows.ts";

export const STORE_TABLES = [
  "task", // tasks.ts
  "meta", // tasks.ts
  "event", // events.ts
  "evidence", // events.ts
  "envelope", // envelopes.ts
  "outbox", // outbox.ts
  "rotation", // retry-rotation.ts
  "quarantine", // quarantine.ts
  "operation", // operations.ts
  "intent", // intents.ts
  "cooldown", // cooldowns.ts
  "delivery", // inbox.ts
  "inbound", // inbox.ts
  "checkpoint", // ack-checkpoint.ts
  "local", // local-presentation.ts
] as const;
export type StoreTable = (typeof STORE_TABLES)[number];

export type StoreRows = RowEngine<StoreTable>;

/**
 * The rows of `table` that belong to a task, in table order. Lazy over a copy of the keys, so the
 * caller may remove each row it is given before asking for the next.
 */
export function* rowsOfTask<Row extends { readonly taskId: string }>(rows: StoreRows, table: StoreTable, taskId: string): Generator<Row> {
  for (const key of [...rows.keys(table)]) {
    const row = rows.peek<Row>(table, key)!;
    if (row.taskId === taskId) yield row;
  }
}
