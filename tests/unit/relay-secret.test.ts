/**
 * The relay secret file of an OS user (src/trust/relay-secret.ts) and the relay's memory of token
 * ids (src/relay-server/token-replay.ts): made once and safely, refused when unsafe, never replaced;
 * a token id accepted once, bounded memory.
 */
import { afterEach, describe, expect, test } from "bun:test";
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TaskError } from "../../src/protocol/errors.ts";
import { relaySecretBytes, maxRelaySecretFileBytes, minRelaySecretBytes, relayTokenReplayEntries } from "../../src/protocol/limits.ts";
import { relaySecretPlan } from "../../src/relay-client/auth.ts";
import { relayConfigFromEnv } from "../../src/relay-client/config.ts";
import { createTokenReplayCache } from "../../src/relay-server/token-replay.ts";
import { ensureRelaySecret, readRelaySecret, relaySecretDir, relaySecretPath } from "../../src/trust/relay-secret.ts";

const made: string[] = [];
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function temp(): string {
  const dir = mkdtempSync(join(tmpdir(), "pi-tasks-secret-"));
  made.push(dir);
  return dir;
}

function refusal(call: () => unknown): TaskError {
  try {
    call();
  } catch (error) {
    expect(error).toBeInstanceOf(TaskError);
    return error as TaskError;
  }
  throw new Error("expected RELAY_SECRET_INVALID");
}

const mode = (path: string) => statSync(path).mode & 0o777;

describe("the relay secret file", () => {
  test("made on first use: 32 random bytes, file 0600 in a 0700 directory; later reads return the same secret", () => {
    const dir = join(temp(), "secrets");
    const path = join(dir, "18790.secret");
    const secret = ensureRelaySecret(path);
    expect(secret.length).toBe(relaySecretBytes);
    expect([mode(dir), mode(path)]).toEqual([0o700, 0o600]);
    expect(ensureRelaySecret(path).equals(secret)).toBe(true);
    expect(readRelaySecret(path)!.equals(secret)).toBe(true);
    expect(readFileSync(path, "utf8").trim()).toBe(secret.toString("base64url"));
  });

  test("Pis making it at once end with one secret", async () => {
    const path = join(temp(), "secrets", "4100.secret");
    const script = `import { ensureRelaySecret } from ${JSON.stringify(join(import.meta.dir, "../../src/trust/relay-secret.ts"))}; console.log(ensureRelaySecret(${JSON.stringify(path)}).toString("hex"));`;
    const runs = await Promise.all(
      [1, 2, 3, 4].map(async () => {
        const child = Bun.spawn([process.execPath, "-e", script], { stdout: "pipe" });
        return (await new Response(child.stdout).text()).trim();
      }),
    );
    expect(new Set(runs).size).toBe(1);
    expect(runs[0]).toBe(readRelaySecret(path)!.toString("hex"));
  });

  test("it lives in the user's directory, not in PI_TASKS_HOME: every home of the user finds the same file", () => {
    expect(relaySecretPath({ PI_TASKS_HOME: "/a" }, 18790)).toBe(relaySecretPath({ PI_TASKS_HOME: "/b" }, 18790));
    expect(relaySecretDir({ PI_TASKS_RELAY_SECRET_DIR: "/x/y" })).toBe("/x/y");
    expect(relaySecretPath({ PI_TASKS_RELAY_SECRET_DIR: "/x/y" }, 4100)).toBe("/x/y/4100.secret");
  });

  test("group or other access, a symlink, a directory open to others, or bad content is RELAY_SECRET_INVALID naming the fix; nothing is replaced", () => {
    const dir = join(temp(), "secrets");
    const path = join(dir, "1.secret");
    const secret = ensureRelaySecret(path);
    chmodSync(path, 0o644);
    const open = refusal(() => readRelaySecret(path));
    expect(open.code).toBe("RELAY_SECRET_INVALID");
    expect(open.message).toContain(`chmod 600 ${path}`);
    expect(() => ensureRelaySecret(path)).toThrow("chmod 600");
    chmodSync(path, 0o600);
    expect(readRelaySecret(path)!.equals(secret)).toBe(true);

    const link = join(dir, "2.secret");
    symlinkSync(path, link);
    expect(refusal(() => readRelaySecret(link)).message).toContain("symbolic link");

    const short = join(dir, "3.secret");
    writeFileSync(short, "too-short\n", { mode: 0o600 });
    expect(refusal(() => ensureRelaySecret(short)).message).toContain(`at least ${relaySecretBytes} bytes`);
    expect(readFileSync(short, "utf8")).toBe("too-short\n");

    const wide = join(temp(), "wide");
    mkdirSync(wide, { mode: 0o755 });
    chmodSync(wide, 0o755);
    expect(refusal(() => ensureRelaySecret(join(wide, "4.secret"))).message).toContain(`chmod 700 ${wide}`);
    expect(existsSync(join(wide, "4.secret"))).toBe(false);

    const linkedDir = join(temp(), "linked");
    symlinkSync(dir, linkedDir);
    expect(refusal(() => ensureRelaySecret(join(linkedDir, "5.secret"))).message).toContain("symbolic link");
  });

  test.skipIf(process.getuid?.() !== 0)("a file or directory of another user is refused (as root: chown)", () => {
    const dir = join(temp(), "secrets");
    const path = join(dir, "1.secret");
    ensureRelaySecret(path);
    chownSync(path, 65534, 65534);
    expect(refusal(() => readRelaySecret(path)).message).toContain("belongs to uid 65534");
    const foreign = join(temp(), "foreign");
    mkdirSync(foreign, { mode: 0o700 });
    chownSync(foreign, 65534, 65534);
    expect(refusal(() => ensureRelaySecret(join(foreign, "2.secret"))).message).toContain("belongs to uid 65534");
  });
});

