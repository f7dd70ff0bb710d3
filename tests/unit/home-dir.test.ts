/**
 * The pi-tasks home directory (src/platform/home-dir.ts): whichever part of pi-tasks creates it or a
 * directory in it (identity, peers, spawned workers, logs, agents, embedded relays), it is created
 * 0700; a home that exists open to group or others, or owned by another user, is refused with
 * HOME_INVALID naming the fix — never used.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { embeddedRelayRecord } from "../../src/host/embedded-relay.ts";
import { logDir, saveSpawned, scriptedAgentDir } from "../../src/host/spawned.ts";
import { ensureHome, ensureHomeSubdirectory } from "../../src/platform/home-dir.ts";
import { ensureIdentity } from "../../src/trust/identity.ts";
import { generateIdentity } from "../../src/trust/keys.ts";
import { addPeer } from "../../src/trust/peers.ts";
import { failure, thrown } from "../../testkit/async.ts";

const PERMISSIONS = 0o777;
/** A user id that is not this process's (nobody). */
const OTHER_UID = 65_534;
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A home that does not exist yet, two levels below a fresh temporary directory. */
function missingHome(): string {
  const dir = mkdtempSync(join(tmpdir(), "pi-tasks-home-dir-"));
  dirs.push(dir);
  return join(dir, "nested", "home");
}

const mode = (path: string) => statSync(path).mode & PERMISSIONS;

const CREATORS: Record<string, (home: string) => unknown> = {
  "the identity": (home) => ensureIdentity(home),
  "a peer": (home) => addPeer(home, "bob", generateIdentity().identity.publicKey),
  "the logs": (home) => logDir({ PI_TASKS_HOME: home }),
  "a scripted worker's agent directory": (home) => scriptedAgentDir({ PI_TASKS_HOME: home }, "worker-1"),
  "a spawn record": (home) =>
    saveSpawned(
      { PI_TASKS_HOME: home },
      { session: "worker-1", pid: 1, projectDir: "/p", relay: "http://127.0.0.1:1", log: "/l", createdAt: "" },
    ),
  "the embedded relay's files": (home) => embeddedRelayRecord({ PI_TASKS_HOME: home }, 1),
};

describe("creating the home", () => {
  for (const [what, create] of Object.entries(CREATORS)) {
    test(`${what}: the home and every directory created in it are 0700`, async () => {
      const home = missingHome();
      await create(home);
      expect(mode(home)).toBe(0o700);
      for (const sub of ["logs", "agents", join("agents", "worker-1"), "spawned", "relays"]) {
        const path = join(home, sub);
        let exists = true;
        try {
          statSync(path);
        } catch {
          exists = false;
        }
        if (exists) expect({ sub, mode: mode(path) }).toEqual({ sub, mode: 0o700 });
      }
    });
  }
});

describe("a home that is not the user's alone", () => {
  test("open to group or others (as older versions made it): HOME_INVALID naming `chmod 700`; after the fix it is used", async () => {
    // Guards home-dir.ts GROUP_OTHER_BITS = 0o077: besides the usual modes, each of the six bits alone.
    for (const open of [0o755, 0o750, 0o705, 0o770, 0o740, 0o720, 0o710, 0o704, 0o702, 0o701]) {
      const home = missingHome();
      mkdirSync(home, { recursive: true });
      chmodSync(home, open);
      const error = thrown(() => ensureIdentity(home));
      expect(error.code).toBe("HOME_INVALID");
      expect(error.message).toContain(`chmod 700 ${home}`);
      expect(error.details).toMatchObject({ path: home, mode: `0${open.toString(8)}`, fix: `chmod 700 ${home}` });
      expect((await failure(addPeer(home, "bob", generateIdentity().identity.publicKey))).code).toBe("HOME_INVALID");
      expect(thrown(() => logDir({ PI_TASKS_HOME: home })).code).toBe("HOME_INVALID");
      chmodSync(home, 0o700);
      expect(ensureIdentity(home).created).toBe(true);
    }
  });

  test("owned by another user: HOME_INVALID naming the owner; nothing is created in it", () => {
    const home = missingHome();
    mkdirSync(home, { recursive: true, mode: 0o700 });
    chownSync(home, OTHER_UID, OTHER_UID);
    const error = thrown(() => ensureIdentity(home));
    expect(error.code).toBe("HOME_INVALID");
    expect(error.message).toContain(`uid ${OTHER_UID}`);
    expect(thrown(() => scriptedAgentDir({ PI_TASKS_HOME: home }, "w")).code).toBe("HOME_INVALID");
    expect(() => statSync(join(home, "identity.json"))).toThrow();
  });

  test("a file where the home should be: HOME_INVALID saying it is not a directory, naming the fix", () => {
    // Guards home-dir.ts homeProblem: the directory check (reached also when mkdir finds the file there).
    const home = missingHome();
    mkdirSync(join(home, ".."), { recursive: true, mode: 0o700 });
    writeFileSync(home, "not a directory");
    const error = thrown(() => ensureHome(home));
    expect(error.code).toBe("HOME_INVALID");
    expect(error.details).toMatchObject({ path: home, fix: `rm ${home}` });
    expect(String(error.details.problem)).toStartWith("is not a directory");
  });
});

describe("a directory inside the home", () => {
  /** A 0700 home holding `sub` as made by `plant`. */
  function homeWith(plant: (sub: string) => void): { home: string; sub: string } {
    const home = missingHome();
    mkdirSync(home, { recursive: true, mode: 0o700 });
    const sub = join(home, "logs");
    plant(sub);
    return { home, sub };
  }

  test("one of the user's own is used (and made 0700 when missing)", () => {
    const { home, sub } = homeWith(() => {});
    expect(ensureHomeSubdirectory(home, "logs")).toBe(sub);
    expect(mode(sub)).toBe(0o700);
  });

  test("a symbolic link, even to a directory of the user's own, is HOME_INVALID naming `rm`", () => {
    // Guards home-dir.ts ensureHomeSubdirectory: lstat and the directory check (a link is not followed).
    const elsewhere = missingHome();
    mkdirSync(elsewhere, { recursive: true, mode: 0o700 });
    const { home, sub } = homeWith((path) => symlinkSync(elsewhere, path));
    const error = thrown(() => ensureHomeSubdirectory(home, "logs"));
    expect(error.code).toBe("HOME_INVALID");
    expect(error.details).toMatchObject({ path: sub, fix: `rm ${sub}` });
    expect(String(error.details.problem)).toContain("symbolic link");
  });

  test("a file where the directory should be is HOME_INVALID naming `rm`", () => {
    // Guards home-dir.ts ensureHomeSubdirectory: the directory check.
    const { home, sub } = homeWith((path) => writeFileSync(path, "not a directory"));
    const error = thrown(() => ensureHomeSubdirectory(home, "logs"));
    expect(error.code).toBe("HOME_INVALID");
    expect(error.details).toMatchObject({ path: sub, fix: `rm ${sub}` });
  });

  test("one owned by another user is HOME_INVALID naming the owner", () => {
    // Guards home-dir.ts ensureHomeSubdirectory: the owner check.
    const { home, sub } = homeWith((path) => {
      mkdirSync(path, { mode: 0o700 });
      chownSync(path, OTHER_UID, OTHER_UID);
    });
    const error = thrown(() => ensureHomeSubdirectory(home, "logs"));
    expect(error.code).toBe("HOME_INVALID");
    expect(error.details).toMatchObject({ path: sub, owner: OTHER_UID, fix: `rm -r ${sub}` });
  });
});
