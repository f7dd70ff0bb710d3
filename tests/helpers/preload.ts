/**
 * Loaded before every test file (bunfig.toml):
 * - a test run keeps relay secrets, embedded relay records and their start locks
 *   (src/trust/relay-secret.ts) in a directory of its own, never in the user's
 *   `~/.pi/pi-tasks-relays`. Children inherit it through the environment; a test that names another
 *   directory for one process still can;
 * - Pi's agent directory (`PI_CODING_AGENT_DIR`) is one of the run's own, and `PI_TASKS_HOME` is
 *   unset (a test that wants a home names it): a Pi, or the extension loaded in the test process,
 *   that a test gives no home of its own keeps its identity and relay records there, never in the
 *   person's `~/.pi/agent`;
 * - the teardown check of every real Pi a test starts (tests/helpers/teardown-check.ts): global
 *   hooks, so no test file can leave it out — after each test, the Pis it stopped; after the last
 *   file, the Pis still running and the worker Pis not checked yet. A violation fails the run;
 * - after the last file, no relay the run started may still be running (tests/helpers/relay-leaks.ts):
 *   one that is fails the run, and is stopped; nor may the person's pi-tasks home exist if it did not before.
 */
import { afterAll, afterEach } from "bun:test";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { piTasksHome } from "../../src/relay-client/config.ts";
import { RELAY_SECRET_DIR_VARIABLE } from "../../src/trust/relay-secret.ts";
import { stopLeakedRelays } from "./relay-leaks.ts";
import { finishTeardownChecks, surfaceTeardownFailures } from "./teardown-check.ts";

if (process.env[RELAY_SECRET_DIR_VARIABLE] === undefined)
  process.env[RELAY_SECRET_DIR_VARIABLE] = mkdtempSync(join(tmpdir(), "pi-tasks-test-relays-"));
process.env.PI_CODING_AGENT_DIR = mkdtempSync(join(tmpdir(), "pi-tasks-test-agent-"));
delete process.env.PI_TASKS_HOME;
/** The person's own pi-tasks home: a run that finds none at its start leaves none. */
const PERSONS_HOME = piTasksHome({});
const personsHomeBefore = existsSync(PERSONS_HOME);

afterEach(() => surfaceTeardownFailures());
afterAll(async () => {
  await finishTeardownChecks();
  const leaked = stopLeakedRelays(process.env[RELAY_SECRET_DIR_VARIABLE]!);
  if (leaked !== undefined) throw new Error(leaked);
  if (!personsHomeBefore && existsSync(PERSONS_HOME)) throw new Error(`the test run made the person's pi-tasks home ${PERSONS_HOME}`);
}, 60_000);