/** The six permission bits of group and others, one at a time. */
const GROUP_OTHER_BITS = [0o040, 0o020, 0o010, 0o004, 0o002, 0o001];
const octal = (value: number) => `0${value.toString(8)}`;

describe("the modes of the secret file and its directory, bit by bit", () => {
  test("a secret file group may read (0640) or others may read (0604) is RELAY_SECRET_INVALID naming `chmod 600`, and so is every other group or others bit; exactly 0600 (or 0400) is read", () => {
    // Guards relay-secret.ts checkOwnership on the file (readRelaySecret): GROUP_OTHER_BITS = 0o077, group AND others.
    const dir = join(temp(), "secrets");
    const path = join(dir, "1.secret");
    const secret = ensureRelaySecret(path);
    for (const refused of [0o640, 0o604, ...GROUP_OTHER_BITS.map((bit) => 0o600 | bit)]) {
      chmodSync(path, refused);
      for (const read of [() => readRelaySecret(path), () => ensureRelaySecret(path)]) {
        const error = refusal(read);
        expect({ mode: octal(refused), code: error.code, problem: error.details.problem, fix: error.details.fix }).toEqual({
          mode: octal(refused),
          code: "RELAY_SECRET_INVALID",
          problem: `group or others may use the file (mode ${octal(refused)})`,
          fix: expect.stringContaining(`chmod 600 ${path}`),
        });
      }
    }
    for (const good of [0o600, 0o400]) {
      chmodSync(path, good);
      expect({ mode: octal(good), same: readRelaySecret(path)?.equals(secret) }).toEqual({ mode: octal(good), same: true });
    }
  });

  test("a directory group may use (0750) or others may use (0705) is RELAY_SECRET_INVALID naming `chmod 700` when the secret is made there, and so is every other group or others bit; nothing is made in it; exactly 0700 is used", () => {
    // Guards relay-secret.ts ensureSecretDir → checkOwnership on the directory: GROUP_OTHER_BITS = 0o077.
    for (const refused of [0o750, 0o705, ...GROUP_OTHER_BITS.map((bit) => 0o700 | bit)]) {
      const dir = join(temp(), "secrets");
      mkdirSync(dir);
      chmodSync(dir, refused);
      const path = join(dir, "1.secret");
      const error = refusal(() => ensureRelaySecret(path));
      expect({ mode: octal(refused), code: error.code, problem: error.details.problem, fix: error.details.fix }).toEqual({
        mode: octal(refused),
        code: "RELAY_SECRET_INVALID",
        problem: `group or others may use the directory (mode ${octal(refused)})`,
        fix: expect.stringContaining(`chmod 700 ${dir}`),
      });
      expect(existsSync(path)).toBe(false);
      chmodSync(dir, 0o700);
      expect(ensureRelaySecret(path).length).toBe(relaySecretBytes);
    }
  });
});

