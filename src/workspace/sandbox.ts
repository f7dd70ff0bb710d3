/**
 * An OS sandbox for the commands a worker's model runs under a grant: bubblewrap (`bwrap`, the
 * Debian package `bubblewrap`), Linux user namespaces. The whole file system is mounted read-only
 * and `/tmp` is a private, empty, writable one (the project directory shown in it again when it lies
 * there); only the grant's write scopes are writable besides; the pi-tasks home
 * and Pi's agent directory are hidden behind empty directories (no key, no pairing, no profile, no
 * provider credential can be read or changed from inside); the network is cut unless the grant
 * allows it. The command keeps its working directory and environment.
 *
 * When the grant scopes reading, the sandbox shows only the system's directories (programs,
 * libraries, configuration), the toolchain, the read scopes and the write scopes: nothing else of
 * the file system (the user's home included) exists inside.
 *
 * What it does not do: limit CPU or memory, or apply on another OS (`sandboxUnavailable` says why).
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { isWithin } from "../protocol/paths.ts";

/** The bubblewrap program; found on PATH. */
export const BWRAP = "bwrap";

/** What one sandboxed command may touch. */
export interface SandboxPlan {
  /** Absolute, real paths shown again over the private `/tmp` (the project directory), as the root is. */
  readonly readable: readonly string[];
  /** Absolute, real paths the command may write (those that do not exist are left out). */
  readonly writable: readonly string[];
  /** Absolute paths hidden behind an empty directory (the pi-tasks home, Pi's agent directory). */
  readonly hidden: readonly string[];
  /** Whether the command may reach the network. */
  readonly network: boolean;
  /**
   * When given, the only paths of the file system shown (read-only) besides the system's own
   * directories (`SYSTEM_DIRS`) and the writable ones: the grant's read scopes and what the
   * toolchain needs. Absent: everything is shown.
   */
  readonly visible?: readonly string[];
}

/** What every command needs to run at all: programs, libraries, configuration. Shown when reading is scoped. */
export const SYSTEM_DIRS: readonly string[] = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"];

let probed: string | undefined | null = null;

/** Why no sandbox can be made here (another OS, no bubblewrap, no user namespaces), or undefined when one can. */
export function sandboxUnavailable(): string | undefined {
  if (probed !== null) return probed;
  if (process.platform !== "linux")
    probed = `no sandbox on ${process.platform}: workers' commands are sandboxed with bubblewrap on Linux only`;
  else {
    const run = spawnSync(BWRAP, ["--ro-bind", "/", "/", "--unshare-net", "--", "true"], { stdio: "ignore" });
    if (run.error !== undefined)
      probed = "bubblewrap is not installed (install the Debian package `bubblewrap`: apt-get install -y bubblewrap)";
    else if (run.status !== 0) probed = `bubblewrap cannot make a sandbox here (exit ${run.status}): user namespaces may be off`;
    else probed = undefined;
  }
  return probed;
}

/** A text as one shell word. */
export function shellWord(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

/** bubblewrap's arguments for `plan`, up to (not including) the command. Later mounts go over earlier ones. */
export function sandboxArgs(plan: SandboxPlan): string[] {
  // Writable everywhere (a grant that restricts no writes): the root itself is bound writable, so
  // the sandbox's own /dev, /proc and /tmp still go over it.
  const root = plan.writable.includes("/") ? "--bind" : "--ro-bind";
  // Reading scoped: an empty root with the system's directories and the visible paths on it.
  const base =
    plan.visible === undefined
      ? [root, "/", "/"]
      : [
          "--tmpfs",
          "/",
          ...[...SYSTEM_DIRS, ...plan.visible].filter((path) => existsSync(path)).flatMap((path) => ["--ro-bind", path, path]),
        ];
  const args = [...base, "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--die-with-parent"];
  // The working directory exists inside even when reading is scoped to parts of it (its other files do not).
  if (plan.visible !== undefined) for (const path of plan.readable) args.push("--dir", path);
  // Shown again over the private /tmp: as the root is (read-only, or writable everywhere).
  for (const path of plan.visible === undefined ? plan.readable : plan.visible) if (existsSync(path)) args.push(root, path, path);
  for (const path of plan.writable) if (path !== "/" && existsSync(path)) args.push("--bind", path, path);
  for (const path of plan.hidden) if (existsSync(path)) args.push("--tmpfs", path);
  // A path shown or writable *inside* a hidden directory (a worker's own workspace in the pi-tasks
  // home) is bound again over the hiding; the hidden directory itself, and the rest of it, stay hidden.
  const under = (path: string) => plan.hidden.some((hidden) => path !== hidden && isWithin(path, hidden));
  if (plan.visible !== undefined) for (const path of plan.readable) if (under(path)) args.push("--dir", path);
  for (const path of plan.visible === undefined ? plan.readable : plan.visible)
    if (under(path) && existsSync(path)) args.push(root, path, path);
  for (const path of plan.writable) if (under(path) && existsSync(path)) args.push("--bind", path, path);
  if (!plan.network) args.push("--unshare-net");
  return args;
}

/** `command` (a shell command line) wrapped to run in the sandbox `plan` describes: bubblewrap runs the original with bash. */
export function sandboxedCommand(command: string, plan: SandboxPlan): string {
  return `exec ${BWRAP} ${sandboxArgs(plan).map(shellWord).join(" ")} -- /bin/bash -c ${shellWord(command)}`;
}
