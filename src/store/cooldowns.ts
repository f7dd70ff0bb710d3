/**
 * Cooldowns (`cooldown`): until when something must not be retried, and why. The keys are the
 * caller's; the store only keeps them, so a deferral survives without a timer of its own.
 */
import type { StoreKernel } from "./kernel.ts";
import type { Cooldown, TaskStore } from "./store-types.ts";

export function createCooldowns({ rows }: StoreKernel): Pick<TaskStore, "setCooldown" | "getCooldown" | "clearCooldown"> {
  return {
    setCooldown: (key, cooldown) => rows.write("cooldown", key, cooldown),
    getCooldown: (key) => rows.read<Cooldown>("cooldown", key),
    clearCooldown(key) {
      rows.remove("cooldown", key);
    },
  };
}
