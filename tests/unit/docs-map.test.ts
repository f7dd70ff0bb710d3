/**
 * docs/architecture.md's layer table and file map are generated from the sources by `npm run docs`
 * (scripts/file-map.ts): they must be exactly what the script makes of the sources now, and every
 * source file must say what it is in a header comment and stand in a layer — else the map cannot.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../../testkit/relay-process.ts";
import { committedRegion, MAP_DOC, missingHeaders, REGIONS, unlayeredFiles } from "../../scripts/file-map.ts";

describe("the generated parts of docs/architecture.md", () => {
  test("every source file starts with a header comment saying what it is (these do not)", () => {
    expect(missingHeaders(REPO_ROOT)).toEqual([]);
  });

  test("every source file stands in a layer of scripts/file-map.ts (these do not)", () => {
    expect(unlayeredFiles(REPO_ROOT)).toEqual([]);
  });

  test.each(REGIONS.map((region) => [region.name, region] as const))(
    "%s is what npm run docs makes of the sources now (else: npm run docs, and commit docs/architecture.md)",
    (_name, region) => {
      const doc = readFileSync(join(REPO_ROOT, MAP_DOC), "utf8");
      expect(committedRegion(doc, region)).toBe(region.render(REPO_ROOT));
    },
  );
});
