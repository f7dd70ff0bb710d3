/**
 * Pairing is the human's decision, in the interactive TUI: a worker Pi (real TUI in tmux, its own
 * PI_TASKS_HOME) receives an assignment from an identity it has not paired with. The assignment
 * waits while a confirm dialog shows the sender's fingerprint and its claimed name marked
 * unverified; the model is not called. Approving adds the key to peers.json and the task runs;
 * refusing sends the origin a `task.refused` (UNKNOWN_PEER) and the model never sees the task.
 *
 * The assignment leaves the origin only once the worker proved its key and the origin trusts that
 * key (docs/protocol.md "Sealing and proofs"): so the origin's person first pairs the worker with
 * `pi-tasks peers add worker KEY --yes`, and the origin's core runs passes until the sealed
 * assignment left. The worker's dialog is what this file tests.
 */
import { afterEach, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { homeTrust } from "../../src/core/home-trust.ts";
import { ensureIdentity } from "../../src/trust/identity.ts";
import { peersPath } from "../../src/trust/peers.ts";
import { eventually } from "../../testkit/async.ts";
import { closeParties, createParty, type Party } from "../../testkit/party.ts";
import { BUN, CLI_ENTRY, REPO_ROOT, type RelayProcess, startRelayProcess } from "../../testkit/relay-process.ts";
import { waitForEndpoint } from "../../testkit/session-control.ts";
import { runToExit } from "../helpers/run-to-exit.ts";
import { describeWithTmux, startTui, type Tui } from "../helpers/tui-kit.ts";

setDefaultTimeout(60_000);

const WORKER_SCRIPT = join(REPO_ROOT, "tests", "e2e", "scripts", "worker-completes.ts");
const DIALOG_TITLE = "pi-tasks: pair with this identity?";

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse())
    await Promise.resolve()
      .then(step)
      .catch(() => undefined);
});

function tempHome(label: string): string {
  const home = mkdtempSync(join(tmpdir(), `pi-tasks-${label}-`));
  cleanup.push(() => rmSync(home, { recursive: true, force: true }));
  return home;
}

/** `pi-tasks ARGS --json` through the real command line as the person whose home is `home`: its one JSON line. */
async function piTasks(home: string, args: readonly string[]): Promise<any> {
  const env: Record<string, string | undefined> = { ...process.env, PI_TASKS_HOME: home };
  delete env.PI_TASKS_RELAY_URL;
  delete env.WOLFPACK_SESSION_NAME;
  const run = await runToExit([BUN, CLI_ENTRY, ...args, "--json"], { cwd: REPO_ROOT, env, timeoutMs: 10_000 });
  const lines = run.stdout.split("\n").filter((line) => line.trim().length > 0);
  if (run.code !== 0 || lines.length !== 1) throw new Error(`pi-tasks ${args.join(" ")} exited ${run.code}: ${run.stdout} ${run.stderr}`);
  return JSON.parse(lines[0]!);
}

/** A worker TUI with its own home, an origin core with another, and the origin's task waiting at the dialog. */
async function unpairedAssignment(session: string) {
  const relay: RelayProcess = await startRelayProcess();
  cleanup.push(() => relay.stop());
  const workerHome = tempHome("worker-home");
  const originHome = tempHome("origin-home");
  // The origin's person pairs the worker's key (read from `pi-tasks identity` on the worker's side):
  // without it the assignment would never leave the origin. The worker has never heard of the origin.
  const workerKey = await piTasks(workerHome, ["identity"]);
  const paired = await piTasks(originHome, ["peers", "add", "worker", workerKey.publicKey, "--yes"]);
  expect({ ok: paired.ok, changed: paired.changed, name: paired.peer.name }).toEqual({ ok: true, changed: true, name: "worker" });
  const tui: Tui = await startTui({
    script: WORKER_SCRIPT,
    session,
    relayUrl: relay.url,
    env: { PI_TASKS_HOME: workerHome },
    settings: { tuiMode: "regular" },
  });
  cleanup.push(() => tui.stop());
  const origin: Party = await createParty({ url: relay.url, trust: homeTrust(originHome, { claimedName: "alice" }) });
  cleanup.push(() => closeParties([origin]));
  const endpoint = await waitForEndpoint(relay.url, session);
  const { taskId } = await origin.core.createTask({ to: endpoint, task: "Write a haiku about relays." });
  // Only a content-free hello left so far. The origin's passes take the worker's proof (its paired
  // key) and send the assignment sealed to it; the relay accepting it is as far as the origin sees.
  const left = await eventually(
    async () => {
      await origin.core.refresh();
      return origin.core.getTask(taskId).deliveryEvidence.relayAcceptance === "accepted";
    },
    15_000,
    100,
  );
  expect(left).toBe(true);
  const dialog = await tui.waitForScreen((screen) => screen.includes(DIALOG_TITLE), 15_000);
  return { tui, origin, taskId, workerHome, originFingerprint: ensureIdentity(originHome).identity.fingerprint, dialog };
}

describeWithTmux("pairing in the interactive TUI", () => {
  test("the human approves: the key is paired under its claimed name, the task is presented and completed; the model was never asked", async () => {
    const { tui, origin, taskId, workerHome, originFingerprint, dialog } = await unpairedAssignment("pair-yes");
    expect(dialog).toContain(originFingerprint);
    expect(dialog).toContain("It calls itself `alice` (unverified claim)");
    // Waiting for the human: nothing reached the model.
    expect(tui.turns).toEqual([]);
    expect(dialog).not.toContain("## task assignment");

    await tui.press("Enter");
    await tui.waitForScreen((screen) => screen.includes('paired with "alice"'), 10_000);
    const peers = JSON.parse(readFileSync(peersPath(workerHome), "utf8")) as { peers: Record<string, { key: string }> };
    expect(Object.keys(peers.peers)).toEqual(["alice"]);

    const done = await eventually(
      async () => {
        await origin.core.refresh();
        return origin.core.getTask(taskId).status === "completed";
      },
      20_000,
      200,
    );
    expect(done).toBe(true);
    const screen = await tui.scrollback();
    expect(screen).toContain('Peer mail from paired peer "alice"');
  });

  test("the human refuses: the model never sees the task, and the origin's task fails with UNKNOWN_PEER", async () => {
    const { tui, origin, taskId, workerHome } = await unpairedAssignment("pair-no");
    await tui.press("Escape");
    const refused = await eventually(
      async () => {
        await origin.core.refresh();
        return origin.core.getTask(taskId).status === "failed";
      },
      20_000,
      200,
    );
    expect(refused).toBe(true);
    // The origin paired the worker, so the refusal is verified: it fails the task (nothing ran).
    const events = origin.core.getTask(taskId).events;
    expect(events.find((event) => event.type === "task.refused")?.payload).toMatchObject({ reason: "UNKNOWN_PEER", verified: true });
    expect(events.at(-1)).toMatchObject({ type: "task.failed", payload: { noEffect: true, error: { code: "ASSIGNMENT_REFUSED" } } });
    // The pass that refused it says so and names the fix (the next quiet pass counts "1 rejected").
    const said = await eventually(
      async () => (await tui.footer()).some((line) => line.includes("refused mail from an unpaired key") || line.includes("1 rejected")),
      10_000,
    );
    expect(said).toBe(true);
    expect(await tui.scrollback()).not.toContain("## task assignment");
    expect(() => readFileSync(peersPath(workerHome), "utf8")).toThrow();
  });
});
