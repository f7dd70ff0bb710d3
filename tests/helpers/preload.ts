/**
 * Loaded before every test file (bunfig.toml): a test run keeps relay secrets, embedded relay
 * records and their start locks (src/trust/relay-secret.ts) in a directory of its own, never in
 * the user's `~/.pi/pi-tasks-relays`. Children inherit it through the environment; a test that
 * names another directory for one process still can.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RELAY_SECRET_DIR_VARIABLE } from "../../src/trust/relay-secret.ts";

if (process.env[RELAY_SECRET_DIR_VARIABLE] === undefined)
  process.env[RELAY_SECRET_DIR_VARIABLE] = mkdtempSync(join(tmpdir(), "pi-tasks-test-relays-"));
