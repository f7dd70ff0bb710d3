/**
 * The footer's words (extensions/pi-tasks/footer.ts): counts when healthy, refused mail counted,
 * and a label per trust refusal that says what happened and the fix.
 */
import { describe, expect, test } from "bun:test";
import { errorWords, healthyLabel, rejectedCount } from "../../extensions/pi-tasks/footer.ts";
import { TaskError } from "../../src/protocol/errors.ts";
import { taskView } from "../helpers/extension-fakes.ts";

describe("the healthy footer", () => {
  test("counts active tasks and refused mail; nothing refused adds nothing", () => {
    const tasks = [taskView({ status: "active" })];
    expect(healthyLabel("s", tasks)).toBe("tasks: s · 1 active");
    expect(healthyLabel("s", tasks, { UNKNOWN_PEER: 1, SIGNATURE_INVALID: 2 })).toBe("tasks: s · 1 active · 3 rejected");
    expect(healthyLabel("s", [], {})).toBe("tasks: s · idle");
    expect(rejectedCount({ A: 2, B: 0 })).toBe(2);
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
