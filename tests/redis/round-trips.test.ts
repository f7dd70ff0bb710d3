/**
 * One Redis round trip per send, receive and ACK (issue 27): a relay on the Redis store judges the
 * binding and runs the operation in one Lua script (BOUND_ADMIT, BOUND_PAGE, BOUND_ACKNOWLEDGE, and
 * BOUND_ACKNOWLEDGE_BATCH for a whole `ack-batch-v1` request, BOUND_ADMIT_EACH for a whole
 * `send-batch-v1` send or an `ack-carry-v1` acknowledgement with its receipts), so each costs one
 * script call — counted by Redis itself (`INFO commandstats`, EVALSHA and EVAL),
 * besides the relay's own maintenance (one call a second) during the run.
 */
import { expect, setDefaultTimeout, test } from "bun:test";
import { REDIS_BINARY, REDIS_PACKAGE } from "../../testkit/redis-process.ts";
import { getPath, WireSession } from "../../src/conformance/wire-client.ts";
import { METRICS_PATH } from "../../src/relay-server/metrics.ts";
import { relayMaintenanceIntervalMs, maxSendBatchItems } from "../../src/protocol/limits.ts";
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

describeWithPackage("a relay on Redis", REDIS_BINARY, REDIS_PACKAGE, () => {
  const fx = useRedisRelays({ relays: 1 });

  /** Script calls Redis served while `run` ran, and how many maintenance runs that time allows. */
  async function counted(run: () => Promise<void>): Promise<{ calls: number; maintenance: number }> {
    const before = scriptCalls(await fx.redis.command("INFO", ["commandstats"]));
    const started = Date.now();
    await run();
    const maintenance = Math.ceil((Date.now() - started) / relayMaintenanceIntervalMs) + 1;
    return { calls: scriptCalls(await fx.redis.command("INFO", ["commandstats"])) - before, maintenance };
  }

  test(`sends, a receive and ACKs cost one script call each (${SENDS} sends, 1 receive, ${SENDS} ACKs)`, async () => {
    const url = fx.relays[0]!.url;
    const [sender, receiver] = await Promise.all([
      WireSession.connect(url, { label: "trips-a" }),
      WireSession.connect(url, { label: "trips-b" }),
    ]);
    const sent = await counted(async () => {
      for (let index = 0; index < SENDS; index += 1) await sender.sendOk(receiver.endpoint);
    });
    expect(sent.calls).toBeGreaterThanOrEqual(SENDS);
    expect(sent.calls).toBeLessThanOrEqual(SENDS + sent.maintenance);
    let ids: string[] = [];
    const received = await counted(async () => {
      const page = await receiver.call("receive", { cursor: "0" });
      ids = (page.body.value.deliveries as { envelope: { envelopeId: string } }[]).map((item) => item.envelope.envelopeId);
    });
    expect(ids).toHaveLength(SENDS);
    expect(received.calls).toBeLessThanOrEqual(1 + received.maintenance);
    const acknowledged = await counted(async () => {
      for (const envelopeId of ids) expect((await receiver.call("acknowledge", { envelopeId })).status).toBe(200);
    });
    expect(acknowledged.calls).toBeGreaterThanOrEqual(SENDS);
    expect(acknowledged.calls).toBeLessThanOrEqual(SENDS + acknowledged.maintenance);
  });

  test("the relay's metrics count its round trips to Redis (pi_tasks_relay_store_round_trips), at least one per send", async () => {
    const url = fx.relays[0]!.url;
    const scrape = async () => {
      const text = (await getPath(url, METRICS_PATH)).text;
      return Number(/^pi_tasks_relay_store_round_trips\{store="shared"\} (\d+)$/m.exec(text)?.[1]);
    };
    const [sender, receiver] = await Promise.all([
      WireSession.connect(url, { label: "metrics-a" }),
      WireSession.connect(url, { label: "metrics-b" }),
    ]);
    const before = await scrape();
    expect(before).toBeGreaterThan(0);
    for (let index = 0; index < SENDS; index += 1) await sender.sendOk(receiver.endpoint);
    expect((await scrape()) - before).toBeGreaterThanOrEqual(SENDS);
  });

  test(`an ack-batch-v1 acknowledgement of ${SENDS} ids costs one script call, each id's outcome in order`, async () => {
    const url = fx.relays[0]!.url;
    const [sender, receiver] = await Promise.all([
      WireSession.connect(url, { label: "batch-a" }),
      WireSession.connect(url, { label: "batch-b" }),
    ]);
    for (let index = 0; index < SENDS; index += 1) await sender.sendOk(receiver.endpoint);
    const page = await receiver.call("receive", { cursor: "0" });
    const ids = (page.body.value.deliveries as { envelope: { envelopeId: string } }[]).map((item) => item.envelope.envelopeId);
    const unknown = crypto.randomUUID();
    let results: { envelopeId: string; outcome: string }[] = [];
    const batch = await counted(async () => {
      results = (await receiver.call("acknowledge", { envelopeIds: [...ids, unknown] })).body.value.results;
    });
    expect(batch.calls).toBeLessThanOrEqual(1 + batch.maintenance);
    expect(results.map((result) => result.outcome)).toEqual([...ids.map(() => "acknowledged"), "unknown"]);
    expect(results.map((result) => result.envelopeId)).toEqual([...ids, unknown]);
  });

  test(`a send-batch-v1 send of ${maxSendBatchItems} envelopes, and an ack-carry-v1 acknowledgement with its receipts, cost one script call each`, async () => {
    const url = fx.relays[0]!.url;
    const [sender, receiver] = await Promise.all([
      WireSession.connect(url, { label: "each-a" }),
      WireSession.connect(url, { label: "each-b" }),
    ]);
    const envelopes = Array.from({ length: maxSendBatchItems }, () => sender.envelopeTo(receiver.endpoint));
    let outcomes: string[] = [];
    const sent = await counted(async () => {
      outcomes = (await sender.call("send", { envelopes })).body.value.results.map((result: { outcome: string }) => result.outcome);
    });
    expect(outcomes).toEqual(envelopes.map(() => "accepted"));
    expect(sent.calls).toBeLessThanOrEqual(1 + sent.maintenance);
    const ids = envelopes.map((envelope) => envelope.envelopeId);
    const receipts = ids.slice(0, 3).map((id) => receiver.envelopeTo(sender.endpoint, { payload: { receipt: id } }));
    let acknowledged: string[] = [];
    const carried = await counted(async () => {
      const value = (await receiver.call("acknowledge", { envelopeIds: ids, envelopes: receipts })).body.value;
      acknowledged = value.results.map((result: { outcome: string }) => result.outcome);
    });
    expect(acknowledged).toEqual(ids.map(() => "acknowledged"));
    expect(carried.calls).toBeLessThanOrEqual(1 + carried.maintenance);
    expect((await sender.drain()).map((item) => item.envelope.envelopeId)).toEqual(receipts.map((receipt) => receipt.envelopeId));
  });
});
