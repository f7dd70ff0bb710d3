/**
 * The identity file (src/trust/identity.ts): created on first use with mode 0600 in a 0700
 * directory, one identity when several processes create it at once, and a bad or exposed file
 * refused with IDENTITY_INVALID — never replaced by a new key.
 */
import { afterEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { generateKeyPairSync } from "node:crypto";
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
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureIdentity, IDENTITY_FILE, identityPath, loadIdentity } from "../../src/trust/identity.ts";
import { fingerprintOf, generateIdentity, verifySignature } from "../../src/trust/keys.ts";
import { thrown } from "../../testkit/async.ts";
import { type ChildScript, repoModule, runAtOnce } from "../helpers/at-once.ts";

setDefaultTimeout(30_000);

const PERMISSIONS = 0o777;
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A fresh temporary directory; `home` inside it does not exist yet. */
function scratch(): { dir: string; home: string } {
  const dir = mkdtempSync(join(tmpdir(), "pi-tasks-identity-"));
  dirs.push(dir);
  return { dir, home: join(dir, "nested", "home") };
}

/** A home holding `text` as identity.json (mode 0600). */
function homeWith(text: string): { home: string; path: string } {
  const { home } = scratch();
  mkdirSync(home, { recursive: true, mode: 0o700 });
  const path = join(home, IDENTITY_FILE);
  writeFileSync(path, text, { mode: 0o600 });
  return { home, path };
}

/** A child that ensures the identity of `home` and prints its public key and whether it created it. */
function ensuring(home: string): ChildScript {
  return {
    setup: `const { ensureIdentity } = await import(${repoModule("src/trust/identity.ts")});`,
    run: () => `const stored = ensureIdentity(${JSON.stringify(home)});
console.log(JSON.stringify({ publicKey: stored.identity.publicKey, created: stored.created }));`,
  };
}

function storedText(): string {
  const { identity, privateKeyText } = generateIdentity();
  return JSON.stringify({ version: 1, publicKey: identity.publicKey, privateKey: privateKeyText, createdAt: new Date().toISOString() });
}

describe("creating the identity", () => {
  test("first use creates identity.json (0600) in a new 0700 directory; later uses read the same key", () => {
    const { home } = scratch();
    expect(loadIdentity(home)).toBeUndefined();
    expect(existsSync(home)).toBe(false);

    const first = ensureIdentity(home);
    expect(first.created).toBe(true);
    expect(first.path).toBe(identityPath(home));
    expect(first.path).toBe(join(home, "identity.json"));
    expect(statSync(home).mode & PERMISSIONS).toBe(0o700);
    expect(statSync(first.path).mode & PERMISSIONS).toBe(0o600);
    expect(readdirSync(home)).toEqual(["identity.json"]);

    const stored = JSON.parse(readFileSync(first.path, "utf8"));
    expect(Object.keys(stored).sort()).toEqual(["createdAt", "privateKey", "publicKey", "version"]);
    expect(stored).toMatchObject({ version: 1, publicKey: first.identity.publicKey, createdAt: first.createdAt });
    expect(new Date(stored.createdAt).toISOString()).toBe(stored.createdAt);
    expect(first.identity.fingerprint).toBe(fingerprintOf(first.identity.publicKey));

    const again = ensureIdentity(home);
    expect(again.created).toBe(false);
    expect(again.identity.publicKey).toBe(first.identity.publicKey);
    expect(loadIdentity(home)?.identity.publicKey).toBe(first.identity.publicKey);
  });

  test("the stored key signs: its signatures verify under the stored public key", () => {
    const { home } = scratch();
    const { identity } = ensureIdentity(home);
    const bytes = new TextEncoder().encode("pi-tasks identity test");
    const signature = identity.sign(bytes);
    expect(verifySignature(identity.publicKey, bytes, signature)).toBe(true);
    expect(verifySignature(generateIdentity().identity.publicKey, bytes, signature)).toBe(false);
  });

  test("another process reads the identity this one created", async () => {
    const { home } = scratch();
    const { identity } = ensureIdentity(home);
    const [child] = await runAtOnce(1, ensuring(home));
    expect(child!.code).toBe(0);
    expect(JSON.parse(child!.stdout)).toEqual({ publicKey: identity.publicKey, created: false });
  });

  test("several processes creating it at once end with one identity, and none reads a half-written file", async () => {
    const { home } = scratch();
    const count = 8;
    const children = await runAtOnce(count, ensuring(home));
    for (const child of children) expect({ code: child.code, stderr: child.stderr }).toEqual({ code: 0, stderr: "" });
    const results = children.map((child) => JSON.parse(child.stdout) as { publicKey: string; created: boolean });
    expect(new Set(results.map((result) => result.publicKey)).size).toBe(1);
    expect(results.filter((result) => result.created)).toHaveLength(1);
    // The file holds that key, and no temporary file is left behind.
    expect(JSON.parse(readFileSync(identityPath(home), "utf8")).publicKey).toBe(results[0]!.publicKey);
    expect(readdirSync(home)).toEqual(["identity.json"]);
  });

  test("an identity never changes while the process runs (cached per home)", () => {
    const { home } = scratch();
    const { identity } = ensureIdentity(home);
    rmSync(identityPath(home));
    expect(loadIdentity(home)?.identity.publicKey).toBe(identity.publicKey);
    expect(ensureIdentity(home)).toMatchObject({ created: false, identity: { publicKey: identity.publicKey } });
    expect(existsSync(identityPath(home))).toBe(false);
  });
});

