/**
 * The in-memory relay fixture (src/relay-server/in-memory.ts) carries a whole task between two
 * cores without a socket, and the send path serializes an envelope once: its canonical (sealed)
 * text is made when the envelope is created and spliced into every request byte for byte. An idle
 * session that only watches keeps its lease.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { coreInternals } from "../../src/core/task-core.ts";
import { createInMemoryTaskRelay, type InMemoryTaskRelay } from "../../src/relay-server/in-memory.ts";
import { requestText } from "../../testkit/observing-fetch.ts";
import { closeParties, createParty, type Party } from "../../testkit/party.ts";
import { introduce } from "../../testkit/introduce.ts";
import { defaultLeaseMs, minWatchWaitMs, watchClientWaitMs } from "../../src/protocol/limits.ts";
import { createVolatileTaskSession } from "../../src/relay-client/session.ts";

const opened: { relays: InMemoryTaskRelay[]; parties: Party[] } = { relays: [], parties: [] };

afterEach(async () => {
  await closeParties(opened.parties.splice(0));
  for (const relay of opened.relays.splice(0)) await relay.stop();
});

async function pair(fetchFor: (relay: InMemoryTaskRelay) => typeof fetch = (relay) => relay.fetch) {
  const relay = await createInMemoryTaskRelay();
  opened.relays.push(relay);
  const origin = await createParty({ url: relay.url, fetch: fetchFor(relay) });
  const worker = await createParty({ url: relay.url, fetch: relay.fetch });
  opened.parties.push(origin, worker);
  await introduce(origin.core, worker.core);
  return { relay, origin, worker };
}

describe("the in-memory relay", () => {
  test("a task goes from origin to worker and its result comes back, with no socket", async () => {
    const { origin, worker } = await pair();
    const created = await origin.core.createTask({ to: worker.core.endpoint()!, task: "count the files" });
    await worker.core.refresh();
    expect(worker.core.getTask(created.taskId).status).toBe("active");
    expect(worker.host.inserted.map((item) => item.event?.type)).toContain("task.created");

    await worker.core.done({ taskId: created.taskId, status: "completed", summary: "42 files" });
    await origin.core.refresh();
    expect(origin.core.getTask(created.taskId).status).toBe("completed");
  });

  test("an unknown route is the relay's own typed 404, not a network failure", async () => {
    const relay = await createInMemoryTaskRelay();
    opened.relays.push(relay);
    const reply = await relay.fetch(`${relay.url}/nowhere`);
    expect(reply.status).toBe(404);
    expect(((await reply.json()) as { error: { code: string } }).error.code).toBe("INVALID_REQUEST");
  });
});

describe("an envelope is serialized once per send", () => {
  test("the request carries the stored text byte for byte; nothing re-serializes or re-parses the envelope", async () => {
    const bodies: string[] = [];
    const { origin, worker } = await pair(
      (relay) =>
        (async (input: string | URL | Request, init?: RequestInit) => {
          bodies.push(await requestText(input, init));
          return relay.fetch(input, init);
        }) as typeof fetch,
    );
    const marker = `marker-${crypto.randomUUID()}`;

    // Record, while the origin creates and sends, every object serialized and every text parsed;
    // afterwards keep those that hold the envelope as JSON (not as an escaped string in a store row).
    // Canonical encoding writes primitives only, so it does not show here: what
    // shows is a re-serialization.
    const original = { stringify: JSON.stringify, parse: JSON.parse };
    const seen: { kind: "stringify" | "parse"; text: string; stack: string }[] = [];
    JSON.stringify = ((value: unknown, ...rest: unknown[]) => {
      const out = (original.stringify as (...args: unknown[]) => string)(value, ...rest);
      if (typeof value === "object" && value !== null && typeof out === "string")
        seen.push({ kind: "stringify", text: out, stack: new Error().stack ?? "" });
      return out;
    }) as typeof JSON.stringify;
    JSON.parse = ((text: string, ...rest: unknown[]) => {
      if (typeof text === "string") seen.push({ kind: "parse", text, stack: new Error().stack ?? "" });
      return (original.parse as (...args: unknown[]) => unknown)(text, ...rest);
    }) as typeof JSON.parse;
    let created: { taskId: string; envelopeId: string };
    try {
      created = await origin.core.createTask({ to: worker.core.endpoint()!, task: marker });
    } finally {
      JSON.stringify = original.stringify;
      JSON.parse = original.parse;
    }
    const asJson = `"envelopeId":"${created!.envelopeId}","payload":`;
    const ofEnvelope = seen.filter((call) => call.text.includes(asJson));

    // Stored once, sealed: the task text is in no request and in no stored byte.
    const stored = coreInternals(origin.core).store.envelopeText(created.envelopeId)!;
    expect(stored).not.toContain(marker);
    expect(bodies.filter((body) => body.includes(marker))).toEqual([]);
    const sends = bodies.filter((body) => body.includes(created.envelopeId));
    expect(sends).toHaveLength(1);
    expect(sends[0]!.endsWith(`"envelope":${stored}}`)).toBe(true);
    // The in-memory relay runs in this process: the one parse is the relay reading the request.
    expect(ofEnvelope.map((call) => `${call.kind} ${call.stack.includes("relay-server/") ? "relay" : "client"}`)).toEqual(["parse relay"]);
  });
});

describe("an idle session that only watches", () => {
  test("keeps its lease: watches at most watchClientWaitMs apart renew it before it runs out (the idle passes are a safety net)", async () => {
    // extensions/pi-tasks/scheduler.ts passes only every idleWatchedPollIntervalMs while a watch is held.
    const relay = await createInMemoryTaskRelay();
    opened.relays.push(relay);
    let now = 0;
    const connects: number[] = [];
    const counting = (async (input: string | URL | Request, init?: RequestInit) => {
      const text = await requestText(input, init);
      if (text !== "" && JSON.parse(text).operation === "connect") connects.push(now);
      return relay.fetch(input, init);
    }) as typeof fetch;
    const session = createVolatileTaskSession({
      url: relay.url,
      fetch: counting,
      callerSession: `watcher-${crypto.randomUUID()}`,
      now: () => now,
    });
    try {
      await session.connect();
      const firstDeadline = defaultLeaseMs;
      // Each watch goes out as the last one answered (no mail: after watchClientWaitMs).
      for (let watch = 1; watch <= 4; watch += 1) {
        now = watch * watchClientWaitMs;
        await session.watch("0", minWatchWaitMs);
      }
      expect(connects[0]).toBe(0);
      // The lease was renewed by a watch before it ran out, and again before the renewed one did.
      expect(connects[1]).toBeLessThan(firstDeadline);
      expect(connects.length).toBeGreaterThanOrEqual(2);
      expect(4 * watchClientWaitMs).toBeLessThan(connects.at(-1)! + defaultLeaseMs);
    } finally {
      session.close();
    }
  });
});
