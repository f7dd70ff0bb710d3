/**
 * Pairing is the human's decision, in the interactive TUI: a worker Pi (real TUI in tmux, its own
 * PI_TASKS_HOME) receives an assignment from an identity it has not paired with. The assignment
 * waits while a confirm dialog shows the sender's fingerprint and its claimed name marked
 * unverified; the model is not called. Approving adds the key to peers.json and the task runs;
 * refusing sends the origin a `task.refused` (UNKNOWN_PEER) and the model never sees the task.
 */
import { afterEach, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { homeTrust } from "../../src/trust/home.ts";
import { ensureIdentity } from "../../src/trust/identity.ts";
import { addPeer, peersPath } from "../../src/trust/peers.ts";
import { eventually } from "../../kit/async.ts";
import { closeParties, createParty, type Party } from "../../kit/party.ts";
import { REPO_ROOT, type RelayProcess, startRelayProcess } from "../../kit/relay-process.ts";
import { waitForEndpoint } from "../../kit/session-control.ts";
import { describeWithTmux, startTui, type Tui } from "../helpers/tui-kit.ts";

setDefaultTimeout(60_000);

const WORKER_SCRIPT = join(REPO_ROOT, "tests", "e2e", "scripts", "worker-completes.ts");
const DIALOG_TITLE = "pi-tasks: pair with this identity?";

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await Promise.resolve().then(step).catch(() => undefined);
});

function tempHome(label: string): string {
  const home = mkdtempSync(join(tmpdir(), `pi-tasks-${label}-`));
  cleanup.push(() => rmSync(home, { recursive: true, force: true }));
  return home;
}

/** A worker TUI with its own home, an origin core with another, and the origin's task waiting at the dialog. */
async function unpairedAssignment(session: string) {
  const relay: RelayProcess = await startRelayProcess();
  cleanup.push(() => relay.stop());
  const workerHome = tempHome("worker-home");
  const originHome = tempHome("origin-home");
  const workerKey = ensureIdentity(workerHome).identity;
  // The origin already trusts the worker; the worker has never heard of the origin.
  await addPeer(originHome, "worker", workerKey.publicKey);
  const tui: Tui = await startTui({ script: WORKER_SCRIPT, session, relayUrl: relay.url, env: { PI_TASKS_HOME: workerHome }, settings: { tuiMode: "regular" } });
  cleanup.push(() => tui.stop());
  const origin: Party = await createParty({ url: relay.url, trust: homeTrust(originHome, { claimedName: "alice" }) });
  cleanup.push(() => closeParties([origin]));
  const endpoint = await waitForEndpoint(relay.url, session);
  const { taskId } = await origin.core.createTask({ to: endpoint, task: "Write a haiku about relays." });
  const dialog = await tui.waitForScreen((screen) => screen.includes(DIALOG_TITLE), 15_000);
  return { tui, origin, taskId, workerHome, originFingerprint: ensureIdentity(originHome).identity.fingerprint, dialog };
}

describeWithTmux("pairing in the interactive TUI", () => {
  test("the human approves: the key is paired under its claimed name, the task is presented and completed; the model was never asked", async () => {
    const { tui, origin, taskId, workerHome, originFingerprint, dialog } = await unpairedAssignment("pair-yes");
    expect(dialog).toContain(originFingerprint);
    expect(dialog).toContain('"alice" (an unverified claim)');
    // Waiting for the human: nothing reached the model.
    expect(tui.turns).toEqual([]);
    expect(dialog).not.toContain("## task assignment");

    await tui.press("Enter");
    await tui.waitForScreen((screen) => screen.includes('paired with "alice"'), 10_000);
    const peers = JSON.parse(readFileSync(peersPath(workerHome), "utf8")) as { peers: Record<string, { key: string }> };
    expect(Object.keys(peers.peers)).toEqual(["alice"]);

    const done = await eventually(async () => {
      await origin.core.refresh();
      return origin.core.getTask(taskId).status === "completed";
    }, 20_000, 200);
    expect(done).toBe(true);
    const screen = await tui.scrollback();
    expect(screen).toContain('Peer mail from paired peer "alice"');
  });

  test("the human refuses: the model never sees the task, and the origin's task fails with UNKNOWN_PEER", async () => {
    const { tui, origin, taskId, workerHome } = await unpairedAssignment("pair-no");
    await tui.press("Escape");
    const refused = await eventually(async () => {
      await origin.core.refresh();
      return origin.core.getTask(taskId).status === "failed";
    }, 20_000, 200);
    expect(refused).toBe(true);
    expect(origin.core.getTask(taskId).events.find((event) => event.type === "task.refused")?.payload).toMatchObject({ reason: "UNKNOWN_PEER" });
    // The pass that refused it says so and names the fix (the next quiet pass counts "1 rejected").
    const said = await eventually(async () => (await tui.footer()).some((line) => line.includes("refused mail from an unpaired key") || line.includes("1 rejected")), 10_000);
    expect(said).toBe(true);
    expect(await tui.scrollback()).not.toContain("## task assignment");
    expect(() => readFileSync(peersPath(workerHome), "utf8")).toThrow();
  });
});
