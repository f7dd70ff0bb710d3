/**
 * The relay keeps an idle client's socket as long as it says (`Keep-Alive: timeout=…`, the relay's
 * `relayIdleTimeoutSeconds`), on Bun and on Node alike: a Node client (undici) that is not told
 * closes an idle socket after 4 s of its own, so an idle Pi's every watch and pass opened a new
 * connection to a relay on Bun (issue 41, bench/measure/idle.ts).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { relayIdleTimeoutSeconds } from "../../src/protocol/limits.ts";
import { type RelayProcess, startRelayProcess } from "../../testkit/relay-process.ts";
import { RELAY_RUNTIMES, RUNTIMES } from "../helpers/redis-kit.ts";

const started: RelayProcess[] = [];
afterAll(async () => {
  await Promise.all(started.map((relay) => relay.stop()));
});

describe.each(RUNTIMES)("the relay on %s", (runtime) => {
  test("says how long an idle socket stays open, and keeps the connection", async () => {
    const relay = await startRelayProcess({ command: [...RELAY_RUNTIMES[runtime]] });
    started.push(relay);
    const reply = await fetch(`${relay.url}/api/task-relay/profile`);
    await reply.text();
    expect(reply.status).toBe(200);
    expect(reply.headers.get("keep-alive")).toBe(`timeout=${relayIdleTimeoutSeconds}`);
    expect(reply.headers.get("connection")).not.toBe("close");
  });
});
