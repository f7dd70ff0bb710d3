/**
 * `pi-tasks identity` and `pi-tasks peers add|remove|list` through the real CLI, with
 * PI_TASKS_HOME in a temporary directory: the happy paths in text and `--json`, `--help` per
 * command and subcommand, and wrong input (typed error, exit code, nothing changed).
 */
import { afterEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { chmodSync, existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { fingerprintOf, generateIdentity } from "../../src/trust/keys.ts";
import { BUN, CLI_ENTRY, type CliRun, type CliSandbox, createCliSandbox, jsonOf } from "../helpers/cli-kit.ts";

setDefaultTimeout(60_000);

let sandbox: CliSandbox | undefined;
afterEach(async () => {
  await sandbox?.cleanup();
  sandbox = undefined;
});

function box(): CliSandbox {
  sandbox = createCliSandbox("pi-tasks-trust-cli-");
  return sandbox;
}

const key = () => generateIdentity().identity.publicKey;

/** peers.json of the sandbox, or undefined when there is none. */
function peersFile(sandboxed: CliSandbox): string | undefined {
  const path = join(sandboxed.stateDir, "peers.json");
  return existsSync(path) ? readFileSync(path, "utf8") : undefined;
}

function expectFailure(run: CliRun, code: string, exit = 1): void {
  expect({ exit: run.code, code: jsonOf(run).error?.code, ok: jsonOf(run).ok }).toEqual({ exit, code, ok: false });
}

describe("pi-tasks identity", () => {
  test("--json creates the identity on first use, then shows the same one", async () => {
    const sandboxed = box();
    const first = await sandboxed.run(["identity", "--json"]);
    expect(first.code).toBe(0);
    expect(first.stderr).toBe("");
    const shown = jsonOf(first);
    const path = join(sandboxed.stateDir, "identity.json");
    expect(shown).toEqual({
      ok: true,
      publicKey: expect.stringMatching(/^ed25519:[A-Za-z0-9_-]{43}$/),
      fingerprint: expect.any(String),
      path,
      created: true,
    });
    expect(shown.fingerprint).toBe(fingerprintOf(shown.publicKey));
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(path, "utf8")).publicKey).toBe(shown.publicKey);

    const again = jsonOf(await sandboxed.run(["identity", "--json"]));
    expect(again).toEqual({ ...shown, created: false });
  });

  test("the text shows the key, fingerprint and file, and how the other side pairs", async () => {
    const sandboxed = box();
    const { publicKey, fingerprint, path } = jsonOf(await sandboxed.run(["identity", "--json"]));
    const run = await sandboxed.run(["identity"]);
    expect(run.code).toBe(0);
    expect(run.stderr).toBe("");
    expect(run.stdout).toContain(publicKey);
    expect(run.stdout).toContain(fingerprint);
    expect(run.stdout).toContain(path);
    expect(run.stdout).toContain(`pi-tasks peers add <name> ${publicKey}`);
    expect(run.stdout).toContain("PI_TASKS_HOME");
  });

  test("a bad identity file is IDENTITY_INVALID (exit 1), not replaced", async () => {
    const sandboxed = box();
    const { path } = jsonOf(await sandboxed.run(["identity", "--json"]));
    const text = readFileSync(path, "utf8");
    chmodSync(path, 0o644);
    const exposed = await sandboxed.run(["identity", "--json"]);
    expectFailure(exposed, "IDENTITY_INVALID");
    expect(jsonOf(exposed).error.message).toContain(`chmod 600 ${path}`);
    const human = await sandboxed.run(["identity"]);
    expect(human.code).toBe(1);
    expect(human.stderr).toStartWith("pi-tasks identity: IDENTITY_INVALID: ");
    expect(human.stderr).toContain("chmod 600");
    expect(readFileSync(path, "utf8")).toBe(text);
  });

  test("identity takes no argument (CLI_USAGE, exit 2)", async () => {
    const sandboxed = box();
    expectFailure(await sandboxed.run(["identity", "extra", "--json"]), "CLI_USAGE", 2);
    expectFailure(await sandboxed.run(["identity", "--bogus", "--json"]), "CLI_USAGE", 2);
    expect(existsSync(join(sandboxed.stateDir, "identity.json"))).toBe(false);
  });
});

