/**
 * Own intents (`intent`): each intent this endpoint signed, with the envelope that carries it, so
 * a repeated intent is recognised and its delivery can be followed.
 */
import type { StoreKernel } from "./kernel.ts";
import type { StoredIntent, TaskStore } from "./store-types.ts";

export interface Intents {
  readonly api: Pick<TaskStore, "putIntent" | "getIntent">;
  /** Forgets every intent of a task. */
  discardOfTask(taskId: string): void;
}

export function createIntents({ rows }: StoreKernel): Intents {
  return {
    api: {
      putIntent(intent, envelopeId) {
        return rows.transaction(() => {
          if (rows.has("intent", intent.intentId)) return false;
          rows.write("intent", intent.intentId, { intent, envelopeId } satisfies StoredIntent);
          return true;
        });
      },
      getIntent: (intentId) => rows.read<StoredIntent>("intent", intentId),
    },
    discardOfTask(taskId) {
      for (const intentId of [...rows.keys("intent")])
        if (rows.peek<StoredIntent>("intent", intentId)!.intent.taskId === taskId) rows.remove("intent", intentId);
    },
  };
}
