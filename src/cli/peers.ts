/**
 * `pi-tasks peers add NAME KEY | remove NAME | list [--json]`: the peers this identity trusts
 * (`$PI_TASKS_HOME/peers.json`, src/trust/peers.ts). A change takes effect in running Pis at once.
 *
 * JSON: add `{ok, peer, changed}` (`changed: false` when the same name and key were already
 * paired), remove `{ok, removed}`, list `{ok, path, peers}`; a peer is `{name, key, fingerprint,
 * addedAt}`. Wrong input is a typed error and changes nothing.
 */
import { parseArgs } from "node:util";
import { TaskError } from "../protocol/errors.ts";
import { type Env, piTasksHome } from "../relay-client/config.ts";
import { addPeer, listPeers, type Peer, peersPath, removePeer } from "../trust/peers.ts";
import { fingerprintOf, isPublicKeyText } from "../trust/keys.ts";
import { confirmOnTerminal } from "./confirm.ts";
import { table } from "../host/format.ts";

type Outcome = { value: unknown; json: boolean } | number;

export interface Subcommand {
  readonly usage: string;
  readonly summary: string;
}

export const PEERS_SUBCOMMANDS: Readonly<Record<"add" | "remove" | "list", Subcommand>> = {
  add: {
    usage: "pi-tasks peers add NAME KEY [--yes] [--json]",
    summary:
      "trust KEY (ed25519:…, from `pi-tasks identity` on the other side) as the peer NAME; asks you to confirm on this terminal (--yes: no question, for a script you run yourself; refused inside a Pi model's bash tool)",
  },
  remove: { usage: "pi-tasks peers remove NAME [--json]", summary: "stop trusting the peer NAME" },
  list: { usage: "pi-tasks peers list [--json]", summary: "the trusted peers: name, fingerprint, key, when added" },
};

function usage(message: string): TaskError {
  return new TaskError("CLI_USAGE", { message });
}

function isSubcommand(name: string | undefined): name is keyof typeof PEERS_SUBCOMMANDS {
  return name !== undefined && Object.hasOwn(PEERS_SUBCOMMANDS, name);
}

function peerTable(peers: readonly Peer[]): string {
  return table(
    ["NAME", "FINGERPRINT", "ADDED", "KEY"],
    peers.map((peer) => [peer.name, peer.fingerprint, peer.addedAt, peer.key]),
  );
}

function print(text: string): number {
  process.stdout.write(`${text}\n`);
  return 0;
}

/** Set by Pi for the commands its model runs with the bash tool (never for a person's own shell). */
const MODEL_SHELL_VARIABLE = "PI_SESSION_ID";

/**
 * Pairing is a person's decision: asked on the controlling terminal, or stated with `--yes` by a
 * person's own script. A Pi model's bash tool has no terminal, and `--yes` there is refused too.
 */
async function confirmPairing(name: string, key: string, yes: boolean, env: Env): Promise<void> {
  const refuse = (problem: string) =>
    new TaskError("PAIRING_NOT_CONFIRMED", {
      message: `${problem}: pairing is a person's decision — run it in your terminal and answer its question, or type /tasks pair in Pi`,
      details: { name },
    });
  if (env[MODEL_SHELL_VARIABLE] !== undefined) throw refuse("refused inside a Pi model's bash tool");
  if (yes) return;
  const fingerprint = isPublicKeyText(key) ? fingerprintOf(key) : undefined;
  if (fingerprint === undefined) return; // addPeer refuses the key with its own error
  const answer = await confirmOnTerminal(
    `Trust key ${fingerprint} as the peer "${name}"? Compare the fingerprint with the other side's \`pi-tasks identity\`.`,
  );
  if (answer === undefined) throw refuse("no terminal to ask (pass --yes when you run it yourself from a script)");
  if (!answer) throw refuse("not confirmed");
}

export async function peersCommand(args: readonly string[], env: Env): Promise<Outcome> {
  const sub = args[0];
  if (!isSubcommand(sub))
    throw usage(
      sub === undefined || sub.startsWith("-") ? "peers needs a subcommand: add, remove or list" : `unknown peers subcommand ${sub}`,
    );
  const { values, positionals } = parseArgs({
    args: args.slice(1),
    options: { json: { type: "boolean" }, yes: { type: "boolean" } },
    allowPositionals: true,
    strict: true,
  });
  if (values.yes === true && sub !== "add") throw usage("--yes belongs to peers add");
  const json = values.json === true;
  const home = piTasksHome(env);
  if (sub === "add") {
    if (positionals.length !== 2) throw usage("peers add needs exactly NAME and KEY");
    await confirmPairing(positionals[0]!, positionals[1]!, values.yes === true, env);
    const { peer, changed } = await addPeer(home, positionals[0]!, positionals[1]!);
    if (json) return { value: { ok: true, peer, changed }, json };
    return print(
      changed
        ? `Paired ${peer.name} (fingerprint ${peer.fingerprint}).`
        : `${peer.name} was already paired with this key (fingerprint ${peer.fingerprint}); nothing changed.`,
    );
  }
  if (sub === "remove") {
    if (positionals.length !== 1) throw usage("peers remove needs exactly one NAME");
    const removed = await removePeer(home, positionals[0]!);
    if (json) return { value: { ok: true, removed }, json };
    return print(`Removed ${removed.name} (fingerprint ${removed.fingerprint}).`);
  }
  if (positionals.length > 0) throw usage(`peers list takes no argument (got ${positionals[0]})`);
  const peers = listPeers(home);
  const path = peersPath(home);
  if (json) return { value: { ok: true, path, peers }, json };
  if (peers.length === 0)
    return print(`No peers in ${path}. Pair with \`pi-tasks peers add NAME KEY\` (KEY from \`pi-tasks identity\` on the other side).`);
  return print(peerTable(peers));
}
