/**
 * Whom this Pi session trusts: its identity (`$PI_TASKS_HOME/identity.json`, created on first use;
 * every Pi with the same PI_TASKS_HOME is the same identity), the peers in peers.json (re-read when
 * the file changes, so `pi-tasks peers add` in another terminal takes effect at once), and unsigned
 * mail only with `PI_TASKS_TRUST=unsigned`.
 *
 * Pairing is the local human's decision, never the model's: when an unknown key sends mail, the
 * interactive TUI asks with a confirm dialog. It shows what is verified (the key's fingerprint,
 * what the mail asks) and, on a line of its own, the claimed name escaped and marked (quote.ts), so
 * a name cannot add a line that passes for a verified one. Approving adds the key to peers.json;
 * refusing, a timeout, or any mode without the interactive TUI (RPC, print, json) refuses —
 * pre-approve with `pi-tasks peers add` there.
 *
 * One dialog per key, and at most `maxPendingPairingDialogs` open at once: any number of fresh keys
 * could otherwise bury the person under dialogs. Mail from a further unknown key is refused at once
 * (the core counts it as UNKNOWN_PEER, shown in the footer and on /tasks); it is asked about when it
 * writes again after a dialog closed.
 */
import type { PairingRequest, TrustOptions } from "../../src/core/trust.ts";
import { TaskError, toTaskError } from "../../src/protocol/errors.ts";
import { maxPendingPairingDialogs, pairingDialogTimeoutMs } from "../../src/protocol/limits.ts";
import type { Env } from "../../src/relay-client/config.ts";
import { homeTrust } from "../../src/core/home-trust.ts";
import { addPeer, isPeerName } from "../../src/trust/peers.ts";
import { claimedName } from "./quote.ts";

/** `PI_TASKS_TRUST`: `signed` (default) refuses unsigned mail; `unsigned` accepts it as unverified. */
export const TRUST_VARIABLE = "PI_TASKS_TRUST";
const TRUST_MODES = new Set(["", "signed", "unsigned"]);

export interface PairingDialog {
  /** Asks the human; resolves true only on an explicit yes (a timeout is a no). */
  confirm(title: string, message: string, timeoutMs: number): Promise<boolean>;
  notify(message: string, level: "info" | "warning" | "error"): void;
}

export interface ExtensionTrustDeps {
  readonly env: Env;
  /** `$PI_TASKS_HOME`. */
  readonly home: string;
  /** This session's name, sent with each signature as an (unverified) claim. */
  readonly claimedName: string;
  /** The dialog of the interactive TUI; undefined in every other mode (pairing is refused). */
  readonly dialog: PairingDialog | undefined;
  /** Called once the human decided (mail that waited is judged again). */
  readonly onDecided: () => void;
}

/** Whether unsigned mail is accepted (throws INVALID_CONFIGURATION for an unknown value). */
export function acceptsUnsigned(env: Env): boolean {
  const value = (env[TRUST_VARIABLE] ?? "").trim();
  if (!TRUST_MODES.has(value)) {
    throw new TaskError("INVALID_CONFIGURATION", {
      message: `${TRUST_VARIABLE} must be "signed" or "unsigned"`,
      details: { variable: TRUST_VARIABLE, value },
    });
  }
  return value === "unsigned";
}

/** The name an approved key is paired under: its claimed name when usable, else its fingerprint. */
function pairingName(request: PairingRequest): string {
  const fallback = `peer-${request.fingerprint.replaceAll(":", "").slice(0, 8)}`;
  return request.claimedName !== undefined && isPeerName(request.claimedName) ? request.claimedName : fallback;
}

async function pairApproved(home: string, request: PairingRequest): Promise<string> {
  const name = pairingName(request);
  try {
    return (await addPeer(home, name, request.key)).peer.name;
  } catch (error) {
    // The claimed name belongs to another key already: pair under the fingerprint instead.
    if (toTaskError(error).code !== "PEER_CONFLICT") throw error;
    const fallback = `peer-${request.fingerprint.replaceAll(":", "").slice(0, 8)}`;
    return (await addPeer(home, fallback, request.key)).peer.name;
  }
}

/** The dialog's text: verified facts first, then the claim on its own line (it cannot break it). */
function pairingMessage(request: PairingRequest): string {
  const claim = request.claimedName === undefined ? "no name" : claimedName(request.claimedName);
  const what = request.kind === "assignment" ? "wants to assign your agent a task" : "is sending task mail";
  return [
    `An unpaired identity ${what} (its signature verified).`,
    `Key fingerprint: ${request.fingerprint} — compare it with the sender's \`pi-tasks identity\`.`,
    `It calls itself ${claim}; anyone can claim any name, only the fingerprint above is verified.`,
    `Pair with it? Yes adds it to peers.json; no refuses its mail.`,
  ].join("\n");
}

export function createExtensionTrust(deps: ExtensionTrustDeps): TrustOptions {
  const asking = new Set<string>();
  const refused = new Set<string>();

  function ask(dialog: PairingDialog, request: PairingRequest): void {
    asking.add(request.key);
    dialog
      .confirm("pi-tasks: pair with this identity?", pairingMessage(request), pairingDialogTimeoutMs)
      .then(async (approved) => {
        if (!approved) {
          refused.add(request.key);
          return;
        }
        const name = await pairApproved(deps.home, request);
        dialog.notify(`pi-tasks: paired with "${name}" (${request.fingerprint}).`, "info");
      })
      .catch((error: unknown) => {
        refused.add(request.key);
        dialog.notify(`pi-tasks: pairing failed — ${toTaskError(error).message}`, "error");
      })
      .finally(() => {
        asking.delete(request.key);
        deps.onDecided();
      });
  }

  return homeTrust(deps.home, {
    claimedName: deps.claimedName,
    acceptUnsigned: acceptsUnsigned(deps.env),
    decideUnknown(request) {
      if (deps.dialog === undefined || refused.has(request.key)) return "refuse";
      if (asking.has(request.key)) return "pending";
      // Dialogs already fill the bound: refused quietly (and counted), never a new dialog.
      if (asking.size >= maxPendingPairingDialogs) return "refuse";
      ask(deps.dialog, request);
      return "pending";
    },
  });
}
