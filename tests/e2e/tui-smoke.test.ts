/**
 * Smoke test of the TUI kit (`tests/helpers/tui-kit.ts`): the real interactive Pi 1.6 in a private
 * tmux server, with this extension, the scripted model and a real relay. It proves the kit can
 * start Pi to a ready editor, read the startup header and the footer, run `/tasks`, talk to the
 * model (as a scenario module and as a brain function) and quit Pi cleanly.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { useRelayFixture } from "../helpers/relay-fixture.ts";
import { countMatches, describeWithTmux, editorTextOf, footerOf, startTui, type ScriptTurn, type Tui } from "../helpers/tui-kit.ts";
import { REPLY } from "./scripts/says-ok.ts";

const SAYS_OK = join(import.meta.dir, "scripts", "says-ok.ts");

/** Quits Pi like a user; it must exit by itself with status 0 (the last screen explains a failure). */
async function expectCleanExit(tui: Tui): Promise<void> {
  const status = await tui.stop();
  if (status !== 0) throw new Error(`Pi did not exit cleanly (status ${status})\n${tui.lastScreen()}`);
}

describeWithTmux("TUI kit smoke (interactive Pi in tmux)", () => {
  const fixture = useRelayFixture();

  test("ready editor, header, footer status, /tasks board, a scripted reply, clean exit", async () => {
    const session = "tui-smoke";
    const tui = await startTui({ script: SAYS_OK, session, relayUrl: fixture.relay.url });
    fixture.defer(() => tui.stop());

    // Pi's startup header lists the loaded extensions; ours is the package `pi-tasks`.
    const header = await tui.screen();
    expect(header).toMatch(/\[Extensions\]\n\s+(?:\S+, )*pi-tasks(?:,|$)/m);
    expect(await tui.editorText()).toBe("");

    // The footer's status line (key `pi-tasks`), once start-up is over.
    await tui.waitForScreen((screen) => footerOf(screen).some((line) => /^tasks: (?!starting)/.test(line)));
    const footer = await tui.footer();
    expect(footer.some((line) => line.includes("faux-1"))).toBe(true);
    expect(footer.filter((line) => line.startsWith("tasks: "))).toHaveLength(1);

    // `/tasks` prints the board, which names this session's endpoint on the relay (`<relay>/<uuid>`).
    const endpoint = /[\w.-]+\/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/;
    expect(countMatches(await tui.screen(), endpoint)).toBe(0);
    await tui.submit("/tasks");
    // (The command ran and the editor was cleared.) How often the board shows is the TUI test's
    // business: `countMatches(board, endpoint)` is 1 when it is printed once.
    const board = await tui.waitForScreen((screen) => endpoint.test(screen) && editorTextOf(screen) === "");
    expect(board).toMatch(/\b0 tasks\b/);

    // A prompt reaches the scripted model and its reply appears in the transcript.
    expect(countMatches(await tui.screen(), REPLY)).toBe(0);
    await tui.submit("hello from the TUI smoke test");
    const replied = await tui.waitForScreen((screen) => screen.includes(REPLY));
    expect(replied).toContain("hello from the TUI smoke test");

    await expectCleanExit(tui);
    expect(await tui.stop()).toBe(0); // idempotent
  });

  test("a brain function answers from the test process", async () => {
    const tui = await startTui({
      brain: (turn: ScriptTurn) => {
        const user = turn.messages.filter((message) => message.role === "user").at(-1);
        return { text: `brain heard <${user?.text ?? "nothing"}> on call ${turn.call}` };
      },
      session: "tui-brain",
      relayUrl: fixture.relay.url,
    });
    fixture.defer(() => tui.stop());

    await tui.submit("ping 42");
    await tui.waitForScreen(/brain heard <ping 42> on call 1/);
    expect(tui.turns).toHaveLength(1);
    expect(tui.turns[0]?.messages.some((message) => message.role === "user" && message.text === "ping 42")).toBe(true);

    await expectCleanExit(tui);
  });
});
