/**
 * Results that travel (src/cli/result-content.ts), with real git: a worktree's change (an edit, a new
 * file, a binary file) becomes a patch that applies to another clone; a conflict changes nothing and
 * is listed; a tampered patch or file is refused by its hash; changed files' paths must stay inside
 * the project (absolute, `..`, a symbolic link out); content over the bound is omitted with its
 * reason; carried files are written all or nothing.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { raised } from "../../kit/async.ts";
import { git, gitProject, removeProjects, scratchDir } from "../helpers/git-project.ts";
import { applyContent, checkChangedFiles, collectContent } from "../../src/cli/result-content.ts";
import { maxResultContentBytes, maxResultFiles } from "../../src/protocol/limits.ts";

afterAll(removeProjects);

/** A repository with one commit, and a second clone of it (the origin's machine). */
function repoAndClone(): { repo: string; clone: string; base: string } {
  const repo = gitProject();
  writeFileSync(join(repo, "README.md"), "project\nline two\n");
  git(repo, "commit", "-q", "-am", "two lines");
  const clone = join(scratchDir("pi-tasks-clone-"), "checkout");
  spawnSync("git", ["clone", "-q", repo, clone]);
  return { repo, clone, base: git(repo, "rev-parse", "HEAD").stdout };
}

describe("a worktree's change as a patch", () => {
  test("an edit, a new file and a binary file travel and apply to another clone; the worker's index is untouched", () => {
    const { repo, clone, base } = repoAndClone();
    writeFileSync(join(repo, "README.md"), "project\nline two, edited\n");
    mkdirSync(join(repo, "src"));
    writeFileSync(join(repo, "src", "hello.txt"), "Hello from pi-tasks\n");
    writeFileSync(join(repo, "logo.bin"), Buffer.from([0, 1, 2, 255, 254]));
    const content = collectContent(repo, { base, changedFiles: [] })!;
    expect(content.patch?.format).toBe("git-diff");
    expect(git(repo, "status", "--porcelain").stdout).toContain("?? src/");
    const applied = applyContent(clone, content);
    expect(applied.mode).toBe("patch");
    expect([...applied.paths].sort()).toEqual(["README.md", "logo.bin", "src/hello.txt"]);
    expect(readFileSync(join(clone, "src", "hello.txt"), "utf8")).toBe("Hello from pi-tasks\n");
    expect(readFileSync(join(clone, "README.md"), "utf8")).toBe("project\nline two, edited\n");
    expect([...readFileSync(join(clone, "logo.bin"))]).toEqual([0, 1, 2, 255, 254]);
  });

  test("a conflicting checkout: APPLY_CONFLICT names the file, and nothing changes", async () => {
    const { repo, clone, base } = repoAndClone();
    writeFileSync(join(repo, "README.md"), "project\nline two, edited\n");
    writeFileSync(join(repo, "new.txt"), "new\n");
    const content = collectContent(repo, { base, changedFiles: [] })!;
    writeFileSync(join(clone, "README.md"), "project\nline two, changed otherwise\n");
    const { error } = await raised(async () => applyContent(clone, content));
    expect(error.code).toBe("APPLY_CONFLICT");
    expect(String(error.details.conflicts)).toContain("README.md");
    expect(existsSync(join(clone, "new.txt"))).toBe(false);
  });

  test("a patch changed on the way is refused by its hash", async () => {
    const { repo, clone, base } = repoAndClone();
    writeFileSync(join(repo, "new.txt"), "new\n");
    const content = collectContent(repo, { base, changedFiles: [] })!;
    const tampered = { ...content, patch: { ...content.patch!, text: content.patch!.text.replace("+new", "+evil") } };
    expect((await raised(async () => applyContent(clone, tampered))).error.code).toBe("RESULT_CONTENT_INVALID");
    expect(existsSync(join(clone, "new.txt"))).toBe(false);
  });

  test(`a change over maxResultContentBytes (${maxResultContentBytes}) is not attached: omitted, RESULT_TOO_LARGE`, () => {
    const { repo, base } = repoAndClone();
    writeFileSync(join(repo, "big.txt"), "x".repeat(maxResultContentBytes));
    const content = collectContent(repo, { base, changedFiles: [] })!;
    expect(content.patch).toBeUndefined();
    expect(content.omitted).toMatchObject({ code: "RESULT_TOO_LARGE", maxBytes: maxResultContentBytes });
    expect(content.omitted!.bytes).toBeGreaterThan(maxResultContentBytes);
  });
});

