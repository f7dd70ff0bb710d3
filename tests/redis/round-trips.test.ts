/**
 * One Redis round trip per send (issue 27): a relay on the Redis store judges a send's binding and
 * admits its envelope in one Lua script (BOUND_ADMIT), so N sends cost N script calls — counted by
 * Redis itself (`INFO commandstats`, EVALSHA and EVAL), less the relay's own maintenance (one call a
 * second) during the run.
 */
import { expect, setDefaultTimeout, test } from "bun:test";
import { REDIS_BINARY, REDIS_PACKAGE } from "../../kit/redis-process.ts";
import { WireSession } from "../../src/conformance/wire-client.ts";
import { relayMaintenanceIntervalMs } from "../../src/protocol/limits.ts";
import { useRedisRelays } from "../helpers/redis-kit.ts";
import { describeWithPackage } from "../helpers/requires-package.ts";

setDefaultTimeout(20_000);

const SENDS = 40;

/** Script calls Redis served so far (EVALSHA and EVAL). */
function scriptCalls(info: unknown): number {
  let calls = 0;
  for (const match of String(info).matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)) calls += Number(match[1]);
  return calls;
}

describeWithPackage("a send through a relay on Redis", REDIS_BINARY, REDIS_PACKAGE, () => {
  const fx = useRedisRelays({ relays: 1 });

  test(`costs one script call: ${SENDS} sends, ${SENDS} calls (plus the relay's maintenance meanwhile)`, async () => {
    const url = fx.relays[0]!.url;
    const [sender, receiver] = await Promise.all([
      WireSession.connect(url, { label: "trips-a" }),
      WireSession.connect(url, { label: "trips-b" }),
    ]);
    const before = scriptCalls(await fx.redis.command("INFO", ["commandstats"]));
    const started = Date.now();
    for (let index = 0; index < SENDS; index += 1) await sender.sendOk(receiver.endpoint);
    const maintenance = Math.ceil((Date.now() - started) / relayMaintenanceIntervalMs) + 1;
    const calls = scriptCalls(await fx.redis.command("INFO", ["commandstats"])) - before;
    expect(calls).toBeGreaterThanOrEqual(SENDS);
    expect(calls).toBeLessThanOrEqual(SENDS + maintenance);
    expect((await receiver.drain()).length).toBe(SENDS);
  });
});
