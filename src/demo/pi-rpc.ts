/**
 * A real Pi 1.6 CLI in `--mode rpc` under Bun, driven over its JSONL stdin/stdout, with this
 * extension loaded. Scripted Pis (demo, tests) get an isolated `PI_CODING_AGENT_DIR` and the faux
 * model; a real model uses the user's Pi configuration.
 */
import { type Subprocess, spawn } from "bun";
import { mkdtempSync, rmSync } from "node:fs";
import { nanoid } from "nanoid";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type PiLaunch, piCommand, piRpcArgs, scriptedEnv } from "../host/pi-cli.ts";
import { diagnosticTailChars } from "../protocol/limits.ts";
import { within } from "../platform/waits.ts";

export type RpcRecord = Record<string, unknown> & { readonly type: string };

/**
 * Reads a JSONL stream (split on "\n" only, as Pi's RPC stream requires): each non-empty line
 * becomes a record (`{type:"unparsed", line}` when it is not JSON); `onChunk` runs after each chunk.
 */
export async function readJsonLines(
  stream: ReadableStream<Uint8Array>,
  onRecord: (record: RpcRecord) => void,
  onChunk: () => void = () => undefined,
): Promise<void> {
  const decoder = new TextDecoder();
  let buffered = "";
  const emit = (line: string) => {
    if (line.length === 0) return;
    try {
      onRecord(JSON.parse(line) as RpcRecord);
    } catch {
      onRecord({ type: "unparsed", line });
    }
  };
  for await (const chunk of stream) {
    buffered += decoder.decode(chunk, { stream: true });
    let newline = buffered.indexOf("\n");
    while (newline >= 0) {
      emit(buffered.slice(0, newline).trim());
      buffered = buffered.slice(newline + 1);
      newline = buffered.indexOf("\n");
    }
    onChunk();
  }
  emit(buffered.trim());
  onChunk();
}

export interface RecordWait {
  readonly from?: number;
  readonly timeoutMs: number;
  /** Text added to a timeout or exit error. */
  diagnostics(): string;
  /** When given, a process that exited without the record fails the wait at once. */
  exited?(): number | null;
}

/**
 * The first record (from `options.from`) matching `predicate`, re-checked whenever a listener in
 * `listeners` is called; rejects after `timeoutMs`, when the process exited, or when the predicate
 * throws (a throwing predicate fails this wait, never the reader).
 */
export function waitForRecord<R extends RpcRecord>(
  records: readonly R[],
  listeners: Set<() => void>,
  predicate: (record: R) => boolean,
  options: RecordWait,
): Promise<R> {
  return new Promise((resolve, reject) => {
    let index = Math.max(0, options.from ?? 0);
    const check = () => {
      try {
        for (; index < records.length; index += 1) {
          if (predicate(records[index]!)) {
            cleanup();
            resolve(records[index]!);
            return;
          }
        }
      } catch (error) {
        cleanup();
        reject(error);
        return;
      }
      const code = options.exited?.();
      if (code !== undefined && code !== null) {
        cleanup();
        reject(new Error(`Pi exited with ${code}; ${options.diagnostics()}`));
      }
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`timed out after ${options.timeoutMs} ms; ${options.diagnostics()}`));
    }, options.timeoutMs);
    const cleanup = () => {
      clearTimeout(timer);
      listeners.delete(check);
    };
    listeners.add(check);
    check();
  });
}

/** Reads a text stream chunk by chunk. */
export async function readText(stream: ReadableStream<Uint8Array>, onText: (text: string) => void): Promise<void> {
  const decoder = new TextDecoder();
  for await (const chunk of stream) onText(decoder.decode(chunk, { stream: true }));
}

export interface PiRpcOptions extends PiLaunch {
  /** `WOLFPACK_SESSION_NAME` (omit to run without a relay identity). */
  readonly session?: string;
  readonly relayUrl: string;
  readonly worker?: boolean;
  readonly cwd: string;
  readonly env?: Record<string, string | undefined>;
  readonly extraArgs?: readonly string[];
}

export interface PiRpc {
  /** RPC records in arrival order, each stamped with `receivedAt` (ms, wall clock). */
  readonly records: (RpcRecord & { readonly receivedAt: number })[];
  readonly process: Subprocess<"pipe", "pipe", "pipe">;
  stderr(): string;
  command(command: Record<string, unknown>): void;
  prompt(message: string): void;
  /** The first record from index `from` matching, or a rejection after `timeoutMs`. */
  waitFor(predicate: (record: RpcRecord) => boolean, timeoutMs: number, from?: number): Promise<RpcRecord>;
  /** Closes stdin (Pi shuts down), waits for the exit code, kills after `graceMs`. */
  stop(graceMs: number): Promise<number>;
}

/** Pi's RPC stream on a child process: its records (stamped on arrival), its stderr, commands in, waits. */
export type RpcChannel = Pick<PiRpc, "records" | "stderr" | "command" | "waitFor">;

/** Reads `child`'s RPC stdout and stderr from now on; commands go to its stdin (one JSON line each). */
export function rpcChannel(child: Subprocess<"pipe", "pipe", "pipe">): RpcChannel {
  const records: PiRpc["records"] = [];
  const listeners = new Set<() => void>();
  let stderrText = "";
  void readJsonLines(
    child.stdout,
    (record) => records.push({ ...record, receivedAt: Date.now() }),
    () => {
      for (const listener of [...listeners]) listener();
    },
  );
  void readText(child.stderr, (text) => {
    stderrText += text;
  });
  return {
    records,
    stderr: () => stderrText,
    command(value) {
      child.stdin.write(`${JSON.stringify(value)}\n`);
      child.stdin.flush();
    },
    waitFor: (predicate, timeoutMs, from = 0) =>
      waitForRecord(records, listeners, predicate, {
        from,
        timeoutMs,
        exited: () => child.exitCode,
        diagnostics: () =>
          `last records: ${JSON.stringify(records.slice(-5).map((record) => record.type))}\nstderr: ${stderrText.slice(-diagnosticTailChars)}`,
      }),
  };
}

export function startPiRpc(options: PiRpcOptions): PiRpc {
  const scripted = options.script !== undefined;
  const agentDir = scripted ? mkdtempSync(join(tmpdir(), "pi-tasks-agent-")) : undefined;
  const env: Record<string, string | undefined> = {
    ...process.env,
    ...(agentDir === undefined ? {} : { PI_CODING_AGENT_DIR: agentDir }),
    ...scriptedEnv(options),
    PI_TASKS_RELAY_URL: options.relayUrl,
    WOLFPACK_SESSION_NAME: options.session,
    PI_TASK_WORKER: options.worker ? "1" : undefined,
    ...options.env,
  };
  const child = spawn([...piCommand(env), ...piRpcArgs(options), ...(options.extraArgs ?? [])], {
    cwd: options.cwd,
    env,
    stdin: "pipe",
    stdout: "pipe",
    stderr: "pipe",
  });
  const channel = rpcChannel(child);
  return {
    ...channel,
    process: child,
    prompt: (message) => channel.command({ id: nanoid(), type: "prompt", message }),
    async stop(graceMs) {
      if (child.exitCode === null) {
        try {
          child.stdin.end();
        } catch {
          // already closed
        }
        const exited = await within(child.exited, graceMs);
        if (exited === undefined) child.kill("SIGKILL");
      }
      const code = await child.exited;
      if (agentDir !== undefined) rmSync(agentDir, { recursive: true, force: true });
      return code;
    },
  };
}
