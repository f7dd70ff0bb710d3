/**
 * The footer's words (extensions/pi-tasks/footer.ts, failures.ts): the counts first, always —
 * refused mail counted — and a failure after them (never in their place), with a label per trust
 * refusal that says what happened and the fix; a failure lasts as long as the passes report it.
 */
import { describe, expect, test } from "bun:test";
import { errorWords, failureLines, passFailure } from "../../extensions/pi-tasks/failures.ts";
import { footerLabel, healthyLabel, rejectedCount } from "../../extensions/pi-tasks/footer.ts";
import { TaskError } from "../../src/protocol/errors.ts";
import { passReport, taskView } from "../helpers/extension-fakes.ts";

describe("the healthy footer", () => {
  test("counts active tasks and refused mail; nothing refused adds nothing", () => {
    const tasks = [taskView({ status: "active" })];
    expect(healthyLabel("s", tasks)).toBe("tasks: s · 1 active");
    expect(healthyLabel("s", tasks, { UNKNOWN_PEER: 1, SIGNATURE_INVALID: 2 })).toBe("tasks: s · 1 active · 3 rejected");
    expect(healthyLabel("s", [], {})).toBe("tasks: s · idle");
    expect(rejectedCount({ A: 2, B: 0 })).toBe(2);
  });

  test("a finished result waits for its acknowledgement: counted, not idle; acknowledged, idle (a worker's side never counts)", () => {
    const done = taskView({ role: "origin", status: "completed", events: [{ type: "task.completed", payload: { summary: "ok" } }] });
    expect(healthyLabel("s", [done])).toBe("tasks: s · 1 result to acknowledge");
    const failed = taskView({ role: "origin", status: "failed", events: [{ type: "task.failed", payload: { summary: "no" } }] });
    expect(healthyLabel("s", [done, failed])).toBe("tasks: s · 2 results to acknowledge");
    const acked = taskView({
      role: "origin",
      status: "completed",
      events: [
        { type: "task.completed", payload: { summary: "ok" } },
        { type: "task.parent_acknowledged", payload: {} },
      ],
    });
    expect(healthyLabel("s", [acked])).toBe("tasks: s · idle");
    expect(healthyLabel("s", [taskView({ role: "worker", status: "completed" })])).toBe("tasks: s · idle");
    expect(healthyLabel("s", [taskView({ role: "origin", status: "cancelled" })])).toBe("tasks: s · idle");
  });

  test("a worker's request for more waits for the person: counted after the questions", () => {
    const asking = taskView({
      role: "origin",
      events: [{ type: "task.grant_requested", payload: { intentId: "i-1", request: { bash: true }, reason: "run the tests" } }],
    });
    expect(healthyLabel("s", [asking])).toBe("tasks: s · 1 active · 1 grant request waiting");
  });
});

describe("trust refusals in words", () => {
  test("forged, misrouted, unauthorised, stale and replayed mail reads as such; unpaired and unsigned mail name the fix", () => {
    for (const code of ["SIGNATURE_INVALID", "NOT_ADDRESSED", "NOT_AUTHORIZED", "STALE_EVENT", "REPLAYED_EVENT"]) {
      expect(errorWords(new TaskError(code), "intake", undefined)).toBe(`tasks: rejected forged or replayed mail (${code}) — see /tasks`);
    }
    expect(errorWords(new TaskError("UNKNOWN_PEER"), "intake", undefined)).toContain("/tasks pair");
    expect(errorWords(new TaskError("UNSIGNED_EVENT"), "intake", undefined)).toContain("PI_TASKS_TRUST=unsigned");
    expect(errorWords(new TaskError("SESSION_PROTECTED"), "lease", undefined)).toContain("another process holds this session name");
    expect(errorWords(new TaskError("INVALID_EVENT"), "intake", undefined)).toBe(
      "tasks: rejected an invalid delivery (INVALID_EVENT) — see /tasks",
    );
  });
});

describe("a failed relay operation", () => {
  const failed = (code: string, operation?: string) =>
    errorWords(
      new TaskError(code as never, { details: operation === undefined ? {} : { operation } }),
      undefined,
      "http://127.0.0.1:18790",
    );

  test("reads `tasks: <class> (<CODE>) on <operation>`, then the plain words", () => {
    expect(failed("RELAY_CAPACITY", "send")).toBe("tasks: capacity (RELAY_CAPACITY) on send — the relay is at capacity; retrying");
    expect(failed("RELAY_UNAVAILABLE", "receive")).toBe(
      "tasks: unavailable (RELAY_UNAVAILABLE) on receive — relay unreachable at http://127.0.0.1:18790; retrying",
    );
    // No words beyond the code: the seed's format alone.
    expect(failed("TARGET_NOT_REGISTERED", "send")).toBe("tasks: not-registered (TARGET_NOT_REGISTERED) on send");
  });

  test("relay loss, a missing relay profile and required authentication keep their own labels", () => {
    expect(failed("RELAY_RESET", "send")).toBe("tasks: relay state lost; rebinding automatically");
    expect(failed("RELAY_AUTH_REQUIRED", "connect")).toBe("tasks: the relay needs authentication — set WOLFPACK_JWT_SECRET");
    expect(failed("RELAY_PROFILE_REQUIRED", "connect")).toStartWith("tasks: no volatile-v1 relay at http://127.0.0.1:18790");
  });

  test("without a named operation, the words alone", () => {
    expect(failed("RELAY_CAPACITY")).toBe("tasks: the relay is at capacity; retrying");
  });
});

