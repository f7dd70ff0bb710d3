/**
 * Worker profiles on disk (extensions/pi-tasks/profiles.ts): read from this Pi's home and, only
 * when the person trusts the project, from the project (which wins); built-ins for the two roles;
 * a file that cannot be used is listed with its problem and refused on spawn.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { findProfile, loadProfiles } from "../../extensions/pi-tasks/profiles.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function setup(): { env: Record<string, string>; cwd: string; write(where: "home" | "project", file: string, text: string): void } {
  const home = mkdtempSync(join(tmpdir(), "pi-tasks-home-"));
  const cwd = mkdtempSync(join(tmpdir(), "pi-tasks-project-"));
  dirs.push(home, cwd);
  return {
    env: { PI_TASKS_HOME: home },
    cwd,
    write(where, file, text) {
      const dir = where === "home" ? join(home, "profiles") : join(cwd, ".pi", "pi-tasks", "profiles");
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, file), text);
    },
  };
}

describe("worker profiles", () => {
  test("a file's front matter and body make a profile; its name defaults to the file's", () => {
    const { env, cwd, write } = setup();
    write(
      "home",
      "tester.md",
      "---\ndescription: runs the tests\nmodel: acme/fast-1\ngrant:\n  tools: [bash, read]\n  maxTurns: 20\n---\nRun the tests.\n",
    );
    const tester = findProfile(loadProfiles(env, cwd, false), "tester");
    expect(tester).toMatchObject({
      name: "tester",
      description: "runs the tests",
      model: "acme/fast-1",
      grant: { tools: ["bash", "read"], maxTurns: 20 },
      instructions: "Run the tests.",
    });
  });

  test("the project's profiles are read only when the person trusts the project, and then win over the home's", () => {
    const { env, cwd, write } = setup();
    write("home", "helper.md", "---\ndescription: from home\n---\nHome.\n");
    write("project", "helper.md", "---\ndescription: from the project\n---\nProject.\n");
    expect(findProfile(loadProfiles(env, cwd, false), "helper").description).toBe("from home");
    expect(findProfile(loadProfiles(env, cwd, true), "helper").description).toBe("from the project");
  });

  test("built-in implementer and reviewer take the workflow's models from the environment; a file replaces them", () => {
    const { env, cwd, write } = setup();
    const profiles = loadProfiles({ ...env, WOLFPACK_REVIEWER_MODEL: "acme/careful-2" }, cwd, false);
    expect(findProfile(profiles, "reviewer")).toMatchObject({ model: "acme/careful-2", grant: { write: [] }, source: "built-in" });
    expect(findProfile(profiles, "implementer").model).toBe("openai-codex/gpt-5.6-terra");
    write("home", "reviewer.md", "---\nmodel: acme/mine-1\n---\nMine.\n");
    expect(findProfile(loadProfiles(env, cwd, false), "reviewer").model).toBe("acme/mine-1");
  });

  test("a profile that cannot be used is listed with its problem and refused (INVALID_PROFILE); an unknown one too", () => {
    const { env, cwd, write } = setup();
    write("home", "broken.md", "---\ngrant:\n  bash: sometimes\n---\nBroken.\n");
    const profiles = loadProfiles(env, cwd, false);
    expect(profiles.find((profile) => profile.name === "broken")?.problem).toBeString();
    expect(() => findProfile(profiles, "broken")).toThrow(expect.objectContaining({ code: "INVALID_PROFILE" }));
    expect(() => findProfile(profiles, "nobody")).toThrow(expect.objectContaining({ code: "INVALID_PROFILE" }));
  });
});
