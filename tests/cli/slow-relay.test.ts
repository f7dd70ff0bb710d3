/**
 * A start-up probe that times out is retried and never called a stranger (issue 33): on a busy
 * machine the second Pi's 1 s probe of the user's own embedded relay timed out, and the relay was
 * judged `untrusted` ("cannot prove it is yours … stop what holds that port"). A timeout is no
 * answer: the probe is tried again (`relayProbeAttempts`, each waiting twice as long); a relay that
 * still does not answer is `unanswered` — nothing is started on its port, the Pi's passes keep
 * challenging it and use it once it answers and proves the secret, and the footer says it did not
 * answer in time. Never `RELAY_NOT_PROVEN`.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { useCleanups } from "../helpers/cleanups.ts";
import { idleContextView } from "../helpers/extension-fakes.ts";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createTasksRuntime } from "../../extensions/pi-tasks/lifecycle.ts";
import { embeddedRelayRecord, ensureRelay, stopEmbeddedRelay } from "../../src/host/embedded-relay.ts";
import { relayProbeAttempts, relayProbeMs } from "../../src/protocol/limits.ts";
import { RELAY_PROFILE_PATH } from "../../src/protocol/names.ts";
import { relayConfigFromEnv } from "../../src/relay-client/config.ts";
import { ensureRelaySecret, relaySecretPath } from "../../src/trust/relay-secret.ts";
import { eventually } from "../../testkit/async.ts";
import { createFaultProxy } from "../../testkit/fault-proxy.ts";
import { freePort } from "../../testkit/relay-process.ts";

setDefaultTimeout(60_000);

const cleanups = useCleanups();

/** A pi-tasks home and the default relay on a free port of its own (the user's relay secrets beside it). */
function userEnv(): { env: Record<string, string>; port: number } {
  const dir = mkdtempSync(join(tmpdir(), "pi-tasks-slow-relay-"));
  const port = freePort();
  const env = {
    PI_TASKS_HOME: dir,
    PI_TASKS_RELAY_SECRET_DIR: join(dir, "relay-secrets"),
    WOLFPACK_JWT_SECRET: "",
    WOLFPACK_PORT: String(port),
    WOLFPACK_SESSION_NAME: "slow-start",
  };
  cleanups.push(async () => {
    await stopEmbeddedRelay(env, port).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });
  return { env, port };
}

const isProfile = (input: Request | URL | string) => String(input instanceof Request ? input.url : input).endsWith(RELAY_PROFILE_PATH);

describe("a start-up probe of the user's relay that times out", () => {
  test("is tried again, and the relay that answers the second time is used — proven, never untrusted", async () => {
    const { env, port } = userEnv();
    const config = relayConfigFromEnv(env);
    const first = await ensureRelay({ env, config });
    expect(first.state).toBe("started");
    // The next Pi's first probe is answered only after its deadline (a busy machine), once.
    const proxy = createFaultProxy({ target: first.url });
    cleanups.push(() => proxy.stop());
    proxy.push({ operation: "profile", kind: "delay", ms: relayProbeMs * 2 });
    const routed = ((input: Request | URL | string, init?: RequestInit) =>
      fetch(
        String(input instanceof Request ? input.url : input).replace(`:${port}/`, `:${new URL(proxy.url).port}/`),
        init,
      )) as typeof fetch;
    const second = await ensureRelay({ env, config, fetch: routed });
    expect(second).toMatchObject({ url: first.url, state: "running", secretFile: first.secretFile });
    expect(second.problemCode).toBeUndefined();
    expect(second.problem).toBeUndefined();
    expect(proxy.stats().operations.profile?.seen).toBe(2);
  });

  test("one that never answers in time is `unanswered`: no relay is started on its port, the Pi keeps trying and uses it once it answers — the footer never calls it a stranger", async () => {
    const { env, port } = userEnv();
    // The user's relay secret for the port exists (the first Pi made it when it started the relay).
    ensureRelaySecret(relaySecretPath(env, port));
    // Every start-up probe goes unanswered within its deadline (nothing is started meanwhile).
    let timedOut = 0;
    const slow = ((input: Request | URL | string, init?: RequestInit) => {
      if (isProfile(input) && timedOut < relayProbeAttempts) {
        timedOut += 1;
        return Promise.reject(new DOMException("the probe's deadline passed", "TimeoutError"));
      }
      return fetch(input, init);
    }) as typeof fetch;
    const statuses: (string | undefined)[] = [];
    const { lifecycle } = createTasksRuntime({
      env,
      sendMessage: () => undefined,
      appendEntry: () => undefined,
      findRelay: (options) => ensureRelay({ ...options, fetch: slow }),
    });
    cleanups.push(() => lifecycle.stop());
    lifecycle.start(idleContextView(env.PI_TASKS_HOME!, statuses));
    await lifecycle.ready();
    expect(timedOut).toBe(relayProbeAttempts);
    expect(lifecycle.info()?.relay).toMatchObject({ state: "unanswered", problemCode: "RELAY_NOT_ANSWERING" });
    expect(embeddedRelayRecord(env, port)).toBeUndefined();
    const url = `http://127.0.0.1:${port}`;
    const slowWords = `tasks: slow-start · the relay at ${url} did not answer in time; retrying until it answers and proves it is yours (see /tasks)`;
    expect(await eventually(() => statuses.includes(slowWords), 10_000)).toBe(true);

    // The user's relay answers now (here: it only now comes up, with the user's secret).
    expect((await ensureRelay({ env, config: relayConfigFromEnv(env) })).state).toBe("started");
    await eventually(() => statuses.at(-1) === "tasks: slow-start · idle", 20_000);
    expect(statuses.at(-1)).toBe("tasks: slow-start · idle");
    await lifecycle.run((core) => core.connect());
    expect(statuses.filter((text) => /cannot prove|RELAY_NOT_PROVEN|NOT USED/.test(text ?? ""))).toEqual([]);
  });
});
