/**
 * What a worker this Pi spawned did on a task, inside Pi (issue 39): `/tasks <id>` of a task sent to
 * it ends with the newest lines of its readable transcript (src/host/transcript.ts: what arrived, what
 * its model said, which tools it called and what they answered) — no log file to open. The worker is
 * found by its spawn record: the endpoint it registered, or the session name the relay lists for the
 * task's target. At most `maxShownTranscriptLines` lines, read from the last `maxTranscriptTailBytes`.
 */
import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import type { TaskView } from "../../src/core/task-core.ts";
import { listSpawned, type SpawnedWorker } from "../../src/host/spawned.ts";
import { endpointKey, sameEndpoint } from "../../src/protocol/endpoint.ts";
import { maxShownTranscriptLines, maxTranscriptTailBytes } from "../../src/protocol/limits.ts";
import type { Env } from "../../src/relay-client/config.ts";
import type { PeerNames } from "./board.ts";

/** The last `maxTranscriptTailBytes` of a file, as text (undefined when it cannot be read). */
function tail(path: string): string | undefined {
  let fd: number | undefined;
  try {
    fd = openSync(path, "r");
    const size = fstatSync(fd).size;
    const length = Math.min(size, maxTranscriptTailBytes);
    const buffer = Buffer.alloc(length);
    readSync(fd, buffer, 0, length, size - length);
    return buffer.toString("utf8");
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

function spawnedFor(env: Env, task: TaskView, names: PeerNames): SpawnedWorker | undefined {
  const session = names.get(endpointKey(task.target));
  return listSpawned(env).find(
    (worker) => (worker.taskEndpoint !== undefined && sameEndpoint(worker.taskEndpoint, task.target)) || worker.session === session,
  );
}

/** The newest transcript lines of the spawned worker a task went to; none for other tasks. */
export function workerTranscriptLines(env: Env, task: TaskView, names: PeerNames): string[] {
  if (task.role !== "origin") return [];
  const worker = spawnedFor(env, task, names);
  if (worker === undefined) return [];
  const text = tail(worker.log);
  if (text === undefined) return [`  worker transcript: ${worker.log} cannot be read`];
  // A partial first line (the tail cut into it) is dropped.
  const lines = text
    .split("\n")
    .slice(text.length === maxTranscriptTailBytes ? 1 : 0)
    .filter((line) => line.trim() !== "");
  return [
    `  worker transcript (${worker.session}, newest ${Math.min(lines.length, maxShownTranscriptLines)} lines of ${worker.log}):`,
    ...lines.slice(-maxShownTranscriptLines).map((line) => `    ${line}`),
  ];
}
