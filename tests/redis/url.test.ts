/**
 * The `--store` URL (src/relay-server/store/redis/url.ts): what the relay connects to, what it
 * prints (never a password), which URLs are usage errors (never echoing what was typed), and where
 * the password comes from: a file (`PI_TASKS_REDIS_PASSWORD_FILE`, 0600, the user's own) or the
 * environment (`PI_TASKS_REDIS_PASSWORD`) — never the URL, which every user can read in `ps`.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { chmodSync, chownSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { thrown } from "../../testkit/async.ts";
import { DEFAULT_REDIS_PORT } from "../../src/protocol/names.ts";
import { parseRedisUrl, REDIS_PASSWORD_FILE_VARIABLE, REDIS_PASSWORD_VARIABLE } from "../../src/relay-server/store/redis/url.ts";

/** A user id that is not this process's (nobody). */
const OTHER_UID = 65_534;
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A password file holding `text` with `mode`. */
function passwordFile(text: string, mode = 0o600): string {
  const dir = mkdtempSync(join(tmpdir(), "pi-tasks-redis-password-"));
  dirs.push(dir);
  const path = join(dir, "redis.password");
  writeFileSync(path, text, { mode });
  chmodSync(path, mode);
  return path;
}

describe("the Redis store URL", () => {
  test("host, default port and database; rediss is TLS", () => {
    expect(parseRedisUrl("redis://redis.example")).toEqual({
      display: "redis://redis.example/0",
      host: "redis.example",
      port: DEFAULT_REDIS_PORT,
      database: 0,
      tls: false,
    });
    expect(parseRedisUrl("rediss://10.0.0.5:6380/3")).toMatchObject({
      display: "rediss://10.0.0.5:6380/3",
      port: 6380,
      database: 3,
      tls: true,
    });
    expect(parseRedisUrl("redis://[::1]:7000/")).toMatchObject({ host: "[::1]", port: 7000, database: 0 });
  });

  test("the password comes from the environment or the library's option, and is never displayed", () => {
    const fromEnv = parseRedisUrl("redis://127.0.0.1:7000/1", { [REDIS_PASSWORD_VARIABLE]: "p@ss/w:rd" });
    expect(fromEnv.password).toBe("p@ss/w:rd");
    expect(fromEnv.display).toBe("redis://127.0.0.1:7000/1");
    expect(parseRedisUrl("redis://us%40er@host", { [REDIS_PASSWORD_VARIABLE]: "pw" })).toMatchObject({ username: "us@er", password: "pw" });
    expect(() => parseRedisUrl("redis://us%zz@host")).toThrow("has a user name that is not valid percent-encoding");
    expect(parseRedisUrl("redis://host", {}, "given").password).toBe("given");
  });

  test("a password in the URL is refused (visible in ps), naming both other sources and echoing no password", () => {
    for (const text of ["redis://:s3cr%40t@127.0.0.1:7000/1", "redis://user:s3cr%40t@127.0.0.1", "rediss://:s3cr%2Ft@host:6380"]) {
      const error = thrown(() => parseRedisUrl(text, { [REDIS_PASSWORD_VARIABLE]: "other" }));
      expect({ text, code: error.code }).toEqual({ text, code: "REDIS_PASSWORD_IN_URL" });
      expect(error.message).toContain(REDIS_PASSWORD_FILE_VARIABLE);
      expect(error.message).toContain(REDIS_PASSWORD_VARIABLE);
      expect(error.message).toContain("***");
      expect(JSON.stringify(error.toJSON())).not.toContain("s3cr");
    }
  });

  test("anything else is CLI_USAGE naming the problem, and never echoes the text — passwords with @ and / included", () => {
    const cases: [string, string][] = [
      ["not a url", "is not a URL"],
      ["http://host:6379", "has the scheme http"],
      ["http://:hunter2@host:6379", "has the scheme http"],
      ["redis://host/db1", "has a path that is not a database number"],
      ["redis://host/0/1", "has a path that is not a database number"],
      ["redis://host?tls=1", "has a query or fragment"],
      ["redis://:hunter2@host:99999", "is not a URL"],
      ["redis://:hun@ter2@host:99999", "is not a URL"],
      ["redis://:hun/ter2@host:99999", "is not a URL"],
      ["redis://u:hun@t/er2@host:99999", "has a path that is not a database number"],
      ["redis://:hunter2@host/x", "has a path that is not a database number"],
      ["redis://:hun%2Fter2@host?x=1", "has a query or fragment"],
      // "/" cuts the authority short: a parser takes "ter2" for the host and the rest for a path.
      ["redis://:hun@ter2/wd@127.0.0.1:6379", "has a path that is not a database number"],
    ];
    for (const [text, problem] of cases) {
      const error = thrown(() => parseRedisUrl(text));
      expect({ text, code: error.code, problem: error.details.problem }).toEqual({ text, code: "CLI_USAGE", problem });
      expect(error.message).toContain("redis://HOST[:PORT][/DB]");
      const shown = JSON.stringify(error.toJSON());
      for (const secret of ["hunter2", "hun", "ter2", "er2", "wd@"])
        expect({ text, shown: shown.includes(secret) }).toEqual({ text, shown: false });
    }
  });
});

describe("the password file (PI_TASKS_REDIS_PASSWORD_FILE)", () => {
  test("a 0600 file of the user's own: its text (less one final newline) is the password", () => {
    const path = passwordFile("p@ss/w:rd\n");
    const target = parseRedisUrl("redis://127.0.0.1:7000", { [REDIS_PASSWORD_FILE_VARIABLE]: path });
    expect(target.password).toBe("p@ss/w:rd");
    expect(target.display).toBe("redis://127.0.0.1:7000/0");
  });

  test("open to group or others, owned by another user, a symbolic link, missing or empty: REDIS_PASSWORD_FILE_INVALID naming the fix, never the password", () => {
    const open = passwordFile("hunter2", 0o640);
    const theirs = passwordFile("hunter2");
    chownSync(theirs, OTHER_UID, OTHER_UID);
    const linked = join(dirs[0]!, "linked");
    symlinkSync(passwordFile("hunter2"), linked);
    const cases: [string, string][] = [
      [open, `chmod 600 ${open}`],
      [theirs, `uid ${OTHER_UID}`],
      [linked, "symbolic link"],
      [join(dirs[0]!, "missing"), "does not exist"],
      [passwordFile("\n"), "empty"],
    ];
    for (const [path, words] of cases) {
      const error = thrown(() => parseRedisUrl("redis://host", { [REDIS_PASSWORD_FILE_VARIABLE]: path }));
      expect({ path, code: error.code }).toEqual({ path, code: "REDIS_PASSWORD_FILE_INVALID" });
      expect({ path, named: error.message.includes(words) }).toEqual({ path, named: true });
      expect(JSON.stringify(error.toJSON())).not.toContain("hunter2");
    }
  });

  test("both the file and the variable set: INVALID_CONFIGURATION (which one wins would be a guess)", () => {
    const error = thrown(() =>
      parseRedisUrl("redis://host", { [REDIS_PASSWORD_FILE_VARIABLE]: passwordFile("a"), [REDIS_PASSWORD_VARIABLE]: "b" }),
    );
    expect(error.code).toBe("INVALID_CONFIGURATION");
    expect(error.message).toContain(REDIS_PASSWORD_FILE_VARIABLE);
  });
});
