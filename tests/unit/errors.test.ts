import { describe, expect, test } from "bun:test";
import { ERROR_REGISTRY, errorSpec, sendRefusal, TaskError, toTaskError } from "../../src/protocol/errors.ts";

// docs/wire.md, "Errors": code → [HTTP status, retryable].
const WIRE_TABLE: Record<string, [number, boolean]> = {
  RELAY_CAPACITY: [503, true],
  RELAY_UNAVAILABLE: [503, true],
  PEER_UNREACHABLE: [503, true],
  RELAY_RESET: [409, false],
  DELIVERY_UNCONFIRMED: [409, false],
  ENVELOPE_CONFLICT: [409, false],
  SOURCE_MISMATCH: [409, false],
  RELAY_PROFILE_REQUIRED: [409, false],
  TARGET_NOT_REGISTERED: [404, false],
  CALLER_NOT_FOUND: [404, false],
  CALLER_DEAD: [410, false],
  REGISTRATION_EXPIRED: [410, false],
  INVALID_REQUEST: [400, false],
  INVALID_CURSOR: [400, false],
  CROSS_RELAY_ENDPOINT: [400, false],
  ENVELOPE_EXPIRED: [400, false],
  PEER_POLICY_REQUIRED: [403, false],
  INCOMPATIBLE_PROTOCOL: [400, false],
};

const CLIENT_CODES: Record<string, boolean> = {
  RELAY_REBIND_REQUIRED: false,
  RELAY_AUTH_REQUIRED: false,
  RELAY_TIMEOUT: true,
  RELAY_BUSY: true,
  ABORTED: true,
  INVALID_RESPONSE: true,
  RELAY_CLOSED: false,
};

const SEED_AND_CORE_CODES = [
  "TASK_DELIVERY_DEFERRED",
  "REASSIGNMENT_REFUSED",
  "NOT_ORIGIN",
  "NOT_PARTICIPANT",
  "PAYLOAD_TOO_LARGE",
  "TASK_CAPACITY",
  "TASK_NOT_TERMINAL",
  "TERMINAL_INTENT_CONFLICT",
  "UNKNOWN_TASK",
  "UNKNOWN_EVENT",
  "UNAUTHORIZED_INTENT",
  "INVALID_ASSIGNMENT",
  "PI_TASK_WORKER_ASSIGNMENT_REQUIRED",
  "PI_TASK_WORKER_COORDINATION_FORBIDDEN",
  "TASK_WORKER_PREFLIGHT_FAILED",
  "TASK_WORKER_NOT_READY",
  "INVALID_CONNECTION",
  "INVALID_ACCEPTANCE",
  "INVALID_INBOX",
  "INVALID_TARGET",
  "INVALID_RELAY_METADATA",
];