describe("what the secret file holds", () => {
  const secretText = (bytes: number) => `${Buffer.alloc(bytes, 0xfb).toString("base64url")}\n`;

  test("a directory where the secret file should be is RELAY_SECRET_INVALID (not a raw read error)", () => {
    // Guards relay-secret.ts readRelaySecret: the regular-file check.
    const dir = join(temp(), "secrets");
    const path = join(dir, "1.secret");
    mkdirSync(path, { recursive: true, mode: 0o700 });
    const error = refusal(() => readRelaySecret(path));
    expect(error.code).toBe("RELAY_SECRET_INVALID");
    expect(error.details.problem).toBe("it is not a regular file");
  });

  test(`a file of exactly ${maxRelaySecretFileBytes} bytes is read; one byte more is refused as too large`, () => {
    // Guards relay-secret.ts readRelaySecret: `stat.size > maxRelaySecretFileBytes`.
    const dir = join(temp(), "secrets");
    mkdirSync(dir, { mode: 0o700 });
    const largest = join(dir, "1.secret");
    writeFileSync(largest, `${"A".repeat(maxRelaySecretFileBytes - 1)}\n`, { mode: 0o600 });
    expect(readRelaySecret(largest)?.length).toBeGreaterThanOrEqual(minRelaySecretBytes);
    const larger = join(dir, "2.secret");
    writeFileSync(larger, `${"A".repeat(maxRelaySecretFileBytes)}\n`, { mode: 0o600 });
    const error = refusal(() => readRelaySecret(larger));
    expect(error.code).toBe("RELAY_SECRET_INVALID");
    expect(error.details.problem).toBe(`it is larger than ${maxRelaySecretFileBytes} bytes`);
  });

  test(`a secret of ${minRelaySecretBytes} bytes is read; ${minRelaySecretBytes - 1} bytes, or text outside the base64url alphabet, is refused`, () => {
    // Guards relay-secret.ts parseSecret: `secret.length < minRelaySecretBytes` and the base64url alphabet.
    const dir = join(temp(), "secrets");
    mkdirSync(dir, { mode: 0o700 });
    const exact = join(dir, "1.secret");
    writeFileSync(exact, secretText(minRelaySecretBytes), { mode: 0o600 });
    expect(readRelaySecret(exact)).toEqual(Buffer.alloc(minRelaySecretBytes, 0xfb));
    const problem = `it does not hold a secret of at least ${minRelaySecretBytes} bytes as base64url text`;
    const bad = {
      "one byte short": secretText(minRelaySecretBytes - 1),
      "standard base64 (+ / =)": `${Buffer.alloc(minRelaySecretBytes, 0xfb).toString("base64")}\n`,
      "two lines": `${secretText(minRelaySecretBytes)}${secretText(minRelaySecretBytes)}`,
    };
    for (const [name, text] of Object.entries(bad)) {
      const path = join(dir, "2.secret");
      writeFileSync(path, text, { mode: 0o600 });
      const error = refusal(() => readRelaySecret(path));
      expect({ name, code: error.code, problem: error.details.problem }).toEqual({ name, code: "RELAY_SECRET_INVALID", problem });
      expect(readFileSync(path, "utf8")).toBe(text);
    }
  });
});

