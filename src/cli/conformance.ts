/**
 * `pi-tasks conformance URL [--features watch-v1,successor-v1] [--json]`
 *
 * Checks the relay at URL against the `volatile-v1` wire (docs/wire.md) with the shipped
 * conformance suite (src/conformance/). `--features` names the additions the relay must have;
 * default: what its profile advertises (none for a plain Wolfpack relay, which is then checked
 * against Wolfpack's wire only). bun's test output goes to stderr; stdout gets the failed checks
 * and, last, `conformance: P passed, F failed` — or, with `--json`, one JSON object. Exits 0 only
 * when no check failed. A URL where no relay answers fails before any check runs.
 */
import { parseArgs } from "node:util";
import { parseFeatures, runConformance } from "../conformance/runner.ts";
import { TaskError } from "../protocol/errors.ts";
import { normaliseRelayUrl } from "../relay-client/config.ts";
import { createRelayTransport } from "../relay-client/transport.ts";
import { bunPath } from "./pi-cli.ts";

type Env = Record<string, string | undefined>;

/** The features the relay's profile advertises; a URL where no relay answers is refused here, clearly. */
async function advertisedFeatures(url: string): Promise<string[]> {
  const transport = createRelayTransport({ baseUrl: url });
  try {
    const profile = await transport.profile();
    return Array.isArray(profile.features) ? profile.features.filter((item): item is string => typeof item === "string") : [];
  } catch (error) {
    const failure = error instanceof TaskError ? error : new TaskError("RELAY_UNAVAILABLE", { details: { cause: String(error) } });
    const cause = typeof failure.details.cause === "string" ? `: ${failure.details.cause}` : "";
    throw new TaskError(failure.code, {
      message: `no volatile-v1 relay answers at ${url} (${failure.code}${cause}); nothing was checked`,
      details: { url, ...failure.details },
    });
  } finally {
    transport.close();
  }
}

export async function conformanceCommand(args: readonly string[], env: Env): Promise<number> {
  const { values, positionals } = parseArgs({
    args: [...args],
    options: { features: { type: "string" }, json: { type: "boolean" } },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length !== 1) throw new TaskError("CLI_USAGE", { message: "conformance needs exactly one relay URL" });
  const url = normaliseRelayUrl(positionals[0]!);
  const advertised = await advertisedFeatures(url);
  const features = values.features === undefined ? advertised : parseFeatures(values.features);
  const json = values.json === true;
  const result = await runConformance({ url, features, bun: bunPath(), env, onOutput: (text) => process.stderr.write(text) });
  if (result.passed + result.failed === 0) {
    throw new TaskError("TASK_ERROR", {
      message: `bun test ran no conformance check (exit code ${result.exitCode}); see its output above`,
      details: { url, exitCode: result.exitCode },
    });
  }
  // bun failing without a failed check (it should not happen) still fails the run.
  const failed = result.exitCode !== 0 && result.failed === 0 ? 1 : result.failed;
  const summary = { ok: failed === 0, url, features, advertised, passed: result.passed, failed, skipped: result.skipped, failures: result.failures, elapsedMs: result.elapsedMs };
  if (json) process.stdout.write(`${JSON.stringify(summary)}\n`);
  else {
    for (const name of result.failures) process.stdout.write(`failed: ${name}\n`);
    if (result.skipped > 0) process.stdout.write(`skipped: ${result.skipped} checks of additions not required (features: ${features.join(",") || "none"})\n`);
    process.stdout.write(`conformance: ${result.passed} passed, ${failed} failed\n`);
  }
  return failed === 0 ? 0 : 1;
}
