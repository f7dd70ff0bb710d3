/**
 * A Pi extension for tests/e2e/teardown-invariant.test.ts only: its `agent_end` handler throws
 * (Pi reports an extension error: an `extension_error` record in RPC mode, an `Extension "…" error:`
 * line on the TUI's screen), and `/present-probe` adds one `pi-tasks-event` message to the session
 * (event id `teardown-probe`), as pi-tasks' presenter would — so the test can see the teardown
 * check read both from a real Pi.
 */
export const PROBE_EVENT_ID = "teardown-probe";
export const THROWN = "thrown on purpose by the test extension";

interface ExtensionApi {
  on(event: string, handler: () => unknown): void;
  registerCommand(name: string, command: { description: string; handler: () => Promise<void> }): void;
  sendMessage(
    message: { customType: string; content: string; display: boolean; details: unknown },
    options: { triggerTurn: boolean },
  ): void;
}

export default function throwingExtension(pi: ExtensionApi): void {
  pi.on("agent_end", () => {
    throw new Error(THROWN);
  });
  pi.registerCommand("present-probe", {
    description: "adds one pi-tasks-event message (tests only)",
    handler: async () => {
      const details = { taskId: "teardown-task", eventId: PROBE_EVENT_ID, event: { type: "task.message" } };
      pi.sendMessage({ customType: "pi-tasks-event", content: "teardown probe", display: true, details }, { triggerTurn: false });
    },
  });
}
