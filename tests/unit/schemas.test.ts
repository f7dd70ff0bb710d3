import { describe, expect, test } from "bun:test";
import type { TSchema } from "@sinclair/typebox";
import { Value as ValueV1 } from "typebox/value";
import { maxArtifacts, maxSummaryChars, maxTaskTextChars, maxTaskTimeoutMs, minTaskTimeoutMs } from "../../src/protocol/limits.ts";
import * as schemas from "../../src/protocol/schemas.ts";
import { assertValid, checkValue, normaliseError, type ValueModule } from "../../src/protocol/validate.ts";
import { canonicalEnvelope, ORIGIN, taskEvent, taskRecord, WORKER } from "../helpers/fixtures.ts";

const v1 = ValueV1 as unknown as ValueModule;

/** Every object node of a schema, with its location. */
function objectNodes(schema: unknown, where: string, out: [string, Record<string, unknown>][] = []): [string, Record<string, unknown>][] {
  if (typeof schema !== "object" || schema === null) return out;
  const node = schema as Record<string, unknown>;
  if (node.type === "object" && node.properties !== undefined) out.push([where, node]);
  for (const [key, child] of Object.entries(node)) {
    if (Array.isArray(child)) child.forEach((item, index) => objectNodes(item, `${where}/${key}/${index}`, out));
    else if (typeof child === "object") objectNodes(child, `${where}/${key}`, out);
  }
  return out;
}

function pathOf(schema: TSchema, value: unknown, values?: ValueModule): unknown {
  const result = checkValue(schema, value, { values });
  if (result.ok) return "valid";
  return result.error.details.path;
}

describe("schemas", () => {
  test("every object schema is strict (additionalProperties: false)", () => {
    const exported = Object.entries(schemas).filter(
      ([, value]) => typeof value === "object" && value !== null && "type" in (value as object),
    );
    expect(exported.length).toBeGreaterThan(20);
    for (const [name, schema] of exported) {
      for (const [where, node] of objectNodes(schema, name)) {
        expect({ where, additionalProperties: node.additionalProperties }).toEqual({ where, additionalProperties: false });
      }
    }
  });

  test("a task record, an event and a canonical envelope validate", () => {
    const record = taskRecord();
    const event = taskEvent(record, 2);
    expect(pathOf(schemas.TaskRecord, record)).toBe("valid");
    expect(pathOf(schemas.TaskEvent, event)).toBe("valid");
    expect(pathOf(schemas.TaskEnvelope, canonicalEnvelope(event))).toBe("valid");
  });

  test("agent_task_send accepts exactly to, task and timeoutMs", () => {
    const to = { relay: WORKER.relay, id: WORKER.id };
    expect(pathOf(schemas.SendParams, { to, task: "x" })).toBe("valid");
    expect(pathOf(schemas.SendParams, { to, task: "x", timeoutMs: minTaskTimeoutMs })).toBe("valid");
    expect(pathOf(schemas.SendParams, { to, task: "x", timeoutMs: maxTaskTimeoutMs })).toBe("valid");
    expect(pathOf(schemas.SendParams, { to, task: "x", timeoutMs: minTaskTimeoutMs - 1 })).toBe("/timeoutMs");
    expect(pathOf(schemas.SendParams, { to, task: "x", timeoutMs: maxTaskTimeoutMs + 1 })).toBe("/timeoutMs");
    expect(pathOf(schemas.SendParams, { to, task: "x", priority: "high" })).toBe("/priority");
    expect(pathOf(schemas.SendParams, { to: { ...to, name: "worker" }, task: "x" })).toBe("/to/name");
    expect(pathOf(schemas.SendParams, { to })).toBe("/task");
  });

  test("text bounds sit exactly at their limits", () => {
    const to = { relay: ORIGIN.relay, id: ORIGIN.id };
    expect(pathOf(schemas.SendParams, { to, task: "x".repeat(maxTaskTextChars) })).toBe("valid");
    expect(pathOf(schemas.SendParams, { to, task: "x".repeat(maxTaskTextChars + 1) })).toBe("/task");
    expect(pathOf(schemas.SendParams, { to, task: "" })).toBe("/task");
    const done = { taskId: "t", status: "completed" };
    expect(pathOf(schemas.DoneParams, { ...done, summary: "s".repeat(maxSummaryChars) })).toBe("valid");
    expect(pathOf(schemas.DoneParams, { ...done, summary: "s".repeat(maxSummaryChars + 1) })).toBe("/summary");
    const artifacts = Array.from({ length: maxArtifacts }, (_, index) => ({ path: `a${index}` }));
    expect(pathOf(schemas.DoneParams, { ...done, summary: "s", artifacts })).toBe("valid");
    expect(pathOf(schemas.DoneParams, { ...done, summary: "s", artifacts: [...artifacts, { path: "x" }] })).toBe("/artifacts");
  });

  test("message and done enumerations are closed", () => {
    expect(pathOf(schemas.MessageParams, { taskId: "t", type: "chat", message: "m" })).toBe("/type");
    expect(pathOf(schemas.DoneParams, { taskId: "t", status: "timed_out", summary: "s" })).toBe("/status");
  });

  test("the first offending field is an escaped JSON Pointer", () => {
    const error = assertThrows(() =>
      assertValid(schemas.DoneParams, { taskId: "t", status: "completed", summary: "s", artifacts: [{ path: "ok" }, { path: "" }] }),
    );
    expect(error.code).toBe("INVALID_REQUEST");
    expect(error.details.path).toBe("/artifacts/1/path");
    expect(normaliseError({ path: "/a/x~1y", message: "m" })).toEqual({ path: "/a/x~1y", problem: "m" });
    expect(normaliseError({ instancePath: "/a", keyword: "required", params: { requiredProperties: ["x/y"] } }).path).toBe("/a/x~1y");
    expect(normaliseError({ instancePath: "", keyword: "additionalProperties", params: { additionalProperties: ["b~c"] } }).path).toBe(
      "/b~0c",
    );
  });

  test("a custom code and a path prefix are honoured", () => {
    const result = checkValue(
      schemas.TaskRecord,
      { ...taskRecord(), status: "done" },
      { code: "INVALID_ASSIGNMENT", pathPrefix: "/payload/task" },
    );
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.error.code).toBe("INVALID_ASSIGNMENT");
      expect(result.error.details.path).toBe("/payload/task/status");
    }
  });

  test("typebox 1.x (what the Pi CLI serves) reports the same first paths", () => {
    const to = { relay: WORKER.relay, id: WORKER.id };
    const cases: [TSchema, unknown, string][] = [
      [schemas.SendParams, { to, task: "x", priority: 1 }, "/priority"],
      [schemas.SendParams, { to }, "/task"],
      [schemas.SendParams, { to: { relay: "r" }, task: "x" }, "/to/id"],
      [schemas.SendParams, { to, task: "x", timeoutMs: 5 }, "/timeoutMs"],
      [schemas.DoneParams, { taskId: "t", status: "completed", summary: "s", artifacts: [{ path: "" }] }, "/artifacts/0/path"],
    ];
    for (const [schema, value, expected] of cases) {
      expect(pathOf(schema, value, v1)).toBe(expected);
      expect(pathOf(schema, value)).toBe(expected);
    }
    expect(pathOf(schemas.SendParams, { to, task: "x" }, v1)).toBe("valid");
  });
});

function assertThrows(fn: () => unknown): import("../../src/protocol/errors.ts").TaskError {
  try {
    fn();
  } catch (error) {
    return error as import("../../src/protocol/errors.ts").TaskError;
  }
  throw new Error("expected a throw");
}
