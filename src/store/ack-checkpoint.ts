/**
 * The ACK checkpoint (`checkpoint`): the highest relay cursor ever tracked, which the next receive
 * fetches after — "0" before any (a new relay's mailbox). Cursors are decimal strings of at most
 * `maxCursorDigits` digits, compared as integers; anything else is `INVALID_CURSOR`.
 */
import { TaskError } from "../protocol/errors.ts";
import { maxCursorDigits } from "../protocol/limits.ts";
import type { StoreKernel } from "./kernel.ts";

const CURSOR_PATTERN = new RegExp(`^(0|[1-9][0-9]{0,${maxCursorDigits - 1}})$`);
/** The checkpoint's one row: there is one relay mailbox per endpoint lifetime. */
const CHECKPOINT_KEY = "relay";

/** The cursor as an integer, or `INVALID_CURSOR`. */
export function assertCursor(cursor: string): bigint {
  if (typeof cursor !== "string" || !CURSOR_PATTERN.test(cursor)) throw new TaskError("INVALID_CURSOR", { details: { cursor } });
  return BigInt(cursor);
}

export interface AckCheckpoint {
  /** The highest cursor ever tracked ("0" before any). */
  highWater(): string;
  /** Records a cursor above the high water as the new high water. */
  raise(cursor: string): void;
  /** Back to "0". */
  reset(): void;
}

export function createAckCheckpoint({ rows }: StoreKernel): AckCheckpoint {
  return {
    highWater: () => (rows.peek<{ highWater: string }>("checkpoint", CHECKPOINT_KEY) ?? { highWater: "0" }).highWater,
    raise(cursor) {
      rows.write("checkpoint", CHECKPOINT_KEY, { highWater: cursor });
    },
    reset() {
      rows.remove("checkpoint", CHECKPOINT_KEY);
    },
  };
}