describe("error registry", () => {
  test("every relay wire code has the §4 HTTP status and retryable flag", () => {
    for (const [code, [status, retryable]] of Object.entries(WIRE_TABLE)) {
      const row = errorSpec(code);
      expect({ code, status: row.httpStatus, retryable: row.retryable }).toEqual({ code, status, retryable });
    }
  });

  test("client codes have their retryable flag", () => {
    for (const [code, retryable] of Object.entries(CLIENT_CODES)) {
      expect({ code, retryable: errorSpec(code).retryable }).toEqual({ code, retryable });
      expect(errorSpec(code).class).not.toBe("error");
    }
  });

  test("core, tool and seed codes are registered", () => {
    for (const code of SEED_AND_CORE_CODES) expect(Object.hasOwn(ERROR_REGISTRY, code)).toBe(true);
  });

  test("retryable is explicit and false unless the code is transient", () => {
    const retryable = Object.entries(ERROR_REGISTRY)
      .filter(([, row]) => row.retryable)
      .map(([code]) => code)
      .sort();
    expect(retryable).toEqual(
      [
        "ABORTED",
        "INVALID_ACCEPTANCE",
        "INVALID_RESPONSE",
        "PAIRING_PENDING",
        "PEERS_BUSY",
        "PEER_UNREACHABLE",
        "REDIS_UNAVAILABLE",
        "RELAY_BUSY",
        "RELAY_CAPACITY",
        "RELAY_NOT_ANSWERING",
        "RELAY_TIMEOUT",
        "RELAY_UNAVAILABLE",
        "SESSION_PROTECTED",
        "STORE_UNAVAILABLE",
        "TASKS_STARTING",
        "TASK_DELIVERY_DEFERRED",
        "TASK_WAIT_TIMEOUT",
      ].sort(),
    );
  });

  test("the configuration refusals that hold sending are exactly auth, profile, address policy and configuration", () => {
    const holds = Object.entries(ERROR_REGISTRY)
      .filter(([, row]) => row.holdsSending)
      .map(([code]) => code)
      .sort();
    expect(holds).toEqual([
      "INCOMPATIBLE_PROTOCOL",
      "INVALID_CONFIGURATION",
      "PEER_POLICY_REQUIRED",
      "RELAY_AUTH_REQUIRED",
      "RELAY_PROFILE_REQUIRED",
    ]);
  });

  test("a refused send: relay loss, hold for configuration, retry when transient, else quarantine — unknown final codes too", () => {
    const cases: [string, ReturnType<typeof sendRefusal>][] = [
      ["RELAY_RESET", "loss"],
      ["RELAY_REBIND_REQUIRED", "loss"],
      ["RELAY_AUTH_REQUIRED", "hold"],
      ["RELAY_PROFILE_REQUIRED", "hold"],
      ["PEER_POLICY_REQUIRED", "hold"],
      ["RELAY_CAPACITY", "retry"],
      ["RELAY_UNAVAILABLE", "retry"],
      ["INVALID_ACCEPTANCE", "retry"],
      ["TARGET_NOT_REGISTERED", "quarantine"],
      ["ENVELOPE_EXPIRED", "quarantine"],
      ["INVALID_REQUEST", "quarantine"],
      ["PAYLOAD_TOO_LARGE", "quarantine"],
      ["A_CODE_FROM_A_NEWER_RELAY", "quarantine"],
    ];
    for (const [code, expected] of cases) expect([code, sendRefusal(new TaskError(code))]).toEqual([code, expected]);
    // A per-throw retryable wins: a relay saying an unknown code is retryable gets a retry.
    expect(sendRefusal(new TaskError("A_CODE_FROM_A_NEWER_RELAY", { retryable: true }))).toBe("retry");
  });

  test("relay loss is only RELAY_RESET and RELAY_REBIND_REQUIRED; rebind is the reset set", () => {
    const loss = Object.entries(ERROR_REGISTRY)
      .filter(([, row]) => row.relayLoss)
      .map(([code]) => code)
      .sort();
    expect(loss).toEqual(["RELAY_REBIND_REQUIRED", "RELAY_RESET"]);
    const rebind = Object.entries(ERROR_REGISTRY)
      .filter(([, row]) => row.rebind)
      .map(([code]) => code)
      .sort();
    expect(rebind).toEqual([
      "BINDING_SECRET_INVALID",
      "BINDING_SECRET_REQUIRED",
      "CALLER_DEAD",
      "CALLER_NOT_FOUND",
      "REGISTRATION_EXPIRED",
      "RELAY_RESET",
      "SOURCE_MISMATCH",
    ]);
  });
});

describe("TaskError", () => {
  test("carries code, registry message, registry retryable and frozen details", () => {
    const error = new TaskError("RELAY_CAPACITY", { details: { retryAfterMs: 1000 } });
    expect(error.code).toBe("RELAY_CAPACITY");
    expect(error.message).toBe(ERROR_REGISTRY.RELAY_CAPACITY.message);
    expect(error.retryable).toBe(true);
    expect(error.details).toEqual({ retryAfterMs: 1000 });
    expect(Object.isFrozen(error.details)).toBe(true);
    expect(error).toBeInstanceOf(Error);
  });

  test("a per-throw retryable wins over the registry", () => {
    expect(new TaskError("RELAY_CAPACITY", { retryable: false }).retryable).toBe(false);
    expect(new TaskError("INVALID_REQUEST", { retryable: true }).retryable).toBe(true);
  });

  test("unregistered codes are non-retryable, class error, and keep the code", () => {
    const error = new TaskError("SOMETHING_NEW");
    expect(error.retryable).toBe(false);
    expect(error.spec.class).toBe("error");
    expect(error.message).toContain("SOMETHING_NEW");
  });

  test("foreign errors become non-retryable TASK_ERROR", () => {
    const error = toTaskError(new RangeError("boom"));
    expect(error.code).toBe("TASK_ERROR");
    expect(error.retryable).toBe(false);
    expect(error.details.cause).toBe("boom");
  });

  test("toJSON is the tool error shape", () => {
    const error = new TaskError("NOT_ORIGIN", { details: { taskId: "t" } });
    expect(JSON.parse(JSON.stringify(error))).toEqual({
      code: "NOT_ORIGIN",
      message: ERROR_REGISTRY.NOT_ORIGIN.message,
      retryable: false,
      details: { taskId: "t" },
    });
  });
});
