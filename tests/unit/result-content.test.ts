/**
 * Results that travel (src/workspace/result-content.ts), with real git: a worktree's change (an edit, a new
 * file, a binary file) becomes a patch that applies to another clone; a conflict changes nothing and
 * is listed; a tampered patch or file is refused by its hash; changed files' paths must stay inside
 * the project (absolute, `..`, a symbolic link out — into a sibling whose name starts with the
 * project's, or one whose target does not exist yet); content over the bound (bytes, or files one
 * past maxResultFiles) is omitted with its reason; carried files are written all or nothing.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, realpathSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { raised } from "../../testkit/async.ts";
import { git, gitProject, removeProjects, scratchDir } from "../helpers/git-project.ts";
import { applyContent, checkChangedFiles, collectContent } from "../../src/workspace/result-content.ts";
import { maxResultContentBytes, maxResultFiles } from "../../src/protocol/limits.ts";

afterAll(removeProjects);

/** A carried file as a worker sends it (utf8, with its hash). */
function carried(path: string, data: string) {
  return { path, encoding: "utf8", data, sha256: new Bun.CryptoHasher("sha256").update(data).digest("hex") };
}

/**
 * A project directory beside siblings whose names start with its own (`proj-sibling`, `projX`),
 * each holding a `secret`, all in one fresh directory — what a mutant lets escape stays in there.
 */