describe("pi-tasks peers", () => {
  test("add, list and remove with --json", async () => {
    const sandboxed = box();
    const [bob, alice] = [key(), key()];
    expect(jsonOf(await sandboxed.run(["peers", "list", "--json"]))).toEqual({
      ok: true,
      path: join(sandboxed.stateDir, "peers.json"),
      peers: [],
    });

    const added = await sandboxed.run(["peers", "add", "bob", bob, "--yes", "--json"]);
    expect(added.code).toBe(0);
    const peer = { name: "bob", key: bob, fingerprint: fingerprintOf(bob), addedAt: expect.any(String) };
    expect(jsonOf(added)).toEqual({ ok: true, peer, changed: true });
    expect(jsonOf(await sandboxed.run(["peers", "add", "bob", bob, "--yes", "--json"]))).toEqual({
      ok: true,
      peer: jsonOf(added).peer,
      changed: false,
    });
    await sandboxed.run(["peers", "add", "alice", alice, "--yes", "--json"]);

    const listed = jsonOf(await sandboxed.run(["peers", "list", "--json"]));
    expect(listed.peers.map((entry: { name: string }) => entry.name)).toEqual(["alice", "bob"]);
    expect(listed.peers[1]).toEqual(jsonOf(added).peer);

    const removed = await sandboxed.run(["peers", "remove", "bob", "--json"]);
    expect(removed.code).toBe(0);
    expect(jsonOf(removed)).toEqual({ ok: true, removed: jsonOf(added).peer });
    expect(jsonOf(await sandboxed.run(["peers", "list", "--json"])).peers.map((entry: { name: string }) => entry.name)).toEqual(["alice"]);
  });

  test("the text forms: paired, unchanged, the list, removed", async () => {
    const sandboxed = box();
    const bob = key();
    const empty = await sandboxed.run(["peers", "list"]);
    expect(empty.code).toBe(0);
    expect(empty.stdout).toContain("No peers");
    expect(empty.stdout).toContain("pi-tasks peers add NAME KEY");

    const paired = await sandboxed.run(["peers", "add", "bob", bob, "--yes"]);
    expect({ code: paired.code, stderr: paired.stderr }).toEqual({ code: 0, stderr: "" });
    expect(paired.stdout).toBe(`Paired bob (fingerprint ${fingerprintOf(bob)}).\n`);
    const unchanged = await sandboxed.run(["peers", "add", "bob", bob, "--yes"]);
    expect(unchanged.stdout).toContain("nothing changed");

    const list = await sandboxed.run(["peers", "list"]);
    const lines = list.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^NAME\s+FINGERPRINT\s+ADDED\s+KEY$/);
    expect(lines[1]).toMatch(new RegExp(`^bob\\s+${fingerprintOf(bob)}\\s+\\S+\\s+${bob}$`));
    expect(lines).toHaveLength(2);

    const removed = await sandboxed.run(["peers", "remove", "bob"]);
    expect(removed.stdout).toBe(`Removed bob (fingerprint ${fingerprintOf(bob)}).\n`);
  });

  test("pairing two homes: each adds the key the other's `pi-tasks identity` shows", async () => {
    const sandboxed = box();
    const other = { PI_TASKS_HOME: join(sandboxed.dir, "other-home") };
    const mine = jsonOf(await sandboxed.run(["identity", "--json"]));
    const theirs = jsonOf(await sandboxed.run(["identity", "--json"], { env: other }));
    expect(theirs.publicKey).not.toBe(mine.publicKey);
    expect(jsonOf(await sandboxed.run(["peers", "add", "other", theirs.publicKey, "--yes", "--json"])).changed).toBe(true);
    expect(jsonOf(await sandboxed.run(["peers", "add", "me", mine.publicKey, "--yes", "--json"], { env: other })).changed).toBe(true);
    expect(
      jsonOf(await sandboxed.run(["peers", "list", "--json"], { env: other })).peers.map((entry: { key: string }) => entry.key),
    ).toEqual([mine.publicKey]);
    // Its own key is refused on either side.
    const own = await sandboxed.run(["peers", "add", "self", mine.publicKey, "--yes", "--json"]);
    expectFailure(own, "INVALID_PEER_KEY");
    expect(jsonOf(own).error.details.problem).toBe("this is your own identity; it is always trusted");
  });

  test("wrong input is a typed error with its exit code, and changes nothing", async () => {
    const sandboxed = box();
    const [bob, other] = [key(), key()];
    await sandboxed.run(["peers", "add", "bob", bob, "--yes", "--json"]);
    const before = peersFile(sandboxed);
    const cases: [string[], string, number][] = [
      [["peers", "add", "carol", "ed25519:not-a-key", "--yes"], "INVALID_PEER_KEY", 1],
      [["peers", "add", "carol", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5", "--yes"], "INVALID_PEER_KEY", 1],
      [["peers", "add", "bad name", other, "--yes"], "INVALID_PEER_NAME", 1],
      [["peers", "add", "x".repeat(65), other, "--yes"], "INVALID_PEER_NAME", 1],
      [["peers", "add", "bob", other, "--yes"], "PEER_CONFLICT", 1],
      [["peers", "add", "robert", bob, "--yes"], "PEER_CONFLICT", 1],
      [["peers", "remove", "nobody"], "PEER_NOT_FOUND", 1],
      [["peers", "remove", "bad/name"], "INVALID_PEER_NAME", 1],
      [["peers", "add", "carol"], "CLI_USAGE", 2],
      [["peers", "add"], "CLI_USAGE", 2],
      [["peers", "add", "carol", other, "--yes", "extra"], "CLI_USAGE", 2],
      [["peers", "remove"], "CLI_USAGE", 2],
      [["peers", "list", "extra"], "CLI_USAGE", 2],
      [["peers"], "CLI_USAGE", 2],
      [["peers", "rename", "bob", "rob"], "CLI_USAGE", 2],
      [["peers", "add", "carol", other, "--yes", "--bogus"], "CLI_USAGE", 2],
    ];
    for (const [argv, code, exit] of cases) {
      const json = await sandboxed.run([...argv, "--json"]);
      expect({ argv, exit: json.code, code: jsonOf(json).error?.code, command: jsonOf(json).command }).toEqual({
        argv,
        exit,
        code,
        command: "peers",
      });
      const text = await sandboxed.run(argv);
      expect({ argv, exit: text.code, stdout: text.stdout }).toEqual({ argv, exit, stdout: "" });
      expect(text.stderr).toStartWith(`pi-tasks peers: ${code}: `);
      expect(peersFile(sandboxed)).toBe(before);
    }
    const conflict = jsonOf(await sandboxed.run(["peers", "add", "bob", other, "--yes", "--json"]));
    expect(conflict.error.details).toEqual({ name: "bob", pairedFingerprint: fingerprintOf(bob), newFingerprint: fingerprintOf(other) });
  });

  test("a malformed peers.json is PEERS_INVALID for every subcommand and stays as it was", async () => {
    const sandboxed = box();
    await sandboxed.run(["identity", "--json"]);
    await Bun.write(join(sandboxed.stateDir, "peers.json"), "{ broken");
    for (const argv of [
      ["peers", "list"],
      ["peers", "add", "bob", key(), "--yes"],
      ["peers", "remove", "bob"],
    ]) {
      expectFailure(await sandboxed.run([...argv, "--json"]), "PEERS_INVALID");
    }
    expect(peersFile(sandboxed)).toBe("{ broken");
  });
});

/** Runs `pi-tasks …args` with a controlling terminal (`script` gives it a pty) that types `typed`. */
function onTerminal(sandboxed: CliSandbox, args: readonly string[], typed: string): Promise<CliRun> {
  const quoted = [BUN, CLI_ENTRY, ...args].map((arg) => `'${arg.replaceAll("'", "'\\''")}'`).join(" ");
  return sandboxed.run([], { command: ["sh", "-c", `printf '${typed}\\n' | script -qec "${quoted}" /dev/null`] });
}

describe("pairing is a person's decision (peers add asks on the terminal)", () => {
  test("without a terminal and without --yes: refused, nothing changes", async () => {
    const sandboxed = box();
    expectFailure(await sandboxed.run(["peers", "add", "bob", key(), "--json"]), "PAIRING_NOT_CONFIRMED", 1);
    expect(peersFile(sandboxed)).toBeUndefined();
  });

  test("inside a Pi model's bash tool (PI_SESSION_ID set): refused even with --yes", async () => {
    const sandboxed = box();
    expectFailure(
      await sandboxed.run(["peers", "add", "bob", key(), "--yes", "--json"], { env: { PI_SESSION_ID: "0192f1c2-model-shell" } }),
      "PAIRING_NOT_CONFIRMED",
      1,
    );
    expect(peersFile(sandboxed)).toBeUndefined();
  });

  test("on a terminal it asks with the fingerprint: y pairs, anything else refuses", async () => {
    const sandboxed = box();
    const bob = key();
    const refused = await onTerminal(sandboxed, ["peers", "add", "bob", bob], "n");
    expect(refused.stdout).toContain(fingerprintOf(bob));
    expect(refused.stdout).toContain("PAIRING_NOT_CONFIRMED");
    expect(peersFile(sandboxed)).toBeUndefined();
    const confirmed = await onTerminal(sandboxed, ["peers", "add", "bob", bob], "y");
    expect(confirmed.stdout).toContain(`Paired bob (fingerprint ${fingerprintOf(bob)}).`);
    expect(jsonOf(await sandboxed.run(["peers", "list", "--json"])).peers.map((peer: { name: string }) => peer.name)).toEqual(["bob"]);
  });
});

describe("--help", () => {
  test("identity and peers answer --help (and -h, and `help COMMAND`), naming PI_TASKS_HOME", async () => {
    const sandboxed = box();
    for (const argv of [
      ["identity", "--help"],
      ["identity", "-h"],
      ["help", "identity"],
    ]) {
      const run = await sandboxed.run(argv);
      expect({ argv, code: run.code, stderr: run.stderr }).toEqual({ argv, code: 0, stderr: "" });
      expect(run.stdout).toStartWith("usage: pi-tasks identity [--json]");
      expect(run.stdout).toContain("environment: PI_TASKS_HOME");
    }
    for (const argv of [
      ["peers", "--help"],
      ["peers", "-h"],
      ["help", "peers"],
    ]) {
      const run = await sandboxed.run(argv);
      expect({ argv, code: run.code }).toEqual({ argv, code: 0 });
      expect(run.stdout).toStartWith(
        "usage: pi-tasks peers add NAME KEY [--yes] [--json]\n       pi-tasks peers remove NAME [--json]\n       pi-tasks peers list [--json]\n",
      );
      expect(run.stdout).toContain("environment: PI_TASKS_HOME");
    }
    // Nothing was created by asking for help.
    expect(existsSync(join(sandboxed.stateDir, "identity.json"))).toBe(false);
  });

  test("each peers subcommand has its own --help", async () => {
    const sandboxed = box();
    const usages: Record<string, string> = {
      add: "pi-tasks peers add NAME KEY [--yes] [--json]",
      remove: "pi-tasks peers remove NAME [--json]",
      list: "pi-tasks peers list [--json]",
    };
    for (const [sub, usage] of Object.entries(usages)) {
      for (const argv of [
        ["peers", sub, "--help"],
        ["peers", sub, "-h"],
        ["help", "peers", sub],
      ]) {
        const run = await sandboxed.run(argv);
        expect({ argv, code: run.code, stderr: run.stderr }).toEqual({ argv, code: 0, stderr: "" });
        expect(run.stdout).toStartWith(`usage: ${usage}\n`);
        expect(run.stdout).toContain("environment: PI_TASKS_HOME");
      }
    }
    // A usage error shows the subcommand's usage.
    const wrong = await sandboxed.run(["peers", "add", "carol"]);
    expect(wrong.stderr).toContain(`usage: ${usages.add}\n`);
    expect(peersFile(sandboxed)).toBeUndefined();
  });

  test("the overview lists identity and peers", async () => {
    const sandboxed = box();
    const run = await sandboxed.run(["help"]);
    expect(run.stdout).toContain("\n  identity ");
    expect(run.stdout).toContain("\n  peers ");
  });
});
