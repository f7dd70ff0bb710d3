/**
 * `pi-tasks identity [--json]`: this installation's identity (created on first use): its public
 * key, fingerprint and file, and how a peer pairs with it. Every Pi with the same PI_TASKS_HOME is
 * this identity. JSON: `{ok, publicKey, fingerprint, path, created}`.
 */
import { parseArgs } from "node:util";
import { TaskError } from "../protocol/errors.ts";
import { type Env, piTasksHome } from "../relay-client/config.ts";
import { ensureIdentity } from "../trust/identity.ts";

export async function identityCommand(args: readonly string[], env: Env): Promise<{ value: unknown; json: boolean } | number> {
  const { values, positionals } = parseArgs({
    args: [...args],
    options: { json: { type: "boolean" } },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length > 0) throw new TaskError("CLI_USAGE", { message: `identity takes no argument (got ${positionals[0]})` });
  const { identity, path, created } = ensureIdentity(piTasksHome(env));
  const value = { ok: true, publicKey: identity.publicKey, fingerprint: identity.fingerprint, path, created };
  if (values.json === true) return { value, json: true };
  process.stdout.write(
    [
      created ? "Created this installation's identity." : "This installation's identity:",
      `  public key:  ${identity.publicKey}`,
      `  fingerprint: ${identity.fingerprint}`,
      `  file:        ${path}`,
      "",
      "Every Pi with this PI_TASKS_HOME is this identity. To pair, run on the other side:",
      `  pi-tasks peers add <name> ${identity.publicKey}`,
      "and add the other side's key here with `pi-tasks peers add <its name> <its key>`.",
      "",
    ].join("\n"),
  );
  return 0;
}
