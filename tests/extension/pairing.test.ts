/**
 * The pairing dialog of the interactive TUI (extensions/pi-tasks/trust.ts): it shows only what is
 * verified (the key's fingerprint, what the mail asks) besides the sender's claimed name, which is
 * escaped and marked on a line of its own; and however many unknown keys write at once, at most
 * `maxPendingPairingDialogs` dialogs are open — the rest is refused quietly (counted as
 * UNKNOWN_PEER by the core), never a new dialog.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createExtensionTrust, type PairingDialog } from "../../extensions/pi-tasks/trust.ts";
import type { PairingRequest } from "../../src/core/trust.ts";
import { maxPendingPairingDialogs } from "../../src/protocol/limits.ts";
import { fingerprintOf, generateIdentity } from "../../src/trust/keys.ts";
import { ORIGIN } from "../helpers/fixtures.ts";

const homes: string[] = [];
afterEach(() => {
  for (const home of homes.splice(0)) rmSync(home, { recursive: true, force: true });
});

interface Asked {
  readonly title: string;
  readonly message: string;
  answer(yes: boolean): void;
}

function trustWithDialog() {
  const home = mkdtempSync(join(tmpdir(), "pi-tasks-pairing-"));
  homes.push(home);
  const asked: Asked[] = [];
  const notices: string[] = [];
  let decided = 0;
  const dialog: PairingDialog = {
    confirm: (title, message) => new Promise<boolean>((resolve) => asked.push({ title, message, answer: resolve })),
    notify: (message) => notices.push(message),
  };
  const trust = createExtensionTrust({ env: {}, home, claimedName: "me", dialog, onDecided: () => (decided += 1) });
  return { trust, asked, notices, decided: () => decided };
}

function request(claimedName?: string): PairingRequest {
  const key = generateIdentity().identity.publicKey;
  return {
    key,
    fingerprint: fingerprintOf(key),
    taskId: crypto.randomUUID(),
    kind: "assignment",
    from: ORIGIN,
    ...(claimedName === undefined ? {} : { claimedName }),
  };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 10));

describe("what the pairing dialog shows", () => {
  test("a claimed name carrying a fake fingerprint line is one escaped, marked line; the verified lines are the dialog's own", () => {
    const { trust, asked } = trustWithDialog();
    const real = request(`alice\nKey fingerprint: 0000:1111:2222:3333 ✓ Fingerprint matches`);
    expect(trust.decideUnknown!(real)).toBe("pending");
    const lines = asked[0]!.message.split("\n");
    expect(lines.filter((line) => line.includes("0000:1111:2222:3333"))).toEqual([]);
    expect(asked[0]!.message).not.toContain("✓");
    expect(lines.filter((line) => line.includes(real.fingerprint))).toHaveLength(1);
    const claimLine = lines.filter((line) => line.includes("alice"));
    expect(claimLine).toHaveLength(1);
    expect(claimLine[0]).toContain("(unverified claim)");
    expect(claimLine[0]!.startsWith("It calls itself")).toBe(true);
    // The same shape as for an honest name: nothing the sender wrote added a line.
    const { trust: other, asked: honest } = trustWithDialog();
    other.decideUnknown!(request("alice"));
    expect(lines).toHaveLength(honest[0]!.message.split("\n").length);
  });
});

describe("how many pairing dialogs are open", () => {
  test("256 fresh keys at once open at most the bound of dialogs; the rest are refused and never asked", () => {
    const { trust, asked } = trustWithDialog();
    const requests = Array.from({ length: 256 }, () => request("flood"));
    const decisions = requests.map((each) => trust.decideUnknown!(each));
    expect(asked).toHaveLength(maxPendingPairingDialogs);
    expect(decisions.filter((decision) => decision === "pending")).toHaveLength(maxPendingPairingDialogs);
    expect(decisions.filter((decision) => decision === "refuse")).toHaveLength(256 - maxPendingPairingDialogs);
    // A key whose dialog is open stays pending (one dialog per key), and asks nothing new.
    expect(trust.decideUnknown!(requests[0]!)).toBe("pending");
    expect(asked).toHaveLength(maxPendingPairingDialogs);
  });

  test("once a dialog is answered, the next unknown key may be asked; a refused key is never asked again", async () => {
    const { trust, asked, decided } = trustWithDialog();
    const first = Array.from({ length: maxPendingPairingDialogs }, () => request());
    for (const each of first) trust.decideUnknown!(each);
    const waiting = request();
    expect(trust.decideUnknown!(waiting)).toBe("refuse");
    asked[0]!.answer(false);
    await settle();
    expect(decided()).toBe(1);
    expect(trust.decideUnknown!(first[0]!)).toBe("refuse");
    expect(trust.decideUnknown!(waiting)).toBe("pending");
    expect(asked).toHaveLength(maxPendingPairingDialogs + 1);
  });
});
