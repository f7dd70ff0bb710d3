/**
 * CPU time spent by a process, for attributing a workload's cost to the bench process (the
 * clients) or to a child (the relay). The bench process reads its own through
 * `process.cpuUsage()`; a child's comes from `/proc/<pid>/stat` (Linux only; undefined elsewhere).
 */
import { readFileSync } from "node:fs";

/** Kernel clock ticks per second in `/proc/<pid>/stat` (USER_HZ, 100 on Linux). */
const CLOCK_TICKS_PER_SECOND = 100;
const MS_PER_SECOND = 1_000;
const MICROS_PER_MS = 1_000;
/** Fields of `/proc/<pid>/stat` after the command name: utime and stime are the 12th and 13th. */
const UTIME_FIELD = 11;
const STIME_FIELD = 12;

/** CPU milliseconds (user + system) this process has used. */
export function ownCpuMs(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / MICROS_PER_MS;
}

/** CPU milliseconds (user + system) of process `pid` (10 ms resolution), or undefined when unreadable. */
export function childCpuMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name is in parentheses and may contain spaces: fields start after the last ")".
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const ticks = Number(fields[UTIME_FIELD]) + Number(fields[STIME_FIELD]);
    return Number.isFinite(ticks) ? (ticks * MS_PER_SECOND) / CLOCK_TICKS_PER_SECOND : undefined;
  } catch {
    return undefined;
  }
}
