/**
 * This installation's identity: one Ed25519 key pair in `$PI_TASKS_HOME/identity.json`, created on
 * first use. Every Pi (and CLI) with the same PI_TASKS_HOME is the same identity.
 *
 * - File: `{ "version": 1, "publicKey": "ed25519:…", "privateKey": "<PKCS#8, base64url>",
 *   "createdAt": "<ISO>" }`, mode 0600, in the home directory (src/platform/home-dir.ts: created
 *   0700, refused when anyone else may enter it).
 * - Creation is race-free: the file is written complete under a temporary name and linked into
 *   place, which fails when it exists; a process that loses the race reads the winner's file. So
 *   Pis starting at once end with one identity, and nobody reads a half-written file.
 * - Reading checks everything (a regular file of this user's, not a symbolic link, not open to
 *   group or others — src/platform/private-file.ts; its shape, the private key parses and matches
 *   `publicKey`) and refuses with `IDENTITY_INVALID`. A bad file is never replaced
 *   by a new key: that would silently change who this installation is.
 * - An identity never changes while a process runs: it is cached per home directory.
 */
import { join, resolve } from "node:path";
import { TaskError } from "../protocol/errors.ts";
import { isRecord } from "../protocol/validate.ts";
import { createFileExclusive } from "../platform/atomic-file.ts";
import { ensureHome } from "../platform/home-dir.ts";
import { generateIdentity, type Identity, identityFromPrivateKey, isPublicKeyText } from "./keys.ts";
import { readPrivateFile } from "../platform/private-file.ts";

export const IDENTITY_FILE = "identity.json";
const IDENTITY_VERSION = 1;
const IDENTITY_FILE_MODE = 0o600;
/** Permission bits of group and others: none may be set on identity.json (it holds the private key). */
const GROUP_OTHER_BITS = 0o077;

/** The identity of a home directory and where it is stored. */
export interface StoredIdentity {
  readonly identity: Identity;
  readonly path: string;
  readonly createdAt: string;
}

export interface EnsuredIdentity extends StoredIdentity {
  /** This call created the file. */
  readonly created: boolean;
}

const cache = new Map<string, StoredIdentity>();

export function identityPath(home: string): string {
  return join(resolve(home), IDENTITY_FILE);
}

function invalid(path: string, problem: string, extra: Record<string, unknown> = {}): TaskError {
  return new TaskError("IDENTITY_INVALID", {
    message: `The identity file ${path} is invalid: ${problem}`,
    details: { path, problem, ...extra },
  });
}

/** The file's text; undefined when there is no file. */
function readIdentityText(path: string): string | undefined {
  return readPrivateFile(
    path,
    GROUP_OTHER_BITS,
    (refusal) =>
      new TaskError("IDENTITY_INVALID", {
        message: `The identity file ${path} ${refusal.problem}. Its private key must be yours alone.`,
        details: { path, problem: refusal.problem, fix: refusal.fix, ...refusal.details },
      }),
  );
}

function parseIdentity(path: string, text: string): StoredIdentity {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw invalid(path, `it is not JSON (${(error as Error).message})`);
  }
  if (!isRecord(value)) throw invalid(path, "it is not a JSON object");
  if (value.version !== IDENTITY_VERSION) throw invalid(path, `version must be ${IDENTITY_VERSION}`, { version: value.version });
  if (!isPublicKeyText(value.publicKey)) throw invalid(path, "publicKey is not an Ed25519 public key text");
  if (typeof value.privateKey !== "string" || value.privateKey === "") throw invalid(path, "privateKey is missing");
  if (typeof value.createdAt !== "string" || Number.isNaN(Date.parse(value.createdAt))) throw invalid(path, "createdAt is not a date");
  let identity: Identity;
  try {
    identity = identityFromPrivateKey(value.privateKey);
  } catch (error) {
    const problem = error instanceof TaskError && typeof error.details.problem === "string" ? error.details.problem : String(error);
    throw invalid(path, `privateKey does not parse (${problem})`);
  }
  if (identity.publicKey !== value.publicKey) {
    throw invalid(path, "privateKey does not belong to publicKey", { publicKey: value.publicKey, privateKeyPublicKey: identity.publicKey });
  }
  return { identity, path, createdAt: value.createdAt };
}

/** The stored identity of `home`; undefined when it has none yet. Throws `IDENTITY_INVALID`. */
export function loadIdentity(home: string): StoredIdentity | undefined {
  const path = identityPath(home);
  const cached = cache.get(path);
  if (cached !== undefined) return cached;
  const text = readIdentityText(path);
  if (text === undefined) return undefined;
  const stored = parseIdentity(path, text);
  cache.set(path, stored);
  return stored;
}

/** The identity of `home`, created when it has none. Throws `IDENTITY_INVALID`. */
export function ensureIdentity(home: string): EnsuredIdentity {
  ensureHome(home);
  const existing = loadIdentity(home);
  if (existing !== undefined) return { ...existing, created: false };
  const path = identityPath(home);
  const { identity, privateKeyText } = generateIdentity();
  const createdAt = new Date().toISOString();
  const text = `${JSON.stringify({ version: IDENTITY_VERSION, publicKey: identity.publicKey, privateKey: privateKeyText, createdAt }, null, 2)}\n`;
  let created: boolean;
  try {
    created = createFileExclusive(path, text, IDENTITY_FILE_MODE);
  } catch (error) {
    throw new TaskError("IDENTITY_INVALID", {
      message: `The identity file ${path} could not be created: ${(error as Error).message}`,
      details: { path, problem: `it could not be created (${(error as Error).message})` },
      cause: error,
    });
  }
  if (!created) {
    // Another process created it first: that one is the identity.
    const winner = loadIdentity(home);
    if (winner === undefined) throw invalid(path, "it vanished right after another process created it");
    return { ...winner, created: false };
  }
  const stored: StoredIdentity = { identity, path, createdAt };
  cache.set(path, stored);
  return { ...stored, created: true };
}
