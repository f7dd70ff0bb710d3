/**
 * The revival watch of extensions/pi-tasks/relay-revival.ts with its look stubbed: one look at a
 * time, at most one per `relayReviveIntervalMs` (tested at its edge), the person's stop reported as
 * `RELAY_STOPPED`, and `onStarted` only when this Pi started the relay it uses.
 */
import { describe, expect, test } from "bun:test";
import { createRelayRevival } from "../../extensions/pi-tasks/relay-revival.ts";
import type { RelayRevival } from "../../src/host/embedded-relay.ts";
import { relayReviveIntervalMs } from "../../src/protocol/limits.ts";
import { relayConfigFromEnv } from "../../src/relay-client/config.ts";

const URL_IN_USE = "http://127.0.0.1:18790";

function watch(found: () => RelayRevival) {
  let now = 0;
  const looks: number[] = [];
  const started: string[] = [];
  let release: (() => void) | undefined;
  const env = { WOLFPACK_PORT: "18790" };
  const revival = createRelayRevival({
    env,
    config: relayConfigFromEnv(env),
    url: URL_IN_USE,
    now: () => now,
    onStarted: (url) => started.push(url),
    revive: () => {
      looks.push(now);
      return new Promise((resolve) => {
        release = () => resolve(found());
      });
    },
  });
  const settle = async () => {
    release?.();
    release = undefined;
    await Bun.sleep(0);
  };
  return { revival, looks, started, settle, at: (ms: number) => (now = ms) };
}

describe("the relay revival watch", () => {
  test("a look follows the rules the run started with: a relay the person named stays theirs, whatever the environment says later", async () => {
    const env: Record<string, string | undefined> = { PI_TASKS_RELAY_URL: "http://127.0.0.1:9" };
    const seen: string[] = [];
    const revival = createRelayRevival({
      env,
      config: relayConfigFromEnv(env),
      url: "http://127.0.0.1:9",
      now: () => 0,
      onStarted: () => undefined,
      revive: async (options) => {
        seen.push(options.config.source);
        return { kind: "not-embedded" };
      },
    });
    // The environment the run started with is gone (a test put it back; nothing else changes a Pi's).
    delete env.PI_TASKS_RELAY_URL;
    revival.unreachable();
    await Bun.sleep(0);
    expect(seen).toEqual(["PI_TASKS_RELAY_URL"]);
  });

  test("one look at a time, and the next only relayReviveIntervalMs after the last began", async () => {
    const fx = watch(() => ({ kind: "looked", relay: { url: URL_IN_USE, state: "running" } }));
    fx.revival.unreachable();
    fx.revival.unreachable();
    expect(fx.looks).toEqual([0]);
    await fx.settle();
    fx.at(relayReviveIntervalMs - 1);
    fx.revival.unreachable();
    expect(fx.looks).toEqual([0]);
    fx.at(relayReviveIntervalMs);
    fx.revival.unreachable();
    expect(fx.looks).toEqual([0, relayReviveIntervalMs]);
    await fx.settle();
    expect(fx.started).toEqual([]);
  });

  test("the person's stop is RELAY_STOPPED, naming the port; a later look that finds none clears it", async () => {
    let found: RelayRevival = { kind: "stopped", port: 18790, mark: { at: "2026-12-07T21:40:00.000Z", by: 4242 } };
    const fx = watch(() => found);
    expect(fx.revival.problem()).toBeUndefined();
    fx.revival.unreachable();
    await fx.settle();
    expect(fx.revival.problem()).toMatchObject({ code: "RELAY_STOPPED", details: { port: 18790, by: 4242 } });
    expect(fx.revival.problem()!.message).toStartWith("relay on port 18790 stopped by you (/tasks relay stop at ");
    found = { kind: "looked", relay: { url: URL_IN_USE, state: "running" } };
    fx.at(relayReviveIntervalMs);
    fx.revival.unreachable();
    await fx.settle();
    expect(fx.revival.problem()).toBeUndefined();
  });

  test("a pass that reached the relay ends a stop the last look found (a later outage is not called a stop before it is looked at)", async () => {
    const fx = watch(() => ({ kind: "stopped", port: 18790, mark: { at: "2026-12-07T21:40:00.000Z", by: 4242 } }));
    fx.revival.unreachable();
    await fx.settle();
    expect(fx.revival.problem()?.code).toBe("RELAY_STOPPED");
    fx.revival.reached();
    expect(fx.revival.problem()).toBeUndefined();
  });

  test("onStarted only when the look started the relay this Pi uses", async () => {
    let found: RelayRevival = { kind: "looked", relay: { url: "http://127.0.0.1:18791", state: "started" } };
    const fx = watch(() => found);
    fx.revival.unreachable();
    await fx.settle();
    expect(fx.started).toEqual([]);
    found = { kind: "looked", relay: { url: URL_IN_USE, state: "started" } };
    fx.at(relayReviveIntervalMs);
    fx.revival.unreachable();
    await fx.settle();
    expect(fx.started).toEqual([URL_IN_USE]);
  });
});