describe("a bad identity file is refused, never replaced", () => {
  const other = generateIdentity();
  const own = generateIdentity();
  const x25519Key = generateKeyPairSync("x25519");
  const x25519 = x25519Key.privateKey.export({ format: "der", type: "pkcs8" }).toString("base64url");
  /** The X25519 key's own public half, spelled as an Ed25519 key text (a well-formed text). */
  const x25519AsEd25519 = `ed25519:${(x25519Key.publicKey.export({ format: "jwk" }) as { x: string }).x}`;
  const valid = { version: 1, publicKey: own.identity.publicKey, privateKey: own.privateKeyText, createdAt: "2026-01-02T03:04:05.000Z" };
  /** Each case: the file's text, and the problem it must be refused for (so each fails for its own defect). */
  const cases: Record<string, [text: string, problem: string]> = {
    "not JSON": ["{ not json", "it is not JSON"],
    "half written": [JSON.stringify(valid).slice(0, 60), "it is not JSON"],
    "an array": ["[]", "it is not a JSON object"],
    "another version": [JSON.stringify({ ...valid, version: 2 }), "version must be 1"],
    "a malformed public key": [JSON.stringify({ ...valid, publicKey: "ed25519:short" }), "publicKey is not an Ed25519 public key text"],
    "no private key": [JSON.stringify({ ...valid, privateKey: undefined }), "privateKey is missing"],
    "a private key that does not parse": [JSON.stringify({ ...valid, privateKey: "AAAA" }), "privateKey does not parse"],
    "another key's private key": [
      JSON.stringify({ ...valid, privateKey: other.privateKeyText }),
      "privateKey does not belong to publicKey",
    ],
    "a private key that is not Ed25519": [JSON.stringify({ ...valid, privateKey: x25519 }), "not an Ed25519 key (x25519)"],
    // Guards keys.ts identityFromPrivateKey (the Ed25519 type check): here nothing else would catch it.
    "an X25519 private key stored with its own public key as the Ed25519 key text": [
      JSON.stringify({ ...valid, publicKey: x25519AsEd25519, privateKey: x25519 }),
      "not an Ed25519 key (x25519)",
    ],
    "no createdAt": [JSON.stringify({ ...valid, createdAt: "yesterday" }), "createdAt is not a date"],
  };

  test("the valid document of these cases loads (so each case fails for its own defect)", () => {
    const { home } = homeWith(JSON.stringify(valid));
    expect(loadIdentity(home)?.identity.publicKey).toBe(own.identity.publicKey);
  });

  for (const [name, [text, problem]] of Object.entries(cases)) {
    test(`${name}: IDENTITY_INVALID for that problem, and the file is left as it was`, () => {
      // Guards identity.ts parseIdentity: each check refuses its own defect.
      const { home, path } = homeWith(text);
      const loading = thrown(() => loadIdentity(home));
      expect(loading.code).toBe("IDENTITY_INVALID");
      expect(loading.details.path).toBe(path);
      expect(String(loading.details.problem)).toContain(problem);
      expect(thrown(() => ensureIdentity(home)).code).toBe("IDENTITY_INVALID");
      expect(readFileSync(path, "utf8")).toBe(text);
      expect(readdirSync(home)).toEqual(["identity.json"]);
    });
  }

  test("a file group or others may access — any one of their six bits — is refused with how to fix it; after chmod 600 it loads", () => {
    // Guards identity.ts GROUP_OTHER_BITS = 0o077 (read, write and execute, of group and of others).
    for (const mode of [0o644, 0o640, 0o604, 0o660, 0o620, 0o602, 0o610, 0o601]) {
      const text = storedText();
      const { home, path } = homeWith(text);
      chmodSync(path, mode);
      const error = thrown(() => ensureIdentity(home));
      expect(error.code).toBe("IDENTITY_INVALID");
      expect(error.message).toContain(`chmod 600 ${path}`);
      expect(error.details).toMatchObject({ path, mode: `0${mode.toString(8)}`, fix: `chmod 600 ${path}` });
      expect(String(error.details.problem)).toContain("chmod 600");
      expect(readFileSync(path, "utf8")).toBe(text);
      chmodSync(path, 0o600);
      expect(ensureIdentity(home)).toMatchObject({ created: false, identity: { publicKey: JSON.parse(text).publicKey } });
    }
  });

  test("identity.json that is a directory is refused", () => {
    const { home } = scratch();
    mkdirSync(join(home, IDENTITY_FILE), { recursive: true, mode: 0o700 });
    expect(thrown(() => ensureIdentity(home)).code).toBe("IDENTITY_INVALID");
  });
});