function projectWithSiblings(): { parent: string; root: string } {
  const parent = realpathSync(scratchDir("pi-tasks-siblings-"));
  const root = join(parent, "proj");
  for (const dir of [root, join(root, "sub"), join(parent, "proj-sibling"), join(parent, "projX")]) mkdirSync(dir);
  writeFileSync(join(parent, "proj-sibling", "secret"), "sibling's\n");
  writeFileSync(join(parent, "projX", "secret"), "projX's\n");
  return { parent, root };
}

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
    // Checked first (`git apply --check`, applyPatch): the conflicts are git's error lines, one each.
    const conflicts = error.details.conflicts as string[];
    expect(conflicts.length).toBeGreaterThan(0);
    for (const line of conflicts) expect(line).toMatch(/^error: [^\n]*$/);
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

  test("no change since the base is no content (never an empty patch)", () => {
    // collectContent: `if (text === "") return undefined`.
    const { repo, base } = repoAndClone();
    expect(collectContent(repo, { base, changedFiles: [] })).toBeUndefined();
  });

  test(`a worktree's patch is not bounded by the file count: more than maxResultFiles (${maxResultFiles}) files travel as one patch`, () => {
    // collectContent: the file-count bound applies to carried files only (`options.base === undefined && …`).
    const { repo, clone, base } = repoAndClone();
    const names = Array.from({ length: maxResultFiles + 1 }, (_, index) => `f${index}.txt`);
    for (const name of names) writeFileSync(join(repo, name), `${name}\n`);
    const content = collectContent(repo, { base, changedFiles: names })!;
    expect(content.omitted).toBeUndefined();
    expect(content.patch?.format).toBe("git-diff");
    expect(applyContent(clone, content).paths).toHaveLength(maxResultFiles + 1);
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

  test("content omitted for its size still lists the changed files that are absent", () => {
    // collectContent: the omitted answer keeps `absent`.
    const worker = scratchDir("pi-tasks-worker-");
    writeFileSync(join(worker, "big.txt"), "x".repeat(maxResultContentBytes + 1));
    expect(collectContent(worker, { changedFiles: ["big.txt", "gone.txt"] })).toEqual({
      absent: ["gone.txt"],
      omitted: { code: "RESULT_TOO_LARGE", bytes: maxResultContentBytes + 1, maxBytes: maxResultContentBytes },
    });
  });

  test("no changed files, or a directory named as one, carry no file: nothing, or the directory listed absent", () => {
    // changedFileContent: only regular files are read (`!lstatSync(full).isFile()` → absent); collectContent: nothing → undefined.
    const worker = scratchDir("pi-tasks-worker-");
    mkdirSync(join(worker, "src"));
    expect(collectContent(worker, { changedFiles: [] })).toBeUndefined();
    expect(collectContent(worker, { changedFiles: ["src"] })).toEqual({ absent: ["src"] });
  });

  test("a carried file changed on the way is refused by its hash, and nothing is written", async () => {
    // applyFiles: `sha256(bytes) !== file.sha256` → RESULT_CONTENT_INVALID.
    const worker = scratchDir("pi-tasks-worker-");
    writeFileSync(join(worker, "a.txt"), "good\n");
    writeFileSync(join(worker, "b.txt"), "also good\n");
    const content = collectContent(worker, { changedFiles: ["a.txt", "b.txt"] })!;
    const [first, second] = content.files!;
    const tampered = { files: [first, { ...second!, data: "evil\n" }] };
    const origin = scratchDir("pi-tasks-origin-");
    expect((await raised(async () => applyContent(origin, tampered))).error.code).toBe("RESULT_CONTENT_INVALID");
    expect(existsSync(join(origin, "a.txt"))).toBe(false);
    expect(existsSync(join(origin, "b.txt"))).toBe(false);
  });

  test("applying a result whose content was omitted is NO_RESULT_CONTENT, and says why it was omitted", async () => {
    // applyContent: the omitted reason travels in the error's details.
    const omitted = { code: "RESULT_TOO_LARGE", bytes: maxResultContentBytes + 1, maxBytes: maxResultContentBytes };
    const { error } = await raised(async () => applyContent(scratchDir("pi-tasks-origin-"), { omitted }));
    expect(error.code).toBe("NO_RESULT_CONTENT");
    expect(error.details).toEqual({ omitted });
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
    // The origin is inside a scratch directory, so what a defect would write outside it stays there.
    const origin = join(scratchDir("pi-tasks-origin-"), "checkout");
    mkdirSync(origin);
    const escaping = { files: [carried("../outside.txt", "x\n")] };
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

  test(`exactly maxResultFiles (${maxResultFiles}) changed files are attached; one more is omitted with the count and their size`, () => {
    // collectContent: `files > maxResultFiles` (not `>=`); a listed file that is gone counts no bytes.
    const worker = scratchDir("pi-tasks-worker-");
    const names = Array.from({ length: maxResultFiles }, (_, index) => `f${index}.txt`);
    for (const name of names) writeFileSync(join(worker, name), "x");
    const content = collectContent(worker, { changedFiles: names })!;
    expect(content.omitted).toBeUndefined();
    expect(content.files).toHaveLength(maxResultFiles);
    // The schema takes that many (its maxItems is the same bound): they apply at the origin.
    expect(applyContent(scratchDir("pi-tasks-origin-"), content).paths).toEqual(names);
    expect(collectContent(worker, { changedFiles: [...names, "gone.txt"] })).toEqual({
      omitted: {
        code: "RESULT_TOO_LARGE",
        bytes: maxResultFiles,
        maxBytes: maxResultContentBytes,
        files: maxResultFiles + 1,
        maxFiles: maxResultFiles,
      },
    });
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

  /** The problem `checkChangedFiles` names for `path` (fails the test when the path is accepted). */
  async function problemOf(root: string, path: unknown): Promise<unknown> {
    const { error } = await raised(async () => checkChangedFiles(root, [path]));
    expect(error.code).toBe("INVALID_RESULT_PATH");
    return error.details.problem;
  }

  test("a symbolic link into a sibling whose name starts with the project's name leads out: refused (the prefix ends with a separator)", async () => {
    // insideProject: `target.startsWith(`${real}${sep}`)`, never `startsWith(real)`: /x/proj-sibling starts with /x/proj.
    const { parent, root } = projectWithSiblings();
    symlinkSync(join(parent, "proj-sibling"), join(root, "sib"));
    symlinkSync(join(parent, "proj-sibling", "secret"), join(root, "secret-link"));
    symlinkSync(join(parent, "projX"), join(root, "x"));
    for (const path of ["sib/secret", "sib", "secret-link", "x/secret", "x/new.txt"])
      expect(await problemOf(root, path)).toBe("leads out of the project through a symbolic link");
    // At the origin too: nothing is written through it.
    const { error } = await raised(async () => applyContent(root, { files: [carried("sib/planted.txt", "x\n")] }));
    expect(error.code).toBe("INVALID_RESULT_PATH");
    expect(existsSync(join(parent, "proj-sibling", "planted.txt"))).toBe(false);
  });

  test("a symbolic link to a directory inside the project, or to the project itself, stays inside: accepted", () => {
    // insideProject: a target inside (`${real}${sep}` prefix) or the project itself (`target !== real`) passes.
    const { root } = projectWithSiblings();
    symlinkSync(join(root, "sub"), join(root, "inner"));
    symlinkSync(root, join(root, "self"));
    expect(checkChangedFiles(root, ["inner/a.ts", "inner", "self/a.ts", "self"])).toEqual(["inner/a.ts", "inner", "self/a.ts", "self"]);
  });

  test("a symbolic link whose target does not exist yet is refused: writing through it would create that file outside", async () => {
    // insideProject: a link is judged by where it leads even when nothing is there yet (linkTarget).
    const { parent, root } = projectWithSiblings();
    symlinkSync(join(parent, "proj-sibling", "planted.txt"), join(root, "later"));
    expect(await problemOf(root, "later")).toBe("leads through a symbolic link whose target does not exist");
    const { error } = await raised(async () => applyContent(root, { files: [carried("later", "x\n")] }));
    expect(error.code).toBe("INVALID_RESULT_PATH");
    expect(existsSync(join(parent, "proj-sibling", "planted.txt"))).toBe(false);
  });

  test("`..` as a whole segment leaves the project; a name that merely starts with two dots stays inside", async () => {
    // insideProject: `normal === ".." || normal.startsWith(`..${sep}`)` — the segment, not the two characters.
    const root = scratchDir("pi-tasks-project-");
    for (const path of ["..", "../x", "src/../../x", "../pi-tasks-project-x/a.ts"])
      expect(await problemOf(root, path)).toBe("leaves the project");
    expect(checkChangedFiles(root, ["..notes.txt", "..hidden/a.ts", "src/..x"])).toEqual(["..notes.txt", "..hidden/a.ts", "src/..x"]);
  });

  test("an absolute path, and an empty one, are refused for what they are", async () => {
    // insideProject: `isAbsolute(path)`; `path.length === 0` ("" would normalize to the project itself).
    const root = scratchDir("pi-tasks-project-");
    expect(await problemOf(root, join(root, "a.ts"))).toBe("absolute; give it relative to the project");
    expect(await problemOf(root, "")).toBe("not a path");
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

// Issue 37, tried from outside: results reached what they should not.
describe("what applying a result may never reach", () => {
  /** A patch the way a worker's collectContent carries it. */
  function patchOf(text: string) {
    const sha256 = new Bun.CryptoHasher("sha256").update(text).digest("hex");
    return { patch: { format: "git-diff", text, sha256, base: "0".repeat(40) } };
  }

  test("a carried file into .git (a hook, or .git itself at any depth, in any case) is INVALID_RESULT_PATH and nothing is written", async () => {
    const { clone } = repoAndClone();
    for (const path of [".git/hooks/pre-commit", "sub/.git/config", ".GIT/hooks/post-checkout"]) {
      const { error } = await raised(async () =>
        applyContent(clone, { files: [carried("ok.txt", "fine\n"), carried(path, "#!/bin/sh\necho owned\n")] }),
      );
      expect({ path, code: error.code }).toEqual({ path, code: "INVALID_RESULT_PATH" });
    }
    expect(existsSync(join(clone, ".git", "hooks", "pre-commit"))).toBe(false);
    expect(existsSync(join(clone, "ok.txt"))).toBe(false);
  });

  test("a file and a directory of the same name (`a`, then `a/b`) are refused before anything is written; no untyped error", async () => {
    const root = scratchDir("pi-tasks-apply-");
    const { error } = await raised(async () => applyContent(root, { files: [carried("a", "file\n"), carried("a/b", "under\n")] }));
    expect(error.code).toBe("INVALID_RESULT_PATH");
    expect(existsSync(join(root, "a"))).toBe(false);
    writeFileSync(join(root, "c"), "a file already\n");
    const { error: blocked } = await raised(async () =>
      applyContent(root, { files: [carried("new.txt", "n\n"), carried("c/d", "under\n")] }),
    );
    expect(blocked.code).toBe("APPLY_CONFLICT");
    expect(existsSync(join(root, "new.txt"))).toBe(false);
  });

  test("a patch that makes a symbolic link, or writes into .git, is INVALID_RESULT_PATH and changes nothing", async () => {
    const { clone } = repoAndClone();
    const link = [
      "diff --git a/escape b/escape",
      "new file mode 120000",
      "index 0000000..1111111",
      "--- /dev/null",
      "+++ b/escape",
      "@@ -0,0 +1 @@",
      "+/etc",
      "\\ No newline at end of file",
      "",
    ].join("\n");
    expect((await raised(async () => applyContent(clone, patchOf(link)))).error.code).toBe("INVALID_RESULT_PATH");
    expect(existsSync(join(clone, "escape"))).toBe(false);
    const hook = [
      "diff --git a/.git/hooks/pre-commit b/.git/hooks/pre-commit",
      "new file mode 100755",
      "--- /dev/null",
      "+++ b/.git/hooks/pre-commit",
      "@@ -0,0 +1,2 @@",
      "+#!/bin/sh",
      "+echo owned",
      "",
    ].join("\n");
    expect((await raised(async () => applyContent(clone, patchOf(hook)))).error.code).toBe("INVALID_RESULT_PATH");
    expect(existsSync(join(clone, ".git", "hooks", "pre-commit"))).toBe(false);
    // A rename whose source is git's own configuration: the count names only where it goes.
    const moved = [
      "diff --git a/.git/config b/config.txt",
      "similarity index 100%",
      "rename from .git/config",
      "rename to config.txt",
      "",
    ].join("\n");
    expect((await raised(async () => applyContent(clone, patchOf(moved)))).error.code).toBe("INVALID_RESULT_PATH");
    expect(existsSync(join(clone, ".git", "config"))).toBe(true);
  });

  test("in a project inside a larger repository, a patch applies relative to the project, not the repository's top", () => {
    const outer = gitProject();
    mkdirSync(join(outer, "app"));
    writeFileSync(join(outer, "app", "README.md"), "app\n");
    writeFileSync(join(outer, "README.md"), "outer\n");
    git(outer, "add", "-A");
    git(outer, "commit", "-q", "-m", "app inside");
    const patch = [
      "diff --git a/README.md b/README.md",
      "--- a/README.md",
      "+++ b/README.md",
      "@@ -1 +1 @@",
      "-app",
      "+app, changed",
      "",
    ].join("\n");
    const applied = applyContent(join(outer, "app"), patchOf(patch));
    expect(applied.paths).toEqual(["README.md"]);
    expect(readFileSync(join(outer, "app", "README.md"), "utf8")).toBe("app, changed\n");
    expect(readFileSync(join(outer, "README.md"), "utf8")).toBe("outer\n");
  });
});
