/**
 * Machines on one Linux box: each host a network namespace with its own loopback and one address on a
 * private /24, all joined by a bridge in a namespace of their own (the switch). A host's link is cut
 * by setting its switch port down and restored by setting it up; a program runs on a host through
 * `ip netns exec` (it keeps this process's files, environment and stdio). Nothing touches the
 * machine's own network namespace: the only addresses are the hosts' and their loopbacks.
 *
 * Needs root and `ip` (Debian package `iproute2`); `netnsUnavailable()` says why not. Every
 * namespace is deleted by `destroy()`, and at the latest when this process exits.
 *
 * ```ts
 * const net = await createNetwork(["a", "b", "redis"]);
 * const redis = net.host("redis").spawn(["redis-server", "--bind", net.host("redis").address]);
 * net.cut("b");  net.restore("b");
 * await net.destroy();
 * ```
 */
import { type Subprocess, spawn, spawnSync } from "bun";

/** Programs a kit host runs are killed after this long once asked to stop. */
const STOP_GRACE_MS = 2_000;

export interface Host {
  readonly name: string;
  /** The namespace's name (`ip netns exec NAME …`). */
  readonly namespace: string;
  /** Its address on the network (its loopback is 127.0.0.1 of its own). */
  readonly address: string;
  /** The argv that runs `argv` on this host. */
  wrap(argv: readonly string[]): string[];
  /** Starts a program on this host (piped stdio unless told otherwise); stopped with the network. */
  spawn(
    argv: readonly string[],
    options?: { readonly env?: Record<string, string | undefined>; readonly cwd?: string },
  ): Subprocess<"pipe", "pipe", "pipe">;
  /** Runs a program on this host to its end. */
  run(argv: readonly string[]): { readonly code: number; readonly stdout: string; readonly stderr: string };
}

export interface Network {
  host(name: string): Host;
  /** Cuts `name`'s link (its switch port down): nothing reaches it or leaves it; its own loopback still works. */
  cut(name: string): void;
  restore(name: string): void;
  /** Stops every program started on the hosts, then deletes every namespace. */
  destroy(): Promise<void>;
}

/** Why namespaces cannot be made here (not root, no `ip`), or undefined when they can. */
export function netnsUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return "network namespaces need root";
  const probe = spawnSync(["ip", "netns", "list"], { stdout: "ignore", stderr: "pipe" });
  if (probe.exitCode !== 0) return `\`ip netns\` does not work (package iproute2): ${probe.stderr.toString().trim()}`;
  return undefined;
}

function ip(args: readonly string[]): void {
  const done = spawnSync(["ip", ...args], { stdout: "ignore", stderr: "pipe" });
  if (done.exitCode !== 0) throw new Error(`ip ${args.join(" ")} failed: ${done.stderr.toString().trim()}`);
}

const live = new Set<string>();
let exitHook = false;
function deleteOnExit(namespace: string): void {
  live.add(namespace);
  if (exitHook) return;
  exitHook = true;
  process.on("exit", () => {
    for (const name of live) spawnSync(["ip", "netns", "del", name], { stdout: "ignore", stderr: "ignore" });
  });
}

function makeNamespace(namespace: string): void {
  ip(["netns", "add", namespace]);
  deleteOnExit(namespace);
  ip(["-n", namespace, "link", "set", "lo", "up"]);
}

/** What the hosts of one network share: its id, its /24, the switch namespace, and the programs started on it. */
interface NetworkPlace {
  readonly id: string;
  readonly subnet: string;
  readonly hub: string;
  readonly programs: Set<Subprocess>;
}

/** Host `index`: its namespace, a veth pair (the inside end addressed on the subnet, the switch end on the bridge). */
function addHost(network: NetworkPlace, name: string, index: number): Host & { readonly port: string } {
  const { id, subnet, hub, programs } = network;
  const namespace = `pt${id}${name}`;
  const inside = `v${id}${index}h`;
  const port = `v${id}${index}s`;
  makeNamespace(namespace);
  ip(["link", "add", inside, "type", "veth", "peer", "name", port]);
  ip(["link", "set", inside, "netns", namespace]);
  ip(["link", "set", port, "netns", hub]);
  ip(["-n", hub, "link", "set", port, "master", "br0"]);
  ip(["-n", hub, "link", "set", port, "up"]);
  const address = `${subnet}.${index + 1}`;
  ip(["-n", namespace, "addr", "add", `${address}/24`, "dev", inside]);
  ip(["-n", namespace, "link", "set", inside, "up"]);
  const wrap = (argv: readonly string[]) => ["ip", "netns", "exec", namespace, ...argv];
  return {
    name,
    namespace,
    address,
    port,
    wrap,
    spawn(argv, options = {}) {
      const env = { ...process.env, ...options.env };
      for (const [key, value] of Object.entries(options.env ?? {})) if (value === undefined) delete env[key];
      const child = spawn(wrap(argv), {
        env,
        ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
        stdin: "pipe",
        stdout: "pipe",
        stderr: "pipe",
      });
      programs.add(child);
      void child.exited.then(() => programs.delete(child));
      return child;
    },
    run(argv) {
      const done = spawnSync(wrap(argv), { stdout: "pipe", stderr: "pipe" });
      return { code: done.exitCode ?? -1, stdout: done.stdout.toString(), stderr: done.stderr.toString() };
    },
  };
}

/** Builds the switch and one host per name, each on its address of a fresh private /24. */
export async function createNetwork(names: readonly string[]): Promise<Network> {
  const reason = netnsUnavailable();
  if (reason !== undefined) throw new Error(reason);
  const id = crypto.randomUUID().replaceAll("-", "").slice(0, 4);
  const subnet = `10.${200 + Math.floor(Math.random() * 50)}.${Math.floor(Math.random() * 250)}`;
  const hub = `pt${id}sw`;
  makeNamespace(hub);
  ip(["-n", hub, "link", "add", "br0", "type", "bridge"]);
  ip(["-n", hub, "link", "set", "br0", "up"]);
  const hosts = new Map<string, Host & { readonly port: string }>();
  const programs = new Set<Subprocess>();
  names.forEach((name, index) => hosts.set(name, addHost({ id, subnet, hub, programs }, name, index)));
  const get = (name: string) => {
    const host = hosts.get(name);
    if (host === undefined) throw new Error(`no host ${name} on this network`);
    return host;
  };
  return {
    host: get,
    cut: (name) => ip(["-n", hub, "link", "set", get(name).port, "down"]),
    restore: (name) => ip(["-n", hub, "link", "set", get(name).port, "up"]),
    async destroy() {
      for (const child of programs) child.kill("SIGTERM");
      await Promise.race([Promise.allSettled([...programs].map((child) => child.exited)), Bun.sleep(STOP_GRACE_MS)]);
      for (const child of programs) child.kill("SIGKILL");
      for (const namespace of [...hosts.values()].map((host) => host.namespace).concat(hub)) {
        spawnSync(["ip", "netns", "del", namespace], { stdout: "ignore", stderr: "ignore" });
        live.delete(namespace);
      }
    },
  };
}
