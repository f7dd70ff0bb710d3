/**
 * One real relay (started through its CLI) per test file, optionally behind a fault proxy, with
 * cleanup steps that run after each test (last registered first, failures ignored).
 */
import { afterAll, afterEach, beforeAll } from "bun:test";
import { createFaultProxy, type FaultProxy } from "../../testkit/fault-proxy.ts";
import { type RelayProcess, startRelayProcess } from "../../testkit/relay-process.ts";
import { surfaceTeardownFailures } from "./teardown-check.ts";

export interface RelayFixture {
  /** The relay; assign a replacement after restarting it (e.g. on the same port). */
  relay: RelayProcess;
  /** The proxy in front of the relay (only with `{proxy: true}`); cleared and released after each test. */
  readonly proxy: FaultProxy;
  /** Runs `step` after the current test. */
  defer(step: () => unknown): void;
}

export function useRelayFixture(options: { proxy?: boolean } = {}): RelayFixture {
  let relay: RelayProcess | undefined;
  let proxy: FaultProxy | undefined;
  const steps: (() => unknown)[] = [];
  beforeAll(async () => {
    relay = await startRelayProcess();
    if (options.proxy === true) proxy = createFaultProxy({ target: relay.url });
  });
  afterEach(async () => {
    proxy?.clear();
    proxy?.release();
    for (const step of steps.splice(0).reverse())
      await Promise.resolve()
        .then(step)
        .catch(() => undefined);
    // A Pi a step stopped fails this test if its teardown check did (tests/helpers/teardown-check.ts).
    surfaceTeardownFailures();
  });
  afterAll(async () => {
    await proxy?.stop();
    await relay?.stop();
  });
  return {
    get relay() {
      if (relay === undefined) throw new Error("the relay fixture is used before beforeAll ran");
      return relay;
    },
    set relay(next: RelayProcess) {
      relay = next;
    },
    get proxy() {
      if (proxy === undefined) throw new Error("this relay fixture has no proxy");
      return proxy;
    },
    defer: (step) => steps.push(step),
  };
}
