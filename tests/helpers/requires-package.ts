/**
 * `describe` for tests that need a program from a Debian package (testkit/debian-package.ts): run when
 * it is installed; otherwise skipped with a visible `skip: <label>: <binary> is not installed
 * (install the Debian package …)` line on stderr — but with `PI_TASKS_CI=1` (CI installs the
 * packages) a failing test takes their place.
 */
import { describe, test } from "bun:test";
import { CI_VARIABLE, packageMissingReason } from "../../testkit/debian-package.ts";

export function describeWithPackage(label: string, binary: string, debianPackage: string, body: () => void): void {
  const missing = packageMissingReason(binary, debianPackage);
  if (missing === undefined) {
    describe(label, body);
  } else if (process.env[CI_VARIABLE] === "1") {
    describe(label, () => {
      test(`${binary} is installed (${CI_VARIABLE}=1)`, () => {
        throw new Error(missing);
      });
    });
  } else {
    console.warn(`skip: ${label}: ${missing}`);
    describe.skip(label, body);
  }
}
