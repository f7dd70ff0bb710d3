/**
 * The `--store` URL (src/relay-server/store/redis/url.ts): what the relay connects to, what it
 * prints (never a password), and which URLs are usage errors.
 */
import { describe, expect, test } from "bun:test";
import { thrown } from "../../kit/async.ts";
import { redisDefaultPort } from "../../src/protocol/limits.ts";
import { parseRedisUrl, REDIS_PASSWORD_VARIABLE } from "../../src/relay-server/store/redis/url.ts";

describe("the Redis store URL", () => {
  test("host, default port and database; rediss is TLS", () => {
    expect(parseRedisUrl("redis://redis.example")).toEqual({
      url: "redis://redis.example/0",
      display: "redis://redis.example/0",
      host: "redis.example",
      port: redisDefaultPort,
      database: 0,
      tls: false,
    });
    expect(parseRedisUrl("rediss://10.0.0.5:6380/3")).toMatchObject({ url: "rediss://10.0.0.5:6380/3", display: "rediss://10.0.0.5:6380/3", port: 6380, database: 3, tls: true });
    expect(parseRedisUrl("redis://[::1]:7000/")).toMatchObject({ host: "[::1]", port: 7000, database: 0 });
  });

  test("the password comes from the URL, else from the environment, and is never displayed", () => {
    const fromUrl = parseRedisUrl("redis://:s%40cret@127.0.0.1:7000/1", { [REDIS_PASSWORD_VARIABLE]: "ignored" });
    expect(new URL(fromUrl.url).password).toBe("s%40cret");
    expect(fromUrl.display).toBe("redis://127.0.0.1:7000/1");
    const fromEnv = parseRedisUrl("redis://127.0.0.1:7000", { [REDIS_PASSWORD_VARIABLE]: "p@ss word" });
    expect(decodeURIComponent(new URL(fromEnv.url).password)).toBe("p@ss word");
    expect(fromEnv.display).not.toContain("pass");
    expect(new URL(parseRedisUrl("redis://user:pw@host").url).username).toBe("user");
    expect(new URL(parseRedisUrl("redis://host", {}, "given").url).password).toBe("given");
  });

  test("anything else is CLI_USAGE, naming the problem and hiding credentials", () => {
    const cases: [string, string][] = [
      ["not a url", "is not a URL"],
      ["http://host:6379", "has the scheme http"],
      ["redis://host/db1", "has a path that is not a database number"],
      ["redis://host/0/1", "has a path that is not a database number"],
      ["redis://host?tls=1", "has a query or fragment"],
      ["redis://:hunter2@host:99999", "is not a URL"],
    ];
    for (const [text, problem] of cases) {
      const error = thrown(() => parseRedisUrl(text));
      expect({ text, code: error.code, problem: error.details.problem }).toEqual({ text, code: "CLI_USAGE", problem });
      expect(error.message).toContain("redis://HOST[:PORT][/DB]");
      expect(error.message).not.toContain("hunter2");
    }
  });
});
