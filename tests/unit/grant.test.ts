/**
 * Grants only narrow (src/protocol/grant.ts): a sub-delegation never widens its parent's grant, and
 * a tool call is inside a grant only when every part of the grant allows it.
 */
import { describe, expect, test } from "bun:test";
import { narrowGrant, toolVerdict } from "../../src/protocol/grant.ts";

describe("narrowGrant", () => {
  test("nothing asked and nothing inherited is no grant", () => {
    expect(narrowGrant(undefined, undefined)).toBeUndefined();
  });

  test("a request without a parent is the request; a parent without a request is the parent", () => {
    expect(narrowGrant({ tools: ["read"], maxTurns: 3 }, undefined)).toEqual({ tools: ["read"], maxTurns: 3 });
    expect(narrowGrant(undefined, { bash: false, maxCostUsd: 1 })).toEqual({ bash: false, maxCostUsd: 1 });
  });

  test("tools intersect, bash false wins, budgets take the lower, scopes keep only what lies inside the parent's", () => {
    const parent = {
      tools: ["read", "write"],
      bash: false,
      read: ["src"],
      write: ["src/app"],
      maxTurns: 5,
      maxCostUsd: 2,
      maxWallMs: 60_000,
    };
    const asked = {
      tools: ["read", "bash", "write"],
      bash: true,
      read: ["src/lib", "docs"],
      write: ["src"],
      maxTurns: 10,
      maxCostUsd: 1,
      maxWallMs: 120_000,
    };
    expect(narrowGrant(asked, parent)).toEqual({
      tools: ["read", "write"],
      bash: false,
      read: ["src/lib"],
      write: [],
      maxTurns: 5,
      maxCostUsd: 1,
      maxWallMs: 60_000,
    });
  });

  test("narrowing twice never widens (a chain A→B→C keeps A's bounds)", () => {
    const a = { tools: ["read"], maxTurns: 4 };
    const b = narrowGrant({ tools: ["read", "bash"], maxTurns: 8 }, a);
    const c = narrowGrant({ tools: ["bash"], maxTurns: 100 }, b);
    expect(c).toEqual({ tools: [], maxTurns: 4 });
  });
});

describe("toolVerdict", () => {
  const cwd = "/work/project";

  test("a listed tool passes; an unlisted one is refused, naming what is granted", () => {
    expect(toolVerdict({ tools: ["read"] }, "read", { path: "a.txt" }, cwd)).toBeUndefined();
    expect(toolVerdict({ tools: ["read"] }, "write", { path: "a.txt" }, cwd)).toBe(
      "write is not among the tools granted for this task (read)",
    );
  });

  test("bash: false refuses bash even when listed; pi-tasks' own tools are never refused by a grant", () => {
    expect(toolVerdict({ tools: ["bash"], bash: false }, "bash", { command: "ls" }, cwd)).toBe("bash is not granted for this task");
    expect(toolVerdict({ tools: [] }, "agent_task_done", {}, cwd)).toBeUndefined();
  });

  test("file tools stay inside their scopes; `..` does not escape one", () => {
    const grant = { read: ["src"], write: ["src/out"] };
    expect(toolVerdict(grant, "read", { path: "src/a.ts" }, cwd)).toBeUndefined();
    expect(toolVerdict(grant, "read", { path: "/work/project/src" }, cwd)).toBeUndefined();
    expect(toolVerdict(grant, "read", { path: "src/../secrets.txt" }, cwd)).toContain(
      "/work/project/secrets.txt is outside the paths this task may read",
    );
    expect(toolVerdict(grant, "read", { path: "srcx/a.ts" }, cwd)).toContain("outside");
    expect(toolVerdict(grant, "write", { path: "src/out/b.ts" }, cwd)).toBeUndefined();
    expect(toolVerdict(grant, "edit", { path: "src/a.ts" }, cwd)).toContain("outside the paths this task may write");
  });
});
