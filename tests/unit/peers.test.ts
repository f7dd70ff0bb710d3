/**
 * peers.json (src/trust/peers.ts): adding, removing and listing peers under its rules, changes
 * under the shared lock (concurrent changes all land, a stale lock is taken over, a live one times
 * out with PEERS_BUSY), a malformed file refused and never overwritten, and the receiving side's
 * peer book seeing changes without a restart.
 */
import { afterEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { maxPeerNameChars, maxPeers, peersLockStaleMs } from "../../src/protocol/limits.ts";
import { tryLock } from "../../src/platform/file-lock.ts";
import { ensureIdentity } from "../../src/trust/identity.ts";
import { fingerprintOf, generateIdentity } from "../../src/trust/keys.ts";
import { addPeer, createPeerBook, listPeers, PEERS_FILE, peersPath, readPeers, removePeer } from "../../src/trust/peers.ts";
import { failure, thrown } from "../../testkit/async.ts";
import { repoModule, runAtOnce } from "../helpers/at-once.ts";

setDefaultTimeout(30_000);

const PERMISSIONS = 0o777;
/** A pid that does not exist (above the kernel's largest pid_max). */
const DEAD_PID = 4_194_303;
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function home(): string {
  const dir = mkdtempSync(join(tmpdir(), "pi-tasks-peers-"));
  dirs.push(dir);
  return join(dir, "home");
}

const key = () => generateIdentity().identity.publicKey;

function lockPath(at: string): string {
  return `${peersPath(at)}.lock`;
}

/** Writes a lock file naming `pid`, `ageMs` old. */
function plantLock(at: string, pid: number, ageMs: number): string {
  mkdirSync(at, { recursive: true, mode: 0o700 });
  const path = lockPath(at);
  writeFileSync(path, `${pid} planted\n`);
  const when = new Date(Date.now() - ageMs);
  utimesSync(path, when, when);
  return path;
}

describe("adding, listing and removing", () => {
  test("add, list and remove round-trip through peers.json (mode 0600, the documented shape)", async () => {
    const at = home();
    expect(listPeers(at)).toEqual([]);
    expect(readPeers(at).size).toBe(0);
    const [bob, alice] = [key(), key()];
    const added = await addPeer(at, "bob", bob);
    expect(added).toEqual({ changed: true, peer: { name: "bob", key: bob, fingerprint: fingerprintOf(bob), addedAt: expect.any(String) } });
    await addPeer(at, "alice", alice);

    expect(statSync(peersPath(at)).mode & PERMISSIONS).toBe(0o600);
    expect(statSync(at).mode & PERMISSIONS).toBe(0o700);
    const document = JSON.parse(readFileSync(peersPath(at), "utf8"));
    expect(document).toEqual({
      version: 1,
      peers: { bob: { key: bob, addedAt: added.peer.addedAt }, alice: { key: alice, addedAt: expect.any(String) } },
    });
    expect(listPeers(at).map((peer) => peer.name)).toEqual(["alice", "bob"]);
    expect(readPeers(at).get("bob")).toEqual({ key: bob, addedAt: added.peer.addedAt });

    expect(await removePeer(at, "bob")).toEqual(added.peer);
    expect(listPeers(at).map((peer) => peer.name)).toEqual(["alice"]);
    // Neither the lock nor a temporary file is left behind.
    expect(readdirSync(at)).toEqual([PEERS_FILE]);
  });

  test("adding the same name and key again is an unchanged success that writes nothing", async () => {
    const at = home();
    const bob = key();
    const first = await addPeer(at, "bob", bob);
    const before = { text: readFileSync(peersPath(at), "utf8"), inode: statSync(peersPath(at)).ino };
    const again = await addPeer(at, "bob", bob);
    expect(again).toEqual({ changed: false, peer: first.peer });
    expect({ text: readFileSync(peersPath(at), "utf8"), inode: statSync(peersPath(at)).ino }).toEqual(before);
  });

  test(`names are 1–${maxPeerNameChars} letters, digits, '.', '_' or '-'; anything else is INVALID_PEER_NAME`, async () => {
    const at = home();
    for (const name of ["a", "A.b_c-9", "x".repeat(maxPeerNameChars)]) expect((await addPeer(at, name, key())).changed).toBe(true);
    for (const name of ["", "x".repeat(maxPeerNameChars + 1), "a b", "a/b", "a:b", "ä", "bob\n"]) {
      const error = await failure(addPeer(at, name, key()));
      expect({ name, code: error.code }).toEqual({ name, code: "INVALID_PEER_NAME" });
      expect((await failure(removePeer(at, name))).code).toBe("INVALID_PEER_NAME");
    }
    expect(listPeers(at)).toHaveLength(3);
  });

  test("a key that does not parse is INVALID_PEER_KEY and changes nothing", async () => {
    const at = home();
    const good = key();
    for (const bad of [
      "",
      "ed25519:",
      good.slice(0, -1),
      `${good}A`,
      good.replace("ed25519:", "ssh-ed25519 "),
      `ed25519:${"+".repeat(43)}`,
      good.toUpperCase(),
    ]) {
      const error = await failure(addPeer(at, "bob", bad));
      expect({ bad, code: error.code }).toEqual({ bad, code: "INVALID_PEER_KEY" });
    }
    expect(existsSync(peersPath(at))).toBe(false);
    // Refused before anything is touched: not even the home is made, no lock is taken.
    // Guards peers.ts addPeer: checkKey (not only the fingerprint of the key failing later, under the lock).
    expect(existsSync(at)).toBe(false);
  });

  test("this identity's own key is refused: it is always trusted", async () => {
    const at = home();
    const { identity } = ensureIdentity(at);
    const error = await failure(addPeer(at, "me", identity.publicKey));
    expect(error.code).toBe("INVALID_PEER_KEY");
    expect(error.details.problem).toBe("this is your own identity; it is always trusted");
    expect(existsSync(peersPath(at))).toBe(false);
  });

  test("a name is never re-bound to another key, nor a key paired under a second name (PEER_CONFLICT)", async () => {
    const at = home();
    const [bob, other] = [key(), key()];
    await addPeer(at, "bob", bob);
    const before = readFileSync(peersPath(at), "utf8");

    const rebind = await failure(addPeer(at, "bob", other));
    expect(rebind.code).toBe("PEER_CONFLICT");
    expect(rebind.details).toEqual({ name: "bob", pairedFingerprint: fingerprintOf(bob), newFingerprint: fingerprintOf(other) });
    expect(rebind.message).toContain(fingerprintOf(bob));
    expect(rebind.message).toContain(fingerprintOf(other));

    const second = await failure(addPeer(at, "robert", bob));
    expect(second.code).toBe("PEER_CONFLICT");
    expect(second.details).toEqual({ name: "robert", pairedName: "bob", fingerprint: fingerprintOf(bob) });
    expect(readFileSync(peersPath(at), "utf8")).toBe(before);

    // Removing first makes room for either.
    await removePeer(at, "bob");
    expect((await addPeer(at, "bob", other)).changed).toBe(true);
  });

  test(`at most ${maxPeers} peers (PEERS_FULL); an existing pair still answers unchanged`, async () => {
    const at = home();
    mkdirSync(at, { recursive: true, mode: 0o700 });
    const peers = Object.fromEntries(
      Array.from({ length: maxPeers }, (_, index) => [`p${index}`, { key: key(), addedAt: "2026-01-01T00:00:00.000Z" }]),
    );
    writeFileSync(peersPath(at), JSON.stringify({ version: 1, peers }), { mode: 0o600 });
    const before = readFileSync(peersPath(at), "utf8");
    const error = await failure(addPeer(at, "one-more", key()));
    expect(error.code).toBe("PEERS_FULL");
    expect(error.details).toMatchObject({ maxPeers });
    expect(readFileSync(peersPath(at), "utf8")).toBe(before);
    expect((await addPeer(at, "p7", peers.p7!.key)).changed).toBe(false);
    await removePeer(at, "p0");
    expect((await addPeer(at, "one-more", key())).changed).toBe(true);
    expect(listPeers(at)).toHaveLength(maxPeers);
  });

  test("removing an unknown name is PEER_NOT_FOUND", async () => {
    const at = home();
    expect((await failure(removePeer(at, "nobody"))).code).toBe("PEER_NOT_FOUND");
    await addPeer(at, "bob", key());
    const error = await failure(removePeer(at, "nobody"));
    expect(error).toMatchObject({ code: "PEER_NOT_FOUND", details: { name: "nobody" } });
    expect(listPeers(at).map((peer) => peer.name)).toEqual(["bob"]);
  });
});

describe("a malformed peers.json is refused and never overwritten", () => {
  const [a, b] = [key(), key()];
  const cases: Record<string, string> = {
    "not JSON": "{ nope",
    "an array": "[]",
    "another version": JSON.stringify({ version: 2, peers: {} }),
    "peers not an object": JSON.stringify({ version: 1, peers: [] }),
    "a bad name": JSON.stringify({ version: 1, peers: { "a b": { key: a, addedAt: "2026-01-01T00:00:00.000Z" } } }),
    "a bad key": JSON.stringify({ version: 1, peers: { bob: { key: "ed25519:nope", addedAt: "2026-01-01T00:00:00.000Z" } } }),
    "no addedAt": JSON.stringify({ version: 1, peers: { bob: { key: a } } }),
    "one key under two names": JSON.stringify({
      version: 1,
      peers: { bob: { key: a, addedAt: "2026-01-01T00:00:00.000Z" }, rob: { key: a, addedAt: "2026-01-01T00:00:00.000Z" } },
    }),
  };

  test("a well-formed document of the same kind reads (so each case fails for its own defect)", () => {
    const at = home();
    mkdirSync(at, { recursive: true, mode: 0o700 });
    writeFileSync(
      peersPath(at),
      JSON.stringify({
        version: 1,
        peers: { bob: { key: a, addedAt: "2026-01-01T00:00:00.000Z" }, rob: { key: b, addedAt: "2026-01-01T00:00:00.000Z" } },
      }),
      { mode: 0o600 },
    );
    expect(listPeers(at).map((peer) => peer.name)).toEqual(["bob", "rob"]);
  });

  test("a peers.json group or others may write is PEERS_INVALID (they could add a trusted peer), naming the chmod fix", () => {
    const at = home();
    mkdirSync(at, { recursive: true, mode: 0o700 });
    const text = JSON.stringify({ version: 1, peers: { bob: { key: a, addedAt: "2026-01-01T00:00:00.000Z" } } });
    writeFileSync(peersPath(at), text, { mode: 0o600 });
    expect(listPeers(at).map((peer) => peer.name)).toEqual(["bob"]);
    for (const mode of [0o620, 0o602]) {
      chmodSync(peersPath(at), mode);
      const error = thrown(() => createPeerBook(at).lookup(a));
      expect(error.code).toBe("PEERS_INVALID");
      expect(error.message).toContain(`chmod 600 ${peersPath(at)}`);
    }
    chmodSync(peersPath(at), 0o644);
    expect(listPeers(at).map((peer) => peer.name)).toEqual(["bob"]);
  });

  for (const [name, text] of Object.entries(cases)) {
    test(`${name}: PEERS_INVALID for reads, adds, removes and lookups; the file stays`, async () => {
      const at = home();
      mkdirSync(at, { recursive: true, mode: 0o700 });
      writeFileSync(peersPath(at), text, { mode: 0o600 });
      expect(thrown(() => listPeers(at)).code).toBe("PEERS_INVALID");
      expect(thrown(() => readPeers(at)).code).toBe("PEERS_INVALID");
      expect((await failure(addPeer(at, "carol", b))).code).toBe("PEERS_INVALID");
      expect((await failure(removePeer(at, "bob"))).code).toBe("PEERS_INVALID");
      expect(thrown(() => createPeerBook(at).lookup(a)).code).toBe("PEERS_INVALID");
      expect(readFileSync(peersPath(at), "utf8")).toBe(text);
      expect(readdirSync(at)).toEqual([PEERS_FILE]);
    });
  }
});

describe("the peer book (receiving side)", () => {
  test("lookups follow changes made after the book was created, without re-creating it", async () => {
    const at = home();
    const book = createPeerBook(at);
    const [k1, k2, k3] = [key(), key(), key()];
    expect(book.lookup(k1)).toBeUndefined();
    await addPeer(at, "a1", k1);
    expect(book.lookup(k1)).toEqual({ name: "a1" });
    expect(book.lookup(k2)).toBeUndefined();
    // Changes of the same size in quick succession are still seen.
    await removePeer(at, "a1");
    await addPeer(at, "a2", k2);
    expect(book.lookup(k1)).toBeUndefined();
    expect(book.lookup(k2)).toEqual({ name: "a2" });
    await removePeer(at, "a2");
    await addPeer(at, "a3", k3);
    expect(book.lookup(k2)).toBeUndefined();
    expect(book.lookup(k3)).toEqual({ name: "a3" });
    rmSync(peersPath(at));
    expect(book.lookup(k3)).toBeUndefined();
  });

  test("a change by another process is seen by a book of this one", async () => {
    const at = home();
    const book = createPeerBook(at);
    await addPeer(at, "first", key());
    expect(book.lookup(key())).toBeUndefined();
    const theirs = key();
    const [child] = await runAtOnce(1, {
      setup: `const { addPeer } = await import(${repoModule("src/trust/peers.ts")});`,
      run: () => `await addPeer(${JSON.stringify(at)}, "elsewhere", ${JSON.stringify(theirs)}); console.log("{}");`,
    });
    expect(child!.code).toBe(0);
    expect(book.lookup(theirs)).toEqual({ name: "elsewhere" });
  });
});

describe("changes under the lock", () => {
  test("several processes adding different peers at once: every one of them lands", async () => {
    const at = home();
    const count = 8;
    const keys = Array.from({ length: count }, key);
    const children = await runAtOnce(count, {
      setup: `const { addPeer } = await import(${repoModule("src/trust/peers.ts")});`,
      run: (index) =>
        `const added = await addPeer(${JSON.stringify(at)}, "peer-${index}", ${JSON.stringify(keys[index])}); console.log(JSON.stringify(added));`,
    });
    for (const child of children) expect({ code: child.code, stderr: child.stderr }).toEqual({ code: 0, stderr: "" });
    expect(listPeers(at).map((peer) => [peer.name, peer.key])).toEqual(keys.map((k, index) => [`peer-${index}`, k]));
    expect(readdirSync(at)).toEqual([PEERS_FILE]);
  });

  test("concurrent changes inside one process are serialised too", async () => {
    const at = home();
    const keys = Array.from({ length: 6 }, key);
    await Promise.all(keys.map((k, index) => addPeer(at, `p${index}`, k)));
    expect(listPeers(at)).toHaveLength(keys.length);
  });

  test("a stale lock (holder gone, older than peersLockStaleMs) is taken over at once", async () => {
    const at = home();
    plantLock(at, DEAD_PID, peersLockStaleMs + 1_000);
    // Taken over, not waited for: a waited-for lock would end in PEERS_BUSY (the test below).
    expect((await addPeer(at, "bob", key())).changed).toBe(true);
    expect(existsSync(lockPath(at))).toBe(false);
  });

  test("a lock whose holder is gone but that is not yet stale is waited for, then PEERS_BUSY", async () => {
    const at = home();
    const path = plantLock(at, DEAD_PID, 0);
    const error = await failure(addPeer(at, "bob", key()));
    expect(error.code).toBe("PEERS_BUSY");
    expect(existsSync(path)).toBe(true);
    expect(existsSync(peersPath(at))).toBe(false);
  });

  test("a live holder's lock, however old, is never taken over: PEERS_BUSY after peersLockWaitMs, nothing changed", async () => {
    const at = home();
    await addPeer(at, "bob", key());
    const before = readFileSync(peersPath(at), "utf8");
    const path = plantLock(at, process.pid, peersLockStaleMs * 10);
    // (That a change waits for a held lock before this answer: the next test.)
    const error = await failure(addPeer(at, "carol", key()));
    expect(error.code).toBe("PEERS_BUSY");
    expect(error.retryable).toBe(true);
    expect(error.details).toMatchObject({ holder: process.pid, lock: path });
    expect(readFileSync(path, "utf8")).toBe(`${process.pid} planted\n`);
    expect(readFileSync(peersPath(at), "utf8")).toBe(before);
    expect((await failure(removePeer(at, "bob"))).code).toBe("PEERS_BUSY");
  });

  test("a lock released while a change waits is then taken", async () => {
    const at = home();
    mkdirSync(at, { recursive: true, mode: 0o700 });
    const held = tryLock(lockPath(at), { staleMs: peersLockStaleMs });
    expect(held).toBeDefined();
    let released = false;
    setTimeout(() => {
      held!.release();
      released = true;
    }, 300);
    expect((await addPeer(at, "bob", key())).changed).toBe(true);
    // The change waited for the release (the order, not a time).
    expect(released).toBe(true);
    expect(existsSync(lockPath(at))).toBe(false);
  });
});

/** A user id that is not this process's (nobody). */
const OTHER_UID = 65_534;

describe("whose peers.json is trusted", () => {
  const document = (peerKey: string) =>
    JSON.stringify({ version: 1, peers: { mallory: { key: peerKey, addedAt: "2026-01-01T00:00:00.000Z" } } });

  test("one owned by another user is refused (PEERS_INVALID naming the owner and the fix): its peers are not trusted", async () => {
    const at = home();
    mkdirSync(at, { recursive: true, mode: 0o700 });
    const mallory = key();
    writeFileSync(peersPath(at), document(mallory), { mode: 0o600 });
    chownSync(peersPath(at), OTHER_UID, OTHER_UID);
    const error = thrown(() => createPeerBook(at).lookup(mallory));
    expect(error.code).toBe("PEERS_INVALID");
    expect(error.message).toContain(`uid ${OTHER_UID}`);
    expect(error.message).toContain(`chown ${process.getuid!()} ${peersPath(at)}`);
    expect(thrown(() => listPeers(at)).code).toBe("PEERS_INVALID");
    expect((await failure(addPeer(at, "carol", key()))).code).toBe("PEERS_INVALID");
    expect(readFileSync(peersPath(at), "utf8")).toBe(document(mallory));
  });

  test("a symbolic link — to another user's file, or to one's own — is refused (PEERS_INVALID naming the fix)", () => {
    const at = home();
    mkdirSync(at, { recursive: true, mode: 0o700 });
    const mallory = key();
    const theirs = join(at, "..", "theirs.json");
    writeFileSync(theirs, document(mallory), { mode: 0o600 });
    chownSync(theirs, OTHER_UID, OTHER_UID);
    symlinkSync(theirs, peersPath(at));
    const error = thrown(() => createPeerBook(at).lookup(mallory));
    expect(error.code).toBe("PEERS_INVALID");
    expect(error.message).toContain("symbolic link");
    expect(String(error.details.problem)).toContain("regular file");
    rmSync(peersPath(at));
    const mine = join(at, "..", "mine.json");
    writeFileSync(mine, document(mallory), { mode: 0o600 });
    symlinkSync(mine, peersPath(at));
    expect(thrown(() => readPeers(at)).code).toBe("PEERS_INVALID");
  });
});