/** A user id that is not this process's (nobody). */
const OTHER_UID = 65_534;

describe("whose identity.json is used", () => {
  test("one owned by another user is refused (IDENTITY_INVALID naming the owner and the fix), never used", () => {
    const text = storedText();
    const { home, path } = homeWith(text);
    chownSync(path, OTHER_UID, OTHER_UID);
    const error = thrown(() => ensureIdentity(home));
    expect(error.code).toBe("IDENTITY_INVALID");
    expect(error.message).toContain(`uid ${OTHER_UID}`);
    expect(error.message).toContain(`chown ${process.getuid!()} ${path}`);
    expect(readFileSync(path, "utf8")).toBe(text);
    chownSync(path, process.getuid!(), process.getgid!());
    expect(ensureIdentity(home).identity.publicKey).toBe(JSON.parse(text).publicKey);
  });

  test("a symbolic link is refused, even to a valid identity file of one's own (IDENTITY_INVALID naming the fix)", () => {
    const { home: elsewhere, path: real } = homeWith(storedText());
    const { home } = scratch();
    mkdirSync(home, { recursive: true, mode: 0o700 });
    symlinkSync(real, identityPath(home));
    const error = thrown(() => ensureIdentity(home));
    expect(error.code).toBe("IDENTITY_INVALID");
    expect(error.message).toContain("symbolic link");
    expect(String(error.details.problem)).toContain("regular file");
    expect(loadIdentity(elsewhere)).toBeDefined();
  });
});
