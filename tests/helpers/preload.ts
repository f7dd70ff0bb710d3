/**
 * Loaded before every test file (bunfig.toml):
 * - a test run keeps relay secrets, embedded relay records and their start locks
 *   (src/trust/relay-secret.ts) in a directory of its own, never in the user's
 *   `~/.pi/pi-tasks-relays`. Children inherit it through the environment; a test that names another
 *   directory for one process still can;
 * - the teardown check of every real Pi a test starts (tests/helpers/teardown-check.ts): global
 *   hooks, so no test file can leave it out — after each test, the Pis it stopped; after the last
 *   file, the Pis still running and the worker Pis not checked yet. A violation fails the run;
 * - after the last file, no relay the run started may still be running (tests/helpers/relay-leaks.ts):
 *   one that is fails the run, and is stopped.
 */
import { afterAll, afterEach } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RELAY_SECRET_DIR_VARIABLE } from "../../src/trust/relay-secret.ts";
import { stopLeakedRelays } from "./relay-leaks.ts";
import { finishTeardownChecks, surfaceTeardownFailures } from "./teardown-check.ts";

if (process.env[RELAY_SECRET_DIR_VARIABLE] === undefined)
  process.env[RELAY_SECRET_DIR_VARIABLE] = mkdtempSync(join(tmpdir(), "pi-tasks-test-relays-"));

afterEach(() => surfaceTeardownFailures());
afterAll(async () => {
  await finishTeardownChecks();
  const leaked = stopLeakedRelays(process.env[RELAY_SECRET_DIR_VARIABLE]!);
  if (leaked !== undefined) throw new Error(leaked);
}, 60_000);
