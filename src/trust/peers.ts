/**
 * The peers this identity trusts: `$PI_TASKS_HOME/peers.json`,
 * `{ "version": 1, "peers": { "<name>": { "key": "ed25519:…", "addedAt": "<ISO>" } } }`.
 *
 * - A missing file means no peers. A malformed one is `PEERS_INVALID` and is never overwritten;
 *   so is one that is a symbolic link, not a regular file, owned by another user or writable by
 *   group or others (src/platform/private-file.ts): whoever controls it decides whom this identity trusts.
 * - Changes (`addPeer`, `removePeer`) run under `peers.json.lock` (src/platform/file-lock.ts): they
 *   wait up to `peersLockWaitMs` for another process (then `PEERS_BUSY`), re-read the file under
 *   the lock, and replace it atomically (mode 0600), so concurrent changes are never lost.
 * - Rules: a name is `^[A-Za-z0-9._-]{1,64}$`; a key parses; a name is never re-bound to another
 *   key, nor a key paired under a second name (`PEER_CONFLICT`); adding the same name and key again
 *   changes nothing; this identity's own key is never a peer; at most `maxPeers` peers.
 * - `createPeerBook` answers "who is this key?" for the receiving side, re-reading the file only
 *   when it changed (one stat per lookup), so `pi-tasks peers add` elsewhere takes effect at once.
 */
import { lstatSync } from "node:fs";
import { join, resolve } from "node:path";
import { TaskError } from "../protocol/errors.ts";
import { maxPeerNameChars, maxPeers, peersLockPollMs, peersLockStaleMs, peersLockWaitMs } from "../protocol/limits.ts";
import { isRecord } from "../protocol/validate.ts";
import { replaceFile } from "../platform/atomic-file.ts";
import { lockHolder, waitForLock } from "../platform/file-lock.ts";
import { ensureHome } from "../platform/home-dir.ts";
import { loadIdentity } from "./identity.ts";
import { fingerprintOf, isPublicKeyText } from "./keys.ts";
import { readPrivateFile } from "../platform/private-file.ts";

export const PEERS_FILE = "peers.json";
const PEERS_VERSION = 1;
const PEERS_FILE_MODE = 0o600;
const PEER_NAME_PATTERN = new RegExp(`^[A-Za-z0-9._-]{1,${maxPeerNameChars}}$`);
/** Characters of a refused input quoted back in an error's details. */
const QUOTED_INPUT_CHARS = 80;

/** One entry of peers.json. */
export interface PeerEntry {
  readonly key: string;
  readonly addedAt: string;
}

/** A peer as commands show it. */
export interface Peer extends PeerEntry {
  readonly name: string;
  readonly fingerprint: string;
}

export interface AddedPeer {
  readonly peer: Peer;
  /** False when the same name and key were already paired (nothing was written). */
  readonly changed: boolean;
}

export interface PeerBook {
  /** The paired peer holding `publicKey`, or undefined. Throws `PEERS_INVALID` for a malformed file. */
  lookup(publicKey: string): { readonly name: string } | undefined;
}

export function peersPath(home: string): string {
  return join(resolve(home), PEERS_FILE);
}

function peersInvalid(path: string, problem: string): TaskError {
  return new TaskError("PEERS_INVALID", {
    message: `${path} is invalid: ${problem}; fix or remove it (nothing was changed).`,
    details: { path, problem },
  });
}

export function isPeerName(name: unknown): name is string {
  return typeof name === "string" && PEER_NAME_PATTERN.test(name);
}

function checkName(name: string): void {
  if (!isPeerName(name)) throw new TaskError("INVALID_PEER_NAME", { details: { name: String(name).slice(0, QUOTED_INPUT_CHARS) } });
}

function checkKey(key: string): void {
  if (!isPublicKeyText(key)) throw new TaskError("INVALID_PEER_KEY", { details: { key: String(key).slice(0, QUOTED_INPUT_CHARS) } });
}

function parsePeers(path: string, text: string): Map<string, PeerEntry> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw peersInvalid(path, `it is not JSON (${(error as Error).message})`);
  }
  if (!isRecord(value)) throw peersInvalid(path, "it is not a JSON object");
  if (value.version !== PEERS_VERSION) throw peersInvalid(path, `version must be ${PEERS_VERSION}`);
  if (!isRecord(value.peers)) throw peersInvalid(path, "peers is not an object");
  const peers = new Map<string, PeerEntry>();
  const names = new Map<string, string>();
  for (const [name, entry] of Object.entries(value.peers)) {
    if (!PEER_NAME_PATTERN.test(name)) throw peersInvalid(path, `${JSON.stringify(name.slice(0, QUOTED_INPUT_CHARS))} is not a peer name`);
    if (!isRecord(entry) || !isPublicKeyText(entry.key)) throw peersInvalid(path, `the key of ${name} is not an Ed25519 public key text`);
    if (typeof entry.addedAt !== "string" || Number.isNaN(Date.parse(entry.addedAt)))
      throw peersInvalid(path, `addedAt of ${name} is not a date`);
    const other = names.get(entry.key);
    if (other !== undefined) throw peersInvalid(path, `${other} and ${name} have the same key`);
    names.set(entry.key, name);
    peers.set(name, { key: entry.key, addedAt: entry.addedAt });
  }
  return peers;
}

/** Group or others may write it: then they could add a trusted peer. */
const GROUP_OTHER_WRITE_BITS = 0o022;

function readPeersAt(path: string): Map<string, PeerEntry> {
  const text = readPrivateFile(
    path,
    GROUP_OTHER_WRITE_BITS,
    (refusal) =>
      // Whoever controls the file decides whom this identity trusts.
      new TaskError("PEERS_INVALID", {
        message: `${path} ${refusal.problem}; nothing was changed.`,
        details: { path, problem: refusal.problem, fix: refusal.fix, ...refusal.details },
      }),
  );
  return text === undefined ? new Map() : parsePeers(path, text);
}