describe("changed files as content", () => {
  test("the files travel (text and binary, a missing one listed absent) and are written into another directory", () => {
    const worker = scratchDir("pi-tasks-worker-");
    writeFileSync(join(worker, "hello.txt"), "Hello\n");
    writeFileSync(join(worker, "blob.bin"), Buffer.from([0xff, 0x00]));
    const content = collectContent(worker, { changedFiles: ["hello.txt", "blob.bin", "gone.txt"] })!;
    expect(content.files!.map((file) => [file.path, file.encoding])).toEqual([
      ["hello.txt", "utf8"],
      ["blob.bin", "base64"],
    ]);
    expect(content.absent).toEqual(["gone.txt"]);
    const origin = scratchDir("pi-tasks-origin-");
    expect(applyContent(origin, content)).toEqual({ mode: "files", paths: ["hello.txt", "blob.bin"] });
    expect(readFileSync(join(origin, "hello.txt"), "utf8")).toBe("Hello\n");
    expect([...readFileSync(join(origin, "blob.bin"))]).toEqual([0xff, 0x00]);
    // Applying the same content again changes nothing and is no conflict.
    expect(applyContent(origin, content).paths).toEqual(["hello.txt", "blob.bin"]);
  });

  test(`files of exactly maxResultContentBytes (${maxResultContentBytes}) in total are attached; one byte more is omitted`, () => {
    const worker = scratchDir("pi-tasks-worker-");
    writeFileSync(join(worker, "a.txt"), "a".repeat(maxResultContentBytes - 1));
    writeFileSync(join(worker, "b.txt"), "b");
    expect(collectContent(worker, { changedFiles: ["a.txt", "b.txt"] })!.files).toHaveLength(2);
    writeFileSync(join(worker, "b.txt"), "bb");
    expect(collectContent(worker, { changedFiles: ["a.txt", "b.txt"] })).toEqual({
      omitted: { code: "RESULT_TOO_LARGE", bytes: maxResultContentBytes + 1, maxBytes: maxResultContentBytes },
    });
  });

  test("all or nothing: one file existing with other content is a conflict and no file is written", async () => {
    const worker = scratchDir("pi-tasks-worker-");
    writeFileSync(join(worker, "a.txt"), "a\n");
    writeFileSync(join(worker, "b.txt"), "b\n");
    const content = collectContent(worker, { changedFiles: ["a.txt", "b.txt"] })!;
    const origin = scratchDir("pi-tasks-origin-");
    writeFileSync(join(origin, "b.txt"), "mine\n");
    const { error } = await raised(async () => applyContent(origin, content));
    expect(error.code).toBe("APPLY_CONFLICT");
    expect(existsSync(join(origin, "a.txt"))).toBe(false);
    expect(readFileSync(join(origin, "b.txt"), "utf8")).toBe("mine\n");
  });

  test("a carried file whose path leaves the project is refused at the origin, whatever the worker claimed", async () => {
    const origin = scratchDir("pi-tasks-origin-");
    const data = "x\n";
    const sha256 = new Bun.CryptoHasher("sha256").update(data).digest("hex");
    const escaping = { files: [{ path: "../outside.txt", encoding: "utf8", data, sha256 }] };
    expect((await raised(async () => applyContent(origin, escaping))).error.code).toBe("INVALID_RESULT_PATH");
    expect(existsSync(join(origin, "..", "outside.txt"))).toBe(false);
  });

  test(`more than maxResultFiles (${maxResultFiles}) changed files are not attached: omitted with the count`, () => {
    const worker = scratchDir("pi-tasks-worker-");
    const names = Array.from({ length: maxResultFiles + 1 }, (_, index) => `f${index}.txt`);
    for (const name of names) writeFileSync(join(worker, name), "x");
    const content = collectContent(worker, { changedFiles: names })!;
    expect(content.files).toBeUndefined();
    expect(content.omitted).toMatchObject({ code: "RESULT_TOO_LARGE", files: maxResultFiles + 1, maxFiles: maxResultFiles });
  });

  test("no content: applying a result without any is NO_RESULT_CONTENT", async () => {
    expect((await raised(async () => applyContent(scratchDir("pi-tasks-origin-"), undefined))).error.code).toBe("NO_RESULT_CONTENT");
  });
});

describe("changedFiles paths", () => {
  test("relative paths inside the project pass, normalized", () => {
    const root = scratchDir("pi-tasks-project-");
    expect(checkChangedFiles(root, ["src/a.ts", "./b.ts", "src/../c.ts"])).toEqual(["src/a.ts", "b.ts", "c.ts"]);
    expect(checkChangedFiles(root, undefined)).toEqual([]);
  });

  test("absolute, escaping, through a symbolic link out, or not a list: INVALID_RESULT_PATH", async () => {
    const root = scratchDir("pi-tasks-project-");
    symlinkSync(tmpdir(), join(root, "out"));
    for (const bad of [["/etc/passwd"], ["../x"], ["src/../../x"], ["out/secret"], "a.ts", [7]]) {
      const { error } = await raised(async () => checkChangedFiles(root, bad));
      expect(error.code).toBe("INVALID_RESULT_PATH");
    }
  });
});
