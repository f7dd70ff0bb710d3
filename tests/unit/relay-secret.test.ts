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
import { relaySecretBytes, relayTokenReplayEntries } from "../../src/protocol/limits.ts";
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

describe("which relay must prove the secret (relaySecretPlan)", () => {
  test("the default port: always (the secret is made); WOLFPACK_PORT or the default URL named explicitly: once the user has a secret for the port; other URLs: never, unless PI_TASKS_RELAY_SECRET_FILE", () => {
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
    const elsewhere = { ...env, PI_TASKS_RELAY_URL: "http://127.0.0.1:4100" };
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
