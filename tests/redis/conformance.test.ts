/**
 * `pi-tasks conformance URL` against relays that share one Redis: every check passes against relay
 * A, then against relay B while relay A — holding a client's live registration and a parked watch —
 * is killed midway. (The runs are one after the other: the health checks compare relay-wide
 * counts, which a second run on the same state would move.) Once with the relays and the suite on
 * Bun, once on Node alone (the built bundle, as Pi's users run it).
 */
import { expect, test } from "bun:test";
import { spawn } from "bun";
import { REDIS_BINARY, REDIS_PACKAGE } from "../../testkit/redis-process.ts";
import { REPO_ROOT } from "../../testkit/relay-process.ts";
import { WireSession } from "../../src/conformance/wire-client.ts";
import { LONG_WATCH_MS } from "../../src/conformance/timing.ts";
import { RELAY_FEATURES } from "../../src/relay-server/engine.ts";
import { RELAY_RUNTIMES, type RelayRuntime, RUNTIMES, useRedisRelays } from "../helpers/redis-kit.ts";
import { describeWithPackage } from "../helpers/requires-package.ts";

/** A whole suite run takes a few seconds (its slowest check waits for the 5 s body deadline). */
const RUN_TIMEOUT_MS = 60_000;
/** When, into relay B's run, relay A is killed. */
const KILL_AFTER_MS = 2_000;

async function conformance(runtime: RelayRuntime, url: string): Promise<{ code: number; result: Record<string, unknown>; stderr: string }> {
  const child = spawn([...RELAY_RUNTIMES[runtime], "conformance", url, "--json"], {
    cwd: REPO_ROOT,
    env: { ...process.env, WOLFPACK_JWT_SECRET: "" },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  return { code, result: JSON.parse(stdout || "{}"), stderr };
}

for (const runtime of RUNTIMES) {
  describeWithPackage(`conformance of relays sharing one Redis (on ${runtime})`, REDIS_BINARY, REDIS_PACKAGE, () => {
    const fx = useRedisRelays({ relays: 2, runtime });

    test(
      "every check passes against relay A, then against relay B while relay A is killed midway",
      async () => {
        const first = await conformance(runtime, fx.relays[0]!.url);
        expect(first.result, first.stderr.slice(-3_000)).toMatchObject({ ok: true, failed: 0, skipped: 0, features: [...RELAY_FEATURES] });
        expect(first.result.passed as number).toBeGreaterThan(0);
        expect(first.code).toBe(0);

        // Relay A holds a client's registration and a parked watch when it dies.
        const bystander = await WireSession.connect(fx.relays[0]!.url, { label: "bystander" });
        const parked = bystander.call("watch", { cursor: "0", waitMs: LONG_WATCH_MS }).catch((error: unknown) => error);
        const running = conformance(runtime, fx.relays[1]!.url);
        await Bun.sleep(KILL_AFTER_MS);
        await fx.kill(0);
        expect(fx.relays[0]!.process.signalCode).toBe("SIGKILL");
        const second = await running;
        expect(second.result, second.stderr.slice(-3_000)).toMatchObject({ ok: true, failed: 0, skipped: 0 });
        expect(second.result.passed).toBe(first.result.passed);
        expect(second.code).toBe(0);
        await parked;
      },
      RUN_TIMEOUT_MS,
    );
  });
}
