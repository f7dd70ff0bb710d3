/**
 * Running a command to its exit under a deadline: exit code, output and timing; the command is
 * killed (SIGKILL) when the deadline passes, and the result says so.
 */
import { type Subprocess, spawn } from "bun";

export interface Exited {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
  /** Killed at the deadline. */
  readonly killed: boolean;
  readonly startedAt: number;
  /** `Date.now()` when the process exited. */
  readonly exitedAt: number;
}

export interface RunToExitOptions {
  readonly cwd: string;
  readonly env: Record<string, string | undefined>;
  readonly timeoutMs: number;
  /** Called every 20 ms while the command runs (e.g. to catch a file that exists only meanwhile). */
  readonly whileRunning?: () => void;
  /** Sees the child as soon as it is spawned (e.g. to kill it in a cleanup). */
  readonly onSpawn?: (child: Subprocess) => void;
}

export async function runToExit(command: readonly string[], options: RunToExitOptions): Promise<Exited> {
  const startedAt = Date.now();
  const child = spawn([...command], { cwd: options.cwd, env: options.env, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  options.onSpawn?.(child);
  const stdout = new Response(child.stdout).text();
  const stderr = new Response(child.stderr).text();
  let killed = false;
  const timer = setTimeout(() => {
    killed = true;
    child.kill("SIGKILL");
  }, options.timeoutMs);
  const poller = options.whileRunning === undefined ? undefined : setInterval(options.whileRunning, 20);
  try {
    const code = await child.exited;
    const exitedAt = Date.now();
    return { code, stdout: await stdout, stderr: await stderr, killed, startedAt, exitedAt };
  } finally {
    clearTimeout(timer);
    if (poller !== undefined) clearInterval(poller);
  }
}
