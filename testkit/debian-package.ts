/**
 * Tests that need a program from a Debian package (tmux for the TUI tests, redis-server for the
 * Redis store): where the program is, and why the tests cannot run without it. `.ci/run` installs
 * the packages; `describeWithPackage` (tests/helpers/requires-package.ts) skips visibly, or fails
 * under `PI_TASKS_CI=1`.
 */

/** The environment variable that makes a missing package a failure instead of a skip (CI). */
export const CI_VARIABLE = "PI_TASKS_CI";

const found = new Map<string, string | null>();

/** Absolute path of `binary` on PATH, or undefined. */
export function packageBinary(binary: string): string | undefined {
  if (!found.has(binary)) found.set(binary, Bun.which(binary));
  return found.get(binary) ?? undefined;
}

/** Why a test needing `binary` cannot run here (naming the Debian package that provides it), or undefined when it can. */
export function packageMissingReason(binary: string, debianPackage: string): string | undefined {
  if (packageBinary(binary) !== undefined) return undefined;
  return `${binary} is not installed (install the Debian package \`${debianPackage}\`: apt-get install -y ${debianPackage})`;
}

/** The path of `binary`, or an error naming the Debian package to install. */
export function requirePackageBinary(binary: string, debianPackage: string): string {
  const path = packageBinary(binary);
  if (path === undefined) throw new Error(packageMissingReason(binary, debianPackage));
  return path;
}
