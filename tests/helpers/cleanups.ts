/**
 * Steps a test file runs after each test, last registered first, each one's failure ignored (a
 * cleanup never hides the test's own outcome): `const cleanups = useCleanups(); cleanups.push(stop)`.
 */
import { afterEach } from "bun:test";

export function useCleanups(): (() => unknown)[] {
  const steps: (() => unknown)[] = [];
  afterEach(async () => {
    for (const step of steps.splice(0).reverse())
      await Promise.resolve()
        .then(step)
        .catch(() => undefined);
  });
  return steps;
}
