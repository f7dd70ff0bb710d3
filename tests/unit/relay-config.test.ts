/**
 * Where the client finds the relay (docs/operations.md): `PI_TASKS_RELAY_URL` (a bare
 * origin) wins, else `http://127.0.0.1:${WOLFPACK_PORT ?? DEFAULT_RELAY_PORT}`; plain HTTP only on
 * loopback (`127.0.0.1`, `[::1]`, `localhost`), HTTPS to any host.
 */
import { describe, expect, test } from "bun:test";
import { TaskError } from "../../src/protocol/errors.ts";
import { maxTcpPort, minTcpPort } from "../../src/protocol/limits.ts";
import { DEFAULT_RELAY_PORT } from "../../src/protocol/names.ts";
import { normaliseRelayUrl, relayUrlFromEnv } from "../../src/relay-client/config.ts";

function configurationError(run: () => unknown): TaskError {
  let thrown: unknown;
  try {
    const value = run();
    throw new Error(`expected INVALID_CONFIGURATION, got ${JSON.stringify(value)}`);
  } catch (error) {
    thrown = error;
  }
  expect(thrown).toBeInstanceOf(TaskError);
  const failure = thrown as TaskError;
  expect(failure.code).toBe("INVALID_CONFIGURATION");
  expect(failure.retryable).toBe(false);
  return failure;
}

describe("relayUrlFromEnv", () => {
  test("defaults to loopback on DEFAULT_RELAY_PORT", () => {
    expect(relayUrlFromEnv({})).toBe(`http://127.0.0.1:${DEFAULT_RELAY_PORT}`);
    expect(relayUrlFromEnv({ WOLFPACK_PORT: "", PI_TASKS_RELAY_URL: "" })).toBe(`http://127.0.0.1:${DEFAULT_RELAY_PORT}`);
    expect(relayUrlFromEnv({ WOLFPACK_PORT: "   ", PI_TASKS_RELAY_URL: "  " })).toBe(`http://127.0.0.1:${DEFAULT_RELAY_PORT}`);
  });

  test("PI_TASKS_RELAY_URL wins over WOLFPACK_PORT", () => {
    expect(relayUrlFromEnv({ PI_TASKS_RELAY_URL: "http://127.0.0.1:4100", WOLFPACK_PORT: "4200" })).toBe("http://127.0.0.1:4100");
    expect(relayUrlFromEnv({ PI_TASKS_RELAY_URL: "https://relay.example.org", WOLFPACK_PORT: "4200" })).toBe("https://relay.example.org");
    // Even an invalid WOLFPACK_PORT is irrelevant when the URL is given.
    expect(relayUrlFromEnv({ PI_TASKS_RELAY_URL: "http://localhost:4100", WOLFPACK_PORT: "abc" })).toBe("http://localhost:4100");
    // …and an invalid URL is not rescued by a valid port.
    configurationError(() => relayUrlFromEnv({ PI_TASKS_RELAY_URL: "http://10.1.2.3:4100", WOLFPACK_PORT: "4200" }));
  });

  test("WOLFPACK_PORT accepts minTcpPort..maxTcpPort", () => {
    expect(relayUrlFromEnv({ WOLFPACK_PORT: String(minTcpPort) })).toBe(`http://127.0.0.1:${minTcpPort}`);
    expect(relayUrlFromEnv({ WOLFPACK_PORT: String(maxTcpPort) })).toBe(`http://127.0.0.1:${maxTcpPort}`);
    expect(relayUrlFromEnv({ WOLFPACK_PORT: "4242" })).toBe("http://127.0.0.1:4242");
  });

  test("WOLFPACK_PORT outside the range or not a decimal integer is INVALID_CONFIGURATION", () => {
    for (const port of [
      String(minTcpPort - 1),
      String(maxTcpPort + 1),
      "abc",
      "-1",
      "80.5",
      "1e3",
      "0x50",
      "80abc",
      "99999999999999999999",
    ]) {
      const failure = configurationError(() => relayUrlFromEnv({ WOLFPACK_PORT: port }));
      expect(failure.details.WOLFPACK_PORT).toBe(port);
    }
  });
});

describe("normaliseRelayUrl", () => {
  test("plain http is accepted on loopback hosts and returned as a bare origin", () => {
    expect(normaliseRelayUrl("http://127.0.0.1:18790")).toBe("http://127.0.0.1:18790");
    expect(normaliseRelayUrl("http://127.0.0.1:18790/")).toBe("http://127.0.0.1:18790");
    expect(normaliseRelayUrl("http://localhost:18790")).toBe("http://localhost:18790");
    expect(normaliseRelayUrl("http://LOCALHOST:18790")).toBe("http://localhost:18790");
    expect(normaliseRelayUrl("http://[::1]:18790")).toBe("http://[::1]:18790");
    expect(normaliseRelayUrl("http://127.0.0.1")).toBe("http://127.0.0.1");
  });

  test("https is accepted on any host", () => {
    expect(normaliseRelayUrl("https://relay.example.org")).toBe("https://relay.example.org");
    expect(normaliseRelayUrl("https://relay.example.org:8443/")).toBe("https://relay.example.org:8443");
    expect(normaliseRelayUrl("https://10.1.2.3:18790")).toBe("https://10.1.2.3:18790");
    expect(normaliseRelayUrl("https://127.0.0.1:18790")).toBe("https://127.0.0.1:18790");
  });

  test("plain http to a non-loopback host is INVALID_CONFIGURATION", () => {
    for (const url of [
      "http://10.1.2.3:18790",
      "http://100.64.0.1:18790",
      "http://relay.example.org",
      "http://127.0.0.2:18790",
      "http://0.0.0.0:18790",
      "http://[::2]:18790",
    ]) {
      const failure = configurationError(() => normaliseRelayUrl(url));
      expect(failure.details.url).toBe(url);
    }
  });

  test("a path, query, fragment or credentials is INVALID_CONFIGURATION", () => {
    for (const url of [
      "http://127.0.0.1:18790/api",
      "http://127.0.0.1:18790/api/task-relay/volatile-v1",
      "http://127.0.0.1:18790/?x=1",
      "http://127.0.0.1:18790?x=1",
      "http://127.0.0.1:18790/#frag",
      "http://user@127.0.0.1:18790",
      "http://user:pw@127.0.0.1:18790",
      "https://user:pw@relay.example.org",
      "https://relay.example.org/relay",
    ]) {
      configurationError(() => normaliseRelayUrl(url));
    }
  });

  test("a non-URL or another scheme is INVALID_CONFIGURATION", () => {
    for (const url of ["not a url", "127.0.0.1:18790", "ftp://127.0.0.1:18790", "ws://127.0.0.1:18790", "file:///tmp/relay", ""]) {
      configurationError(() => normaliseRelayUrl(url));
    }
  });
});
