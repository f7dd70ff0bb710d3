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

  // src/protocol/grant.ts narrowList / narrowScopes: an empty list is a restriction to nothing, not "not given".
  test("a list narrowed to nothing stays nothing: an empty parent or request never reads as 'no restriction'", () => {
    expect(narrowGrant({ tools: ["read"] }, { tools: [] })).toEqual({ tools: [] });
    expect(narrowGrant({ tools: [] }, { tools: ["read"] })).toEqual({ tools: [] });
    expect(narrowGrant({ read: ["src"], write: ["src"] }, { read: [], write: [] })).toEqual({ read: [], write: [] });
    expect(narrowGrant({ read: [], write: [] }, { read: ["src"], write: ["src"] })).toEqual({ read: [], write: [] });
  });

  // src/protocol/grant.ts narrowScopes: a request that names no scopes inherits the parent's.
  test("a request that names no scopes keeps the parent's scopes", () => {
    expect(narrowGrant({ maxTurns: 2 }, { read: ["src"], write: ["src/out"] })).toEqual({ read: ["src"], write: ["src/out"], maxTurns: 2 });
  });

  // src/protocol/grant.ts narrowGrant (bash): either side's bash:false wins, also the request's over a parent's true.
  test("the request's bash: false holds under a parent that allows bash", () => {
    expect(narrowGrant({ bash: false }, { bash: true })).toEqual({ bash: false });
    expect(narrowGrant({ bash: true }, { bash: false })).toEqual({ bash: false });
  });

  // Issue 37: the network is an allowance — granted only where each side that has a grant says so.
  test("network is true only when the request and the parent both allow it; either side's silence or false keeps it off", () => {
    expect(narrowGrant({ network: true }, { network: true })).toEqual({ network: true });
    expect(narrowGrant({ network: true }, { maxTurns: 2 })).toEqual({ network: false, maxTurns: 2 });
    expect(narrowGrant({ maxTurns: 2 }, { network: true })).toEqual({ network: false, maxTurns: 2 });
    expect(narrowGrant({ network: true }, undefined)).toEqual({ network: true });
    expect(narrowGrant(undefined, { network: false })).toEqual({ network: false });
    expect(narrowGrant({ maxTurns: 2 }, { maxTurns: 3 })).toEqual({ maxTurns: 2 });
  });

  // src/protocol/grant.ts lower: every budget takes the lower of the two, whichever side it is on.
  test("each budget takes the lower value whether the request or the parent holds it", () => {
    const low = { maxTurns: 2, maxCostUsd: 0.5, maxWallMs: 1_000 };
    const high = { maxTurns: 9, maxCostUsd: 5, maxWallMs: 9_000 };
    expect(narrowGrant(high, low)).toEqual(low);
    expect(narrowGrant(low, high)).toEqual(low);
  });

  // src/protocol/grant.ts within (normalized, used by narrowScopes): `..` in a requested scope does not escape the parent's.
  test("a requested scope that climbs out of the parent's with `..` is dropped", () => {
    expect(narrowGrant({ read: ["src/../secrets", "src/./lib"] }, { read: ["src"] })).toEqual({ read: ["src/./lib"] });
  });

  // src/protocol/grant.ts within: a scope written with a trailing separator still contains what lies below it.
  test("a parent scope with a trailing separator keeps the scopes below it", () => {
    expect(narrowGrant({ read: ["src/lib", "srcx"] }, { read: ["src/"] })).toEqual({ read: ["src/lib"] });
  });

  // src/protocol/grant.ts within: the project directory (".") contains every relative scope that does not climb out of it.
  test("under the project directory '.', a request's relative scopes stay and the ones that climb out or are absolute go", () => {
    expect(narrowGrant({ read: ["src", "./docs/a.md", ".", "../elsewhere", "/etc"] }, { read: ["."] })).toEqual({
      read: ["src", "./docs/a.md", "."],
    });
    expect(narrowGrant({ write: ["out"] }, { write: ["./"] })).toEqual({ write: ["out"] });
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

  // src/protocol/grant.ts toolVerdict (tools): an empty tool list allows no tool; an absent one restricts none.
  test("a grant narrowed to no tools allows none; no tool list allows every tool this check knows", () => {
    for (const tool of ["read", "bash", "write", "edit", "grep", "find", "ls", "web_search"])
      expect(toolVerdict({ tools: [] }, tool, { path: "a.txt", command: "ls" }, cwd)).toBe(
        `${tool} is not among the tools granted for this task (none)`,
      );
    for (const tool of ["read", "bash", "write", "edit", "grep", "find", "ls"])
      expect(toolVerdict({}, tool, { path: "a.txt", command: "ls" }, cwd)).toBeUndefined();
    expect(toolVerdict({ tools: ["read"] }, "read", { path: "a.txt" }, cwd)).toBeUndefined();
    expect(toolVerdict({ tools: ["read"] }, "bash", { command: "ls" }, cwd)).toContain("bash is not among the tools granted");
    // What narrowing to nothing leaves is enforced as nothing.
    const none = narrowGrant({ tools: ["bash"] }, { tools: ["read"] })!;
    expect(toolVerdict(none, "bash", { command: "ls" }, cwd)).toContain("not among the tools granted");
    expect(toolVerdict(none, "read", { path: "a.txt" }, cwd)).toContain("not among the tools granted");
  });

  // Issue 37: a tool the check does not know, or one that runs commands other than bash, is denied unless the grant names it.
  test("an unknown tool or another command-running tool (powershell) needs the grant to name it; bash: false refuses it even then", () => {
    for (const tool of ["web_search", "powershell"]) {
      expect(toolVerdict({}, tool, { command: "ls" }, cwd)).toBe(`${tool} is not a tool this task may use unless its grant names it`);
      expect(toolVerdict({ tools: [tool] }, tool, { command: "ls" }, cwd)).toBeUndefined();
    }
    expect(toolVerdict({ tools: ["powershell"], bash: false }, "powershell", { command: "ls" }, cwd)).toBe(
      "powershell runs commands, and bash is not granted for this task",
    );
  });

  // src/protocol/grant.ts toolVerdict (bash): only bash: false refuses bash; absent allows it.
  test("bash is refused only by bash: false, not by a grant that says nothing of bash", () => {
    expect(toolVerdict({}, "bash", { command: "ls" }, cwd)).toBeUndefined();
    expect(toolVerdict({ bash: true }, "bash", { command: "ls" }, cwd)).toBeUndefined();
    expect(toolVerdict({ tools: ["bash"] }, "bash", { command: "ls" }, cwd)).toBeUndefined();
    expect(toolVerdict({ bash: false }, "bash", { command: "ls" }, cwd)).toBe("bash is not granted for this task");
  });

  // src/protocol/grant.ts pathVerdict: an empty scope list allows no path.
  test("a grant with no read (or write) scopes reads (or writes) nothing", () => {
    expect(toolVerdict({ read: [] }, "read", { path: "a.txt" }, cwd)).toBe(
      "/work/project/a.txt is outside the paths this task may read ()",
    );
    expect(toolVerdict({ write: [] }, "write", { path: "a.txt" }, cwd)).toContain("outside the paths this task may write");
    expect(toolVerdict({ write: [] }, "read", { path: "a.txt" }, cwd)).toBeUndefined();
  });

  // src/protocol/grant.ts pathVerdict: a path inside any one of the scopes is inside the grant.
  test("a path inside one of several scopes is allowed", () => {
    const grant = { read: ["src", "docs"] };
    expect(toolVerdict(grant, "read", { path: "docs/a.md" }, cwd)).toBeUndefined();
    expect(toolVerdict(grant, "read", { path: "src/a.ts" }, cwd)).toBeUndefined();
    expect(toolVerdict(grant, "read", { path: "tests/a.ts" }, cwd)).toContain("outside");
  });

  // src/protocol/grant.ts READ_TOOLS / WRITE_TOOLS / pathArgument: every file tool is path-checked, by `path` or `file_path`.
  test("every read tool (read, grep, find, ls) and write tool (write, edit) is judged by its path, named path or file_path", () => {
    const grant = { read: ["src"], write: ["src/out"] };
    for (const tool of ["read", "grep", "find", "ls"]) {
      expect({ tool, verdict: toolVerdict(grant, tool, { path: "src/a" }, cwd) }).toEqual({ tool, verdict: undefined });
      expect({ tool, verdict: toolVerdict(grant, tool, { path: "/etc" }, cwd) }).toEqual({
        tool,
        verdict: "/etc is outside the paths this task may read (src)",
      });
    }
    for (const tool of ["read", "write", "edit"]) {
      const scope = tool === "read" ? "src" : "src/out";
      expect({ tool, verdict: toolVerdict(grant, tool, { file_path: `${scope}/a` }, cwd) }).toEqual({ tool, verdict: undefined });
      expect({ tool, verdict: toolVerdict(grant, tool, { file_path: "/etc/passwd" }, cwd) }).toEqual({
        tool,
        verdict: `/etc/passwd is outside the paths this task may ${tool === "read" ? "read" : "write"} (${scope})`,
      });
    }
  });

  // src/protocol/grant.ts pathVerdict: a call that names no path acts on the project directory, and is judged there.
  test("a file tool called without a path is judged at the project directory", () => {
    expect(toolVerdict({ read: ["."] }, "ls", {}, cwd)).toBeUndefined();
    expect(toolVerdict({ read: ["src"] }, "ls", {}, cwd)).toBe("/work/project is outside the paths this task may read (src)");
  });

  // src/protocol/grant.ts within: a scope ending in a separator (the root) contains what lies below it.
  test("the root scope '/' contains every absolute path", () => {
    expect(toolVerdict({ read: ["/"] }, "read", { path: "/etc/hosts" }, cwd)).toBeUndefined();
  });
});
