/**
 * What the lifecycle (lifecycle.ts) and each Pi run it starts (pi-run.ts) are given: a view of Pi's
 * context, captured fresh at each `session_start`, and the lifecycle's dependencies (Pi's message
 * calls, the worker gate, test seams). Kept apart so both files name them without importing each
 * other.
 */
import type { ensureRelay } from "../../src/host/embedded-relay.ts";
import type { createConfiguredTaskCore } from "../../src/core/configured.ts";
import type { Env } from "../../src/relay-client/config.ts";
import type { WorkerGate } from "./gate.ts";
import type { PresenterDeps } from "./presenter.ts";

/** What the lifecycle needs from Pi's context (captured fresh at each session_start). */
export interface PiContextView {
  readonly cwd: string;
  isIdle(): boolean;
  hasPendingMessages(): boolean;
  branch(): readonly unknown[];
  setStatus(key: string, text: string | undefined): void;
  /** Pi's widget above the editor (TUI), or a `setWidget` request (RPC); a no-op elsewhere. */
  setWidget?(key: string, lines: string[] | undefined): void;
  notify(message: string, level: "info" | "warning" | "error"): void;
  /** Aborts the running turn. */
  abort(): void;
  /** The interactive TUI's confirm dialog; undefined in RPC, print and json modes. */
  readonly confirm?: (title: string, message: string, timeoutMs: number) => Promise<boolean>;
}

export interface LifecycleDeps {
  readonly env: Env;
  readonly sendMessage: PresenterDeps["sendMessage"];
  readonly appendEntry: PresenterDeps["appendEntry"];
  readonly gate: WorkerGate;
  /** Called after each pass of the current Pi run (running workflows look at their steps at once). */
  readonly afterPass?: () => void;
  /** Test seam: how the configured core is built. */
  readonly createCore?: typeof createConfiguredTaskCore;
  /** Test seam: how the relay is found (or started). */
  readonly findRelay?: typeof ensureRelay;
}
