/**
 * Processes of this machine as the rest of pi-tasks asks about them: whether one exists.
 */

/** Whether a process exists (signal 0; a process of another user answers EPERM, and exists). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
