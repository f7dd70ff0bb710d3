/**
 * The teardown check every real Pi gets (tests/helpers/teardown-check.ts) reads what it claims to
 * read, from real Pis: a test extension (tests/e2e/scripts/throwing-extension.ts) throws in
 * `agent_end` and adds a `pi-tasks-event` message on `/present-probe`. Each Pi here opts out of
 * extension errors for that reason — and an opt-out that saw none fails the teardown, so these
 * tests fail unless the check found the error: in the RPC stream, and on the TUI's terminal (the
 * only place interactive Pi shows it). The TUI's session file is read for the probe event.
 * (That the checker catches a duplicate, a second orphan and an extension error in records:
 * tests/unit/session-invariant.test.ts.)
 */
import { expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { REPO_ROOT } from "../../testkit/relay-process.ts";
import { usePiFixture } from "../helpers/pi-kit.ts";
import { describeWithTmux, startTui } from "../helpers/tui-kit.ts";
import { REPLY } from "./scripts/says-ok.ts";
import { PROBE_EVENT_ID, THROWN } from "./scripts/throwing-extension.ts";

setDefaultTimeout(90_000);

const THROWING = join(REPO_ROOT, "tests", "e2e", "scripts", "throwing-extension.ts");
const SAYS_OK = join(REPO_ROOT, "tests", "e2e", "scripts", "says-ok.ts");
const WHY = "the test extension throws in agent_end on purpose, to show the teardown check sees extension errors";

const fx = usePiFixture();

test("an RPC Pi: the extension error is in its stream, and the teardown check counts it (the opt-out needs it)", async () => {
  const pi = fx.pi({ session: "teardown-rpc", script: SAYS_OK, extraArgs: ["-e", THROWING], extensionErrorsExpected: WHY });
  const from = pi.records.length;
  pi.prompt("Say it.");
  await pi.waitFor((record) => record.type === "agent_settled", 30_000, from);
  await pi.waitFor((record) => record.type === "extension_error", 30_000, from);
  expect(pi.problems().map((problem) => String(problem.error))).toContain(THROWN);
  expect(await pi.stop()).toBe(0);
});

describeWithTmux("the TUI", () => {
  test("a TUI Pi: the session file holds the probe event, the terminal the extension error the teardown check counts", async () => {
    const tui = await startTui({ script: SAYS_OK, session: "teardown-tui", args: ["-e", THROWING], extensionErrorsExpected: WHY });
    try {
      // A turn: the model's reply, then agent_end throws (the session file is written from the first message on).
      await tui.submit("Say it.");
      await tui.waitForScreen((screen) => screen.includes(REPLY) && screen.includes(THROWN));
      await tui.submit("/present-probe");
      await tui.waitForScreen(/teardown probe/);
      expect(tui.sessionPresentations()).toEqual([
        { kind: "inserted", taskId: "teardown-task", eventId: PROBE_EVENT_ID, type: "task.message" },
      ]);
    } finally {
      expect(await tui.stop()).toBe(0);
    }
  });
});