describe("the counts first, a failure after them", () => {
  const URL = "http://127.0.0.1:18790";
  // One task working, one whose worker asked a question (its intent id marks the worker's).
  const asked = taskView({ role: "origin", events: [{ type: "task.question", payload: { intentId: "intent-1", message: "which?" } }] });
  const busy = [taskView({ role: "origin", status: "active" }), asked];

  test("a failure never hides active work and waiting questions: it follows them", () => {
    const notRegistered = new TaskError("TARGET_NOT_REGISTERED", { details: { operation: "send" } });
    const failure = passFailure(passReport([["send", notRegistered]]), URL);
    expect(footerLabel("s", busy, {}, failure)).toBe(
      "tasks: s · 2 active · 1 question waiting · not-registered (TARGET_NOT_REGISTERED) on send — its recipient is no longer on the relay — see /tasks",
    );
    expect(footerLabel("s", busy, { UNKNOWN_PEER: 2 }, failure)).toStartWith(
      "tasks: s · 2 active · 1 question waiting · 2 rejected · not-registered",
    );
  });

  test("nothing active and a failure: the failure instead of `idle`", () => {
    const down = passFailure(new TaskError("RELAY_UNAVAILABLE", { details: { operation: "receive" } }), URL);
    expect(footerLabel("s", [], {}, down)).toBe(
      `tasks: s · unavailable (RELAY_UNAVAILABLE) on receive — relay unreachable at ${URL}; retrying`,
    );
    expect(footerLabel("s", [], {}, undefined)).toBe("tasks: s · idle");
  });

  test("a pass with no failure clears it: the label is the counts alone", () => {
    expect(passFailure(passReport([]), URL)).toBeUndefined();
    expect(footerLabel("s", busy, {}, passFailure(passReport([]), URL))).toBe("tasks: s · 2 active · 1 question waiting");
  });

  test("the most important failure of a pass is the one shown", () => {
    const failure = passFailure(
      passReport([
        ["deferral", new TaskError("TASK_DELIVERY_DEFERRED", { details: { reason: "send budget" } })],
        ["lease", new TaskError("RELAY_TIMEOUT", { details: { operation: "connect" } })],
      ]),
      URL,
    );
    expect(failure).toMatchObject({ code: "RELAY_TIMEOUT", kind: "lease" });
  });

  test("a relay that is not used (yet) keeps its dedicated words after the session's name", () => {
    const stranger = passFailure(new TaskError("RELAY_NOT_PROVEN"), URL);
    expect(footerLabel("s", [], {}, stranger)).toBe(
      `tasks: s · the relay at ${URL} cannot prove it is yours, so it is not used — stop what holds that port, or set PI_TASKS_RELAY_URL (see /tasks)`,
    );
    const slow = passFailure(new TaskError("RELAY_NOT_ANSWERING"), URL);
    expect(footerLabel("s", [], {}, slow)).toBe(
      `tasks: s · the relay at ${URL} did not answer in time; retrying until it answers and proves it is yours (see /tasks)`,
    );
    expect(slow!.words).not.toContain("cannot prove");
    // Start-up problems replace "unreachable": they name the fix.
    const unreachable = passReport([["lease", new TaskError("RELAY_TIMEOUT", { details: { operation: "profile" } })]]);
    expect(passFailure(unreachable, URL, new TaskError("RELAY_NOT_ANSWERING"))?.code).toBe("RELAY_NOT_ANSWERING");
  });
});

describe("/tasks names the failure the footer shows, in the same words, with the fix", () => {
  test("the problem line repeats the footer's words; the fix says what to do", () => {
    const failure = passFailure(
      passReport([["send", new TaskError("TARGET_NOT_REGISTERED", { details: { operation: "send" } })]]),
      undefined,
    )!;
    const lines = failureLines(failure);
    expect(lines[0]).toBe(`problem (on the footer): ${failure.words}`);
    expect(footerLabel("s", [], {}, failure).endsWith(failure.words)).toBe(true);
    expect(lines[1]).toContain("reassign it (/tasks reassign <task id>) or cancel it");
    expect(failureLines(undefined)).toEqual([]);
  });
});
