import { describe, expect, test } from "bun:test";
import { isWithin, leavesStart } from "../../src/protocol/paths.ts";

describe("path containment (src/protocol/paths.ts)", () => {
  test("a directory holds itself and what is under it, compared up to a separator", () => {
    expect(isWithin("/w/proj", "/w/proj")).toBe(true);
    expect(isWithin("/w/proj/", "/w/proj")).toBe(true);
    expect(isWithin("/w/proj/src/a.ts", "/w/proj")).toBe(true);
    expect(isWithin("/w/proj/src/a.ts", "/w/proj/")).toBe(true);
    expect(isWithin("/w/proj-sibling/a.ts", "/w/proj")).toBe(false);
    expect(isWithin("/w/projX", "/w/proj")).toBe(false);
    expect(isWithin("/w", "/w/proj")).toBe(false);
  });

  test("the text is normalized first: a climb through the directory is outside it", () => {
    expect(isWithin("/w/proj/src/../../etc", "/w/proj")).toBe(false);
    expect(isWithin("/w/proj/./src//a.ts", "/w/proj")).toBe(true);
    expect(isWithin("src/../src/a.ts", "src")).toBe(true);
  });

  test("the root directory holds every absolute path", () => {
    expect(isWithin("/etc/passwd", "/")).toBe(true);
  });

  test("a relative '.' holds every relative path that does not leave it, and no absolute one", () => {
    for (const dir of [".", "./"]) {
      expect(isWithin("src/a.ts", dir)).toBe(true);
      expect(isWithin(".", dir)).toBe(true);
      expect(isWithin("..", dir)).toBe(false);
      expect(isWithin("../other", dir)).toBe(false);
      expect(isWithin("a/../../other", dir)).toBe(false);
      expect(isWithin("/etc", dir)).toBe(false);
    }
    expect(isWithin("..foo/a", ".")).toBe(true);
  });

  test("a path leaves its start when it climbs out or is absolute; '..foo' is a name, not a climb", () => {
    expect(["..", "../x", "a/../../x", "/abs"].map(leavesStart)).toEqual([true, true, true, true]);
    expect(["a", "a/..", ".", "..foo", "a/..b"].map(leavesStart)).toEqual([false, false, false, false, false]);
  });
});
