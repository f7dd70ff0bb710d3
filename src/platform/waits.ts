/**
 * Waits whose timers never outlive them (a pending timer keeps Bun alive, and a process that should
 * have ended with it).
 */

/** Waiting with a deadline: `promise`'s value, or undefined when `ms` pass first. */
export async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([promise, expired]);
  } finally {
    clearTimeout(timer);
  }
}
