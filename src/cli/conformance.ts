/**
 * `pi-tasks conformance URL [--features watch-v1,successor-v1] [--json]`
 *
 * Checks the relay at URL against the `volatile-v1` wire (docs/wire.md) with the shipped
 * conformance suite (src/conformance/), run in this process (Node or Bun). `--features` names the
 * additions the relay must have; default: what its profile advertises (none for a plain Wolfpack
 * relay, which is then checked against Wolfpack's wire only). Each check's result goes to stderr
 * as it ends (`(pass) group > name [12 ms]`, `(fail) …` with its message, `(skip) …`). The checks'
 * requests carry the credentials the user has for that relay (its relay secret, or the Wolfpack
 * JWT), so the relay Pi started is checked as it is. Stdout gets
 * the failed checks and, last, `conformance: P passed, F failed` — or, with `--json`, one JSON
 * object. Exits 0 only when no check failed. A URL where no relay answers fails before any check
 * runs.
 */
import { parseArgs } from "node:util";
import { parseFeatures, runConformance } from "../conformance/runner.ts";
import { TaskError } from "../protocol/errors.ts";
import { normaliseRelayUrl } from "../relay-client/config.ts";
import { identifyServer } from "../relay-client/identify.ts";
import { createRelayTransport } from "../relay-client/transport.ts";
import { useCredentials } from "../conformance/wire-client.ts";
import { authFromEnv, type RelayAuth, relaySecretFor, tokenFor } from "../relay-client/auth.ts";
import { signRelayToken } from "../protocol/jwt.ts";

type Env = Record<string, string | undefined>;

/** The features the relay's profile advertises; a URL where no relay answers is refused here, clearly. */
async function advertisedFeatures(url: string, auth: RelayAuth | undefined): Promise<string[]> {
  const transport = createRelayTransport({ baseUrl: url, ...(auth === undefined ? {} : { auth }) });
  try {
    const profile = await transport.profile();
    return Array.isArray(profile.features) ? profile.features.filter((item): item is string => typeof item === "string") : [];
  } catch (error) {
    const failure = error instanceof TaskError ? error : new TaskError("RELAY_UNAVAILABLE", { details: { cause: String(error) } });
    const cause = typeof failure.details.cause === "string" ? `: ${failure.details.cause}` : "";
    // What answers there instead, in words (a Wolfpack with only its v2 task relay, another server).
    const found = failure.code === "RELAY_UNAVAILABLE" || failure.code === "RELAY_TIMEOUT" ? undefined : await identifyServer(url);
    const there = found === undefined || found.kind === "none" ? "" : ` — ${found.words} answers there`;
    throw new TaskError(found?.kind === "wolfpack-v2" ? "RELAY_NOT_VOLATILE" : failure.code, {
      message: `no volatile-v1 relay answers at ${url} (${failure.code}${cause})${there}; nothing was checked`,
      details: { url, ...failure.details, ...(found === undefined ? {} : { answeredBy: found.kind }) },
    });
  } finally {
    transport.close();
  }
}

/**
 * The credentials the user has for the relay at `url` go with every check's request: the relay
 * secret of a relay pi-tasks started (a fresh relay token each request), else a Wolfpack JWT (one,
 * reusable for its lifetime: longer than a run of the suite).
 */
async function withCredentialsOf(url: string, auth: RelayAuth | undefined): Promise<void> {
  const relay = relaySecretFor(auth, url);
  if (relay !== undefined) {
    useCredentials(url, () => `Bearer ${signRelayToken(relay.keys)}`);
    return;
  }
  const token = auth === undefined ? undefined : await tokenFor(auth, url);
  if (token !== undefined) useCredentials(url, () => `Bearer ${token}`);
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
  const auth = authFromEnv(env, url);
  const advertised = await advertisedFeatures(url, auth);
  await withCredentialsOf(url, auth);
  const features = values.features === undefined ? advertised : parseFeatures(values.features);
  const json = values.json === true;
  const result = await runConformance({ url, features, onOutput: (text) => process.stderr.write(text) });
  const { passed, failed, skipped, elapsedMs } = result;
  const failures = result.failures.map((failure) => failure.name);
  const failureMessages = result.failures.map((failure) => failure.message);
  const summary = { ok: failed === 0, url, features, advertised, passed, failed, skipped, failures, failureMessages, elapsedMs };
  if (json) process.stdout.write(`${JSON.stringify(summary)}\n`);
  else {
    for (const name of failures) process.stdout.write(`failed: ${name}\n`);
    if (skipped > 0)
      process.stdout.write(`skipped: ${skipped} checks of additions not required (features: ${features.join(",") || "none"})\n`);
    process.stdout.write(`conformance: ${passed} passed, ${failed} failed\n`);
  }
  return failed === 0 ? 0 : 1;
}
