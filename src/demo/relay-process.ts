/**
 * Starts the real relay through its CLI (`bun src/bin/pi-tasks.ts relay --port 0`) as a child process
 * and stops it. The demo and the tests use this, so they run exactly what a user runs.
 */
import { type Subprocess, spawn } from "bun";
import { bunPath, CLI_ENTRY, PACKAGE_ROOT } from "../host/pi-cli.ts";
import { relayReadyTimeoutMs } from "../protocol/limits.ts";
import { within } from "../platform/waits.ts";

export const REPO_ROOT = PACKAGE_ROOT;
export { CLI_ENTRY };
export const BUN = bunPath();

export interface RelayProcess {
  readonly url: string;
  readonly epoch: string;
  readonly port: number;
  readonly process: Subprocess<"ignore", "pipe", "pipe">;
  /** Everything the relay wrote to stderr so far. */
  stderr(): string;
  /** SIGTERM, then wait for exit; resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number>;
}

export interface StartRelayOptions {
  /** The command before `relay …` (default: Bun running the sources, `bun src/bin/pi-tasks.ts`). */
  readonly command?: readonly string[];
  readonly port?: number;
  readonly args?: readonly string[];
  readonly env?: Record<string, string | undefined>;
  readonly readyTimeoutMs?: number;
}

export async function startRelayProcess(options: StartRelayOptions = {}): Promise<RelayProcess> {
  const child = spawn([...(options.command ?? [BUN, CLI_ENTRY]), "relay", "--port", String(options.port ?? 0), ...(options.args ?? [])], {
    cwd: REPO_ROOT,
    env: { ...process.env, WOLFPACK_JWT_SECRET: "", ...options.env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  let stderrText = "";
  void (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of child.stderr) stderrText += decoder.decode(chunk, { stream: true });
  })();
  const reader = child.stdout.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  const deadline = Date.now() + (options.readyTimeoutMs ?? relayReadyTimeoutMs);
  while (!buffered.includes("\n")) {
    const remaining = deadline - Date.now();
    if (remaining <= 0) break;
    const chunk = await within(reader.read(), remaining);
    if (chunk === undefined || chunk.done) break;
    buffered += decoder.decode(chunk.value, { stream: true });
  }
  reader.releaseLock();
  const line = buffered.split("\n")[0] ?? "";
  let ready: { event?: string; url?: string; epoch?: string } = {};
  try {
    ready = JSON.parse(line);
  } catch {
    child.kill("SIGKILL");
    throw new Error(`relay did not start: stdout=${JSON.stringify(buffered)} stderr=${JSON.stringify(stderrText)}`);
  }
  if (ready.event !== "listening" || ready.url === undefined || ready.epoch === undefined) {
    child.kill("SIGKILL");
    throw new Error(`unexpected relay readiness line: ${line}`);
  }
  const url = ready.url;
  return {
    url,
    epoch: ready.epoch,
    port: Number(new URL(url).port),
    process: child,
    stderr: () => stderrText,
    async stop(signal = "SIGTERM") {
      if (child.exitCode !== null) return child.exitCode;
      child.kill(signal);
      return await child.exited;
    },
  };
}
