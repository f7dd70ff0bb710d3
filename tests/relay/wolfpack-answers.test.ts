/**
 * `pi-tasks conformance` agrees with Wolfpack: a relay answering the seven cases as Wolfpack's own
 * engine does (testkit/wolfpack-answers.ts, in front of our real relay) passes every check with no
 * features — the CLI, as a user runs it, reading the relay's (empty) advertised features — and, held
 * to our `strict-answers-v1`, fails exactly the seven strict checks (and the check that the feature is
 * advertised). Each of the seven rules was met during the plain run. Our relay passes the strict
 * checks (tests/relay/relay.test.ts runs every check with every feature it advertises).
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { type RelayProcess, REPO_ROOT, startRelayProcess } from "../../testkit/relay-process.ts";
import { startWolfpackAnswers, type WolfpackAnswers } from "../../testkit/wolfpack-answers.ts";
import { bunPath, CLI_ENTRY } from "../../src/host/pi-cli.ts";
import { conformanceChecks } from "../../src/conformance/checks.ts";
import { checkTitle } from "../../src/conformance/kit.ts";
import { runConformance } from "../../src/conformance/runner.ts";
import { FEATURE_STRICT_ANSWERS } from "../../src/protocol/wire.ts";

setDefaultTimeout(120_000);

let relay: RelayProcess;
let wolfpack: WolfpackAnswers;
beforeAll(async () => {
  relay = await startRelayProcess();
  wolfpack = await startWolfpackAnswers(relay.url);
});
afterAll(async () => {
  wolfpack?.stop();
  await relay?.stop();
});

test("with no features, `pi-tasks conformance URL` passes a relay that answers the seven cases as Wolfpack does", async () => {
  // Not spawnSync: the fixture answers from this process's event loop.
  const run = Bun.spawn([bunPath(), CLI_ENTRY, "conformance", wolfpack.url, "--json"], { cwd: REPO_ROOT, stdout: "pipe", stderr: "pipe" });
  const [stdout, status] = await Promise.all([new Response(run.stdout).text(), run.exited]);
  const result = JSON.parse(stdout) as { features: string[]; passed: number; failures: string[] };
  expect(result.features).toEqual([]);
  expect(result.failures).toEqual([]);
  expect(status).toBe(0);
  expect(result.passed).toBeGreaterThan(60);
  expect([...wolfpack.met.keys()].sort()).toEqual([1, 2, 3, 4, 5, 6, 7]);
});

test("held to strict-answers-v1 (which it does not advertise), exactly the seven strict checks fail there", async () => {
  const checks = conformanceChecks([FEATURE_STRICT_ANSWERS]);
  const strict = checks.filter((check) => check.feature === FEATURE_STRICT_ANSWERS).map(checkTitle);
  expect(strict).toHaveLength(7);
  const advertised = checks
    .map(checkTitle)
    .filter((title) => title.includes(`advertises every required feature (${FEATURE_STRICT_ANSWERS})`));
  expect(advertised).toHaveLength(1);
  const result = await runConformance({ url: wolfpack.url, features: [FEATURE_STRICT_ANSWERS] });
  // Any required addition also holds the relay to our rule that every error carries the epoch:
  // Wolfpack's capacity refusal has none, so the plain admission check fails there too.
  const admission = checks.map(checkTitle).filter((title) => title.startsWith("bounded admission > slow requests hold every slot"));
  expect(admission).toHaveLength(1);
  expect(result.failures.map((failure) => failure.name).sort()).toEqual([...strict, ...advertised, ...admission].sort());
});
