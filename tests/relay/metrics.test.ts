/**
 * The relay's metrics route (src/relay-server/metrics.ts, issue 40): `GET /metrics` answers in the
 * Prometheus text format, and its figures follow what the relay does — registrations and sessions,
 * queued envelopes and their bytes, requests by operation with their latency, refusals by code. It
 * is guarded like the other operator routes: a relay that asks for credentials answers it only to
 * them.
 */
import { afterEach, expect, test } from "bun:test";
import { expectWireValue } from "../../src/conformance/kit.ts";
import { getPath, postJson, WireSession } from "../../src/conformance/wire-client.ts";
import { deriveRelayKeys, signRelayToken } from "../../src/protocol/jwt.ts";
import { relaySecretBytes } from "../../src/protocol/limits.ts";
import { METRICS_PATH } from "../../src/relay-server/metrics.ts";
import { type RelayServer, startRelayServer } from "../../src/relay-server/server.ts";

let relay: RelayServer | undefined;
afterEach(async () => {
  await relay?.stop();
  relay = undefined;
});

/** The value of one sample (`name{labels} value`) in a scrape, or undefined when absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split("\n").find((candidate) => candidate.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

test("the route answers Prometheus text, and its figures follow registrations, queued mail, requests and refusals", async () => {
  relay = await startRelayServer({ port: 0, env: {} });
  const first = await getPath(relay.url, METRICS_PATH);
  expect(first.status).toBe(200);
  expect(first.headers.get("content-type")).toStartWith("text/plain");
  expect(first.text).toContain("# TYPE pi_tasks_relay_requests_total counter");
  expect(first.text).toContain("# TYPE pi_tasks_relay_request_duration_seconds histogram");
  expect(sample(first.text, "pi_tasks_relay_registrations")).toBe(0);
  expect(sample(first.text, "pi_tasks_relay_queued_envelopes")).toBe(0);

  const sender = await WireSession.connect(relay.url, { label: "metrics-a" });
  const target = await WireSession.connect(relay.url, { label: "metrics-b" });
  for (let index = 0; index < 3; index += 1)
    expectWireValue(await sender.send(sender.envelopeTo(target.endpoint, { payload: { index } })), "accepted");
  // A refusal: an unknown operation.
  expect((await postJson(relay.url, { operation: "nonsense" })).status).toBe(400);

  const later = (await getPath(relay.url, METRICS_PATH)).text;
  expect(sample(later, "pi_tasks_relay_registrations")).toBe(2);
  expect(sample(later, "pi_tasks_relay_sessions")).toBe(2);
  expect(sample(later, "pi_tasks_relay_queued_envelopes")).toBe(3);
  expect(sample(later, "pi_tasks_relay_queued_bytes")).toBeGreaterThan(0);
  expect(sample(later, 'pi_tasks_relay_requests_total{operation="send"}')).toBe(3);
  expect(sample(later, 'pi_tasks_relay_requests_total{operation="connect"}')).toBe(2);
  expect(sample(later, 'pi_tasks_relay_request_duration_seconds_count{operation="send"}')).toBe(3);
  expect(sample(later, 'pi_tasks_relay_refusals_total{code="INVALID_REQUEST"}')).toBe(1);
  // The memory store makes no round trips to a shared store: that gauge is left out.
  expect(sample(later, "pi_tasks_relay_store_round_trips")).toBeUndefined();
});

test("guarded like the other operator routes: a relay with a relay secret answers it only to a token of that secret", async () => {
  const secret = crypto.getRandomValues(new Uint8Array(relaySecretBytes));
  relay = await startRelayServer({ port: 0, env: {}, relaySecret: secret });
  const refused = await getPath(relay.url, METRICS_PATH);
  expect(refused.status).toBe(401);
  expect(refused.body?.error?.code).toBe("RELAY_AUTH_REQUIRED");
  const token = signRelayToken(deriveRelayKeys(secret));
  const served = await getPath(relay.url, METRICS_PATH, { headers: { authorization: `Bearer ${token}` } });
  expect(served.status).toBe(200);
  expect(served.text).toContain('pi_tasks_relay_refusals_total{code="RELAY_AUTH_REQUIRED"} 1');
});