describe("which relay must prove the secret (relaySecretPlan)", () => {
  test("the default port: always (the secret is made); WOLFPACK_PORT, or a loopback URL named explicitly: once the user has a secret for the port; other URLs: never, unless PI_TASKS_RELAY_SECRET_FILE", () => {
    const dir = join(temp(), "secrets");
    const env = { PI_TASKS_RELAY_SECRET_DIR: dir };
    expect(relaySecretPlan(env, relayConfigFromEnv(env))).toEqual({ file: join(dir, "18790.secret"), mandatory: true, create: true });
    const wolfpack = { ...env, WOLFPACK_PORT: "4100" };
    expect(relaySecretPlan(wolfpack, relayConfigFromEnv(wolfpack))).toEqual({
      file: join(dir, "4100.secret"),
      mandatory: false,
      create: false,
    });
    ensureRelaySecret(join(dir, "4100.secret"));
    expect(relaySecretPlan(wolfpack, relayConfigFromEnv(wolfpack))?.mandatory).toBe(true);
    // What `pi-tasks spawn` gives its workers: the same relay, named by URL.
    const worker = { ...wolfpack, PI_TASKS_RELAY_URL: "http://127.0.0.1:4100" };
    expect(relaySecretPlan(worker, relayConfigFromEnv(worker))).toEqual({ file: join(dir, "4100.secret"), mandatory: true, create: false });
    // The same relay named by URL alone (`pi-tasks list --relay URL` in a shell without WOLFPACK_PORT): its secret.
    const named = { ...env, PI_TASKS_RELAY_URL: "http://127.0.0.1:4100" };
    expect(relaySecretPlan(named, relayConfigFromEnv(named))).toEqual({ file: join(dir, "4100.secret"), mandatory: true, create: false });
    const elsewhere = { ...env, PI_TASKS_RELAY_URL: "http://127.0.0.1:4200" };
    expect(relaySecretPlan(elsewhere, relayConfigFromEnv(elsewhere))).toBeUndefined();
    const remote = { ...env, PI_TASKS_RELAY_URL: "https://relay.example.org", PI_TASKS_RELAY_SECRET_FILE: "/keys/shared.secret" };
    expect(relaySecretPlan(remote, relayConfigFromEnv(remote))).toEqual({ file: "/keys/shared.secret", mandatory: true, create: false });
  });
});

describe("the relay's memory of token ids", () => {
  test("an id is accepted once while its token lives, forgotten after", () => {
    const cache = createTokenReplayCache();
    expect(cache.remember("a", 1_000, 0)).toEqual({ fresh: true });
    expect(cache.remember("a", 1_000, 500)).toEqual({ fresh: false, replayed: true });
    expect(cache.remember("b", 1_500, 999)).toEqual({ fresh: true });
    expect(cache.remember("c", 2_000, 1_000)).toEqual({ fresh: true });
    expect(cache.size()).toBe(2);
  });

  test("bounded: full of live ids it refuses (with the time until the oldest expires) instead of forgetting one", () => {
    const cache = createTokenReplayCache(3);
    for (const id of ["a", "b", "c"]) expect(cache.remember(id, 1_000, 0).fresh).toBe(true);
    expect(cache.remember("d", 1_000, 400)).toEqual({ fresh: false, replayed: false, retryAfterMs: 600 });
    expect(cache.remember("a", 1_000, 400)).toEqual({ fresh: false, replayed: true });
    expect(cache.remember("d", 2_000, 1_000)).toEqual({ fresh: true });
    expect(relayTokenReplayEntries).toBeGreaterThan(0);
  });
});