function asPeer(name: string, entry: PeerEntry): Peer {
  return { name, key: entry.key, fingerprint: fingerprintOf(entry.key), addedAt: entry.addedAt };
}

/** The peers of `home` by name (a missing peers.json is empty). Throws `PEERS_INVALID`. */
export function readPeers(home: string): ReadonlyMap<string, PeerEntry> {
  return readPeersAt(peersPath(home));
}

/** The peers of `home`, sorted by name. Throws `PEERS_INVALID`. */
export function listPeers(home: string): Peer[] {
  return [...readPeers(home)].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([name, entry]) => asPeer(name, entry));
}

/** Runs `change` on the current peers under the lock; writes them back when it says so. */
async function updatePeers<T>(home: string, change: (peers: Map<string, PeerEntry>) => { result: T; write: boolean }): Promise<T> {
  const path = peersPath(home);
  const lockPath = `${path}.lock`;
  ensureHome(home);
  const lock = await waitForLock(lockPath, { waitMs: peersLockWaitMs, staleMs: peersLockStaleMs, pollMs: peersLockPollMs });
  if (lock === undefined) {
    const holder = lockHolder(lockPath);
    throw new TaskError("PEERS_BUSY", {
      message: `Another process${holder === undefined ? "" : ` (pid ${holder})`} is changing ${path}; try again (nothing was changed).`,
      details: { path, lock: lockPath, waitedMs: peersLockWaitMs, ...(holder === undefined ? {} : { holder }) },
    });
  }
  try {
    const peers = readPeersAt(path);
    const { result, write } = change(peers);
    if (write) {
      const document = {
        version: PEERS_VERSION,
        peers: Object.fromEntries([...peers].map(([name, entry]) => [name, { key: entry.key, addedAt: entry.addedAt }])),
      };
      replaceFile(path, `${JSON.stringify(document, null, 2)}\n`, PEERS_FILE_MODE);
    }
    return result;
  } finally {
    lock.release();
  }
}

/** Pairs `name` with `key`. Idempotent for the same name and key; never re-binds either. */
export async function addPeer(home: string, name: string, key: string): Promise<AddedPeer> {
  checkName(name);
  checkKey(key);
  if (loadIdentity(home)?.identity.publicKey === key) {
    throw new TaskError("INVALID_PEER_KEY", {
      message: "This key is this installation's own identity; it is always trusted and is not added as a peer.",
      details: { name, fingerprint: fingerprintOf(key), problem: "this is your own identity; it is always trusted" },
    });
  }
  return updatePeers<AddedPeer>(home, (peers) => {
    const existing = peers.get(name);
    if (existing !== undefined) {
      if (existing.key === key) return { result: { peer: asPeer(name, existing), changed: false }, write: false };
      throw new TaskError("PEER_CONFLICT", {
        message: `${name} is already paired with another key (fingerprint ${fingerprintOf(existing.key)}, not ${fingerprintOf(key)}); remove it first.`,
        details: { name, pairedFingerprint: fingerprintOf(existing.key), newFingerprint: fingerprintOf(key) },
      });
    }
    const holder = [...peers].find(([, entry]) => entry.key === key)?.[0];
    if (holder !== undefined) {
      throw new TaskError("PEER_CONFLICT", {
        message: `This key (fingerprint ${fingerprintOf(key)}) is already paired as ${holder}; remove ${holder} first to rename it.`,
        details: { name, pairedName: holder, fingerprint: fingerprintOf(key) },
      });
    }
    if (peers.size >= maxPeers) {
      throw new TaskError("PEERS_FULL", {
        message: `${peersPath(home)} already holds ${maxPeers} peers; remove one first.`,
        details: { name, maxPeers },
      });
    }
    const entry: PeerEntry = { key, addedAt: new Date().toISOString() };
    peers.set(name, entry);
    return { result: { peer: asPeer(name, entry), changed: true }, write: true };
  });
}

/** Unpairs `name` (`PEER_NOT_FOUND` when there is no such peer); answers the removed peer. */
export async function removePeer(home: string, name: string): Promise<Peer> {
  checkName(name);
  return updatePeers<Peer>(home, (peers) => {
    const entry = peers.get(name);
    if (entry === undefined) throw new TaskError("PEER_NOT_FOUND", { message: `No peer named ${name}.`, details: { name } });
    peers.delete(name);
    return { result: asPeer(name, entry), write: true };
  });
}

/** What identifies one version of peers.json: a rename gives a new inode, a change new times. */
function versionOf(path: string): string | undefined {
  try {
    // lstat: a link swapped for another is a change too (and is then refused by the read).
    const stat = lstatSync(path, { bigint: true });
    return `${stat.ino}:${stat.size}:${stat.mtimeNs}:${stat.ctimeNs}`;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw peersInvalid(path, `it cannot be read (${(error as Error).message})`);
  }
}

/** Key → peer lookups over peers.json, re-read only when the file changed. */
export function createPeerBook(home: string): PeerBook {
  const path = peersPath(home);
  let version: string | undefined;
  let byKey = new Map<string, string>();
  return {
    lookup(publicKey) {
      const now = versionOf(path);
      if (now !== version) {
        const peers = now === undefined ? new Map<string, PeerEntry>() : readPeersAt(path);
        byKey = new Map([...peers].map(([name, entry]) => [entry.key, name]));
        version = now;
      }
      const name = byKey.get(publicKey);
      return name === undefined ? undefined : { name };
    },
  };
}
