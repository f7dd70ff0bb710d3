/**
 * End to end: a real Pi 1.6 (`--mode rpc`, on Bun from the checkout and on Node from a packed
 * install) starts while a squatter — a small HTTP server answering like a relay — holds the port
 * of the user's relay (docs/security.md, "The relay secret"). The Pi never uses it: its footer names
 * the problem and the fix, a tool answers RELAY_NOT_PROVEN, and nothing but the one profile
 * challenge reaches the squatter.
 *
 * The port is a free one named by WOLFPACK_PORT for which the user already has a relay secret (a
 * relay pi-tasks started there earlier went away and something else took the port): the machine's
 * real default port 18790 stays untouched. The first-Pi-on-18790 case is covered in process by
 * tests/cli/relay-attacks.test.ts.
 */
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { ensureRelaySecret } from "../../src/trust/relay-secret.ts";
import { freePort } from "../../testkit/relay-process.ts";
import { describeOnHosts } from "../helpers/host-kit.ts";
import { called, statusTexts, stopAll, tempDir, toolCalls } from "../helpers/pi-kit.ts";
import { type PiProcess, startPi } from "../helpers/pi-process.ts";

setDefaultTimeout(45_000);

const started: PiProcess[] = [];
const dirs: { remove(): void }[] = [];
afterAll(async () => {
  await stopAll(started);
  for (const dir of dirs) dir.remove();
});

/** A program on `port` answering like a relay; what reached it, in order. */
function squatter(port: number): { seen: string[]; stop(): void } {
  const seen: string[] = [];
  const epoch = crypto.randomUUID();
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port,
    fetch(request) {
      const path = new URL(request.url).pathname;
      seen.push(`${request.method} ${path}`);
      if (path === "/api/task-relay/profile")
        return Response.json({
          ok: true,
          profile: "volatile-v1",
          epoch,
          endpointPath: "/api/task-relay/volatile-v1",
          federation: { enabled: false },
          features: [],
        });
      return Response.json({
        ok: true,
        profile: "volatile-v1",
        epoch,
        value: {
          kind: "connected",
          endpoint: { relay: "wolfpack-pi-tasks-v2", id: crypto.randomUUID() },
          leaseExpiresAt: new Date(Date.now() + 60_000).toISOString(),
        },
      });
    },
  });
  return { seen, stop: () => server.stop(true) };
}

describeOnHosts("a squatter on the user's relay port", (host) => {
  test("the starting Pi never uses it: the footer says so with the fix, a send answers RELAY_NOT_PROVEN, the squatter gets only the challenge", async () => {
    const port = freePort();
    const secrets = tempDir("pi-tasks-secrets-");
    dirs.push(secrets);
    ensureRelaySecret(join(secrets.path, "relay-secrets", `${port}.secret`));
    const held = squatter(port);
    try {
      const pi = startPi({
        host,
        session: "victim",
        env: {
          WOLFPACK_PORT: String(port),
          PI_TASKS_EMBEDDED_RELAY: undefined,
          PI_TASKS_RELAY_SECRET_DIR: join(secrets.path, "relay-secrets"),
        },
        brain: (turn) =>
          called(turn, "agent_task_send")
            ? { text: "done" }
            : {
                tools: [
                  {
                    name: "agent_task_send",
                    arguments: { to: { relay: "wolfpack-pi-tasks-v2", id: "00000000-0000-4000-8000-0000000000aa" }, task: "x" },
                  },
                ],
              },
      });
      started.push(pi);
      const footer = `tasks: victim · the relay at http://127.0.0.1:${port} cannot prove it is yours, so it is not used — stop what holds that port, or set PI_TASKS_RELAY_URL (see /tasks)`;
      await pi.waitFor((record) => record.type === "extension_ui_request" && record.statusText === footer, 20_000);
      pi.prompt("Send a task.");
      await pi.waitFor((record) => record.type === "agent_settled", 20_000);
      const sent = toolCalls(pi, "agent_task_send");
      expect(sent.map((call) => ({ isError: call.isError, code: call.text.includes("RELAY_NOT_PROVEN") }))).toEqual([
        { isError: true, code: true },
      ]);
      expect(statusTexts(pi).filter((text) => text?.includes("idle"))).toEqual([]);
      expect(held.seen).toEqual(["GET /api/task-relay/profile"]);
      expect(pi.problems()).toEqual([]);
    } finally {
      held.stop();
    }
  });
});
