/**
 * What every `agent_task_*` tool shares: its definition shape, what it may use of the lifecycle,
 * and how results and errors are written. Errors come back as `isError: true` results carrying
 * `code`, `retryable` and `details`, never as throws into Pi.
 */
import type { TSchema } from "@sinclair/typebox";
import type { TaskCore } from "../../../src/core/task-core.ts";
import { toTaskError } from "../../../src/protocol/errors.ts";
import type { TaskEndpoint, ToolName } from "../../../src/protocol/schemas.ts";
import type { SessionInfo } from "../lifecycle.ts";
import { renderError } from "../render.ts";

export interface ToolResult {
  content: { type: "text"; text: string }[];
  details: Record<string, unknown>;
  isError?: boolean;
  terminate?: boolean;
}

/** What a tool may know of the Pi session calling it. */
export interface ToolContext {
  readonly cwd?: string;
  readonly model?: { readonly provider: string; readonly id: string };
}

export interface ToolDeps {
  /** Runs an operation on the current lifetime once start-up finished (relay loss schedules recovery). */
  run<T>(operation: (core: TaskCore) => Promise<T>): Promise<T>;
  /** The current lifetime, or a typed error explaining why there is none. */
  current(): TaskCore;
  /** Resolves when start-up finished. */
  ready(): Promise<void>;
  /** Asks the background scheduler for an immediate (coalesced) refresh. */
  requestRefresh(): void;
  /** This session's name and relay, once started. */
  info(): SessionInfo | undefined;
  /** Remembers a peer's session name for the board. */
  rememberPeer(session: string, endpoint: TaskEndpoint): void;
}

export interface TaskToolDefinition {
  readonly name: ToolName;
  readonly label: string;
  readonly description: string;
  readonly promptSnippet: string;
  readonly promptGuidelines: string[];
  readonly parameters: TSchema;
  execute(toolCallId: string, params: unknown, signal: AbortSignal | undefined, context?: ToolContext): Promise<ToolResult>;
}

export const RELAY_ACCEPTANCE_ONLY = "delivery: relay acceptance only — not execution.";

export function ok(text: string, details: Record<string, unknown>, extra: Partial<ToolResult> = {}): ToolResult {
  return { content: [{ type: "text", text }], details, ...extra };
}

export function errorResult(error: unknown): ToolResult {
  const shape = toTaskError(error).toJSON();
  return { content: [{ type: "text", text: renderError(shape) }], details: { error: shape }, isError: true };
}

export function lines(...items: (string | undefined)[]): string {
  return items.filter((item) => item !== undefined).join("\n");
}

/** Runs a tool body; any failure becomes an error result. */
export async function guarded(work: () => Promise<ToolResult>): Promise<ToolResult> {
  try {
    return await work();
  } catch (error) {
    return errorResult(error);
  }
}
