/**
 * Delegation in two other Pi extensions, for comparison with ours: pi-subagents (npm
 * `pi-subagents`, measured in its foreground mode: `async: false`, the child is a session inside the
 * origin's Pi process) and Pi's own example `subagent` extension (one `pi --mode json -p` process
 * per task). Each is loaded alone (`-e <peer>`, no pi-tasks) into a real Pi 1.6 CLI in RPC mode
 * under Bun, with the scripted model (`faux/faux-1`, bench/scenarios/peer-origin.ts): the bench's
 * prompt names the delegation call, the model makes it, and answers with text after the result.
 * Children answer their task at once (`done: <task>`, bench/scenarios/peer-child.ts), so the figures
 * are the peers' delegation machinery, not a model's work.
 *
 * How the children get the scripted model: the scripted-model extension is listed in the fresh
 * `PI_CODING_AGENT_DIR`'s settings.json (the origin and every `pi` child the example starts load it
 * from there, the scenario from the inherited `PI_TASKS_TEST_SCRIPT`); the child agent
 * `bench-peer` (agents/bench-peer.md in that directory, user scope for both peers) names
 * `model: faux/faux-1`, and for pi-subagents, whose foreground children load no ambient extensions,
 * also `extensions: <scripted model>` and `acceptanceRole: read-only` (like its scout: no acceptance
 * gate is inferred; a writer's inferred gate adds some hundreds of ms per call).
 *
 * Files: the origin keeps its session in the round's directory (`--session-dir`), where pi-subagents
 * also puts its children's sessions; pi-subagents' run files go there too (`PI_SUBAGENTS_TEMP_ROOT`).
 * `TMPDIR` is left as it is: Pi's extension compile cache lives there, and a fresh one made every
 * start take ~10 s more (pi-subagents is large), a cost a user's Pi pays once.
 *
 * Each figure runs from the bench's arrival (Date.now() when read) of the origin's
 * `tool_execution_start` record of the delegation call to that of its `tool_execution_end` (the
 * tool result carrying the children's answers, checked):
 * - `first`: the first single delegation of a fresh Pi session;
 * - `warm`: a second single delegation in the same session;
 * - `parallel4`: four tasks in parallel in one call;
 * - `chain3`: a chain of three steps in one call, each given the previous answer.
 * Each round is a fresh origin Pi (and fresh directories) per peer; medians over the rounds. A peer
 * not installed is reported `absent` with how to install it.
 */
import { type Subprocess, spawn } from "bun";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type RpcRecord, rpcChannel } from "../../src/demo/pi-rpc.ts";
import { PACKAGE_ROOT, piCommand, SCRIPTED_MODEL, SCRIPTED_MODEL_EXTENSION, scriptedEnv } from "../../src/host/pi-cli.ts";
import { within } from "../../src/platform/waits.ts";
import { summarize } from "../lib/stats.ts";
import { childAnswer, PEER_TASK_TAG } from "../scenarios/peer-child.ts";
import { type DelegationCall, delegatePrompt } from "../scenarios/peer-origin.ts";

const ROUNDS = 5;
const QUICK_ROUNDS = 1;
const PARALLEL_TASKS = 4;
const CHAIN_STEPS = 3;
/** Until the origin Pi answers its first RPC command (pi-subagents loads for several seconds on 2 cores). */
const STARTUP_TIMEOUT_MS = 120_000;
/** The longest one delegation call may take before the measurement fails. */
const CALL_TIMEOUT_MS = 60_000;
/** How long the origin's model may take to settle after the tool result. */
const SETTLE_TIMEOUT_MS = 15_000;
/** How long a stopped Pi may take to exit after its stdin closed, before it and its children are killed. */
const SHUTDOWN_GRACE_MS = 5_000;
/** Characters of a failed call's tool result in the error. */
const ERROR_CHARS = 600;
const CHILD_AGENT = "bench-peer";
const ORIGIN_SCRIPT = join(import.meta.dir, "..", "scenarios", "peer-origin.ts");
const PI_SUBAGENTS_VERSION = "0.67.0";
const PI_SUBAGENTS_DIR_VARIABLE = "PI_SUBAGENTS_DIR";
const PI_PACKAGE = join(PACKAGE_ROOT, "node_modules", "@earendil-works", "pi-coding-agent");
const PI_EXAMPLE_DIR = join(PI_PACKAGE, "examples", "extensions", "subagent");

export interface PeerFigures {
  /** The peer's package version (Pi's own for its example). */
  readonly version: string;
  /** Median ms over the rounds, each figure. */
  readonly first: number;
  readonly warm: number;
  readonly parallel4: number;
  readonly chain3: number;
  readonly rounds: number;
}

export type PeerResult = PeerFigures | { readonly absent: string };

export interface DelegationPeers {
  readonly piSubagents: PeerResult;
  readonly piExample: PeerResult;
}

/** One delegation extension: where it is, what its child agent declares, how its tool is called. */
interface Peer {
  readonly label: string;
  readonly version: string;
  /** What `-e` loads. */
  readonly extension: string;
  /** Frontmatter lines of the `bench-peer` agent besides name, description, tools and model. */
  readonly agentLines: readonly string[];
  single(task: string): DelegationCall;
  parallel(tasks: readonly string[]): DelegationCall;
  chain(tasks: readonly string[]): DelegationCall;
}

const packageVersion = (dir: string) =>
  String((JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { version?: unknown }).version);

/** pi-subagents' workflow form: foreground children (`async: false`) launched by `runs.run`/`runs.all`. */
function piSubagentsPeer(dir: string): Peer {
  const launch = (task: string) => `agent: ${JSON.stringify(CHILD_AGENT)}, task: ${task}, async: false`;
  const workflow = (workflowScript: string): DelegationCall => ({ tool: "subagent", arguments: { async: false, workflowScript } });
  return {
    label: "pi-subagents",
    version: packageVersion(dir),
    extension: dir,
    // A read-only child: no acceptance gate is inferred for it (as for pi-subagents' scout).
    agentLines: [`extensions: ${SCRIPTED_MODEL_EXTENSION}`, "acceptanceRole: read-only"],
    single: (task) => ({ tool: "subagent", arguments: { agent: CHILD_AGENT, task, async: false } }),
    parallel: (tasks) =>
      workflow(
        `const results = await runs.all([${tasks.map((task, index) => `{ key: "t${index}", ${launch(JSON.stringify(task))} }`).join(", ")}]);\n` +
          "return results.map((result) => result.output);",
      ),
    chain: (tasks) =>
      workflow(
        tasks
          .map((task, index) => {
            const text = index === 0 ? JSON.stringify(task) : `${JSON.stringify(`${task} after `)} + step${index - 1}.output`;
            return `const step${index} = await runs.run("s${index}", { ${launch(text)} });`;
          })
          .concat(`return step${tasks.length - 1}.output;`)
          .join("\n"),
      ),
  };
}

/** Pi's example: `{agent, task}`, `{tasks: [...]}` (parallel), `{chain: [...]}` with `{previous}`. */
function piExamplePeer(): Peer {
  return {
    label: "Pi example subagent",
    version: packageVersion(PI_PACKAGE),
    extension: join(PI_EXAMPLE_DIR, "index.ts"),
    agentLines: [],
    single: (task) => ({ tool: "subagent", arguments: { agent: CHILD_AGENT, task } }),
    parallel: (tasks) => ({ tool: "subagent", arguments: { tasks: tasks.map((task) => ({ agent: CHILD_AGENT, task })) } }),
    chain: (tasks) => ({
      tool: "subagent",
      arguments: { chain: tasks.map((task, index) => ({ agent: CHILD_AGENT, task: index === 0 ? task : `${task} after {previous}` })) },
    }),
  };
}

/** pi-subagents from `PI_SUBAGENTS_DIR`, else this repository's node_modules; or why it is absent. */
function locatePiSubagents(): Peer | { absent: string } {
  const named = process.env[PI_SUBAGENTS_DIR_VARIABLE]?.trim();
  const dir = named || join(PACKAGE_ROOT, "node_modules", "pi-subagents");
  if (existsSync(join(dir, "package.json")) && existsSync(join(dir, "index.ts"))) return piSubagentsPeer(dir);
  return {
    absent:
      `pi-subagents not found at ${dir}: npm install --no-save --ignore-scripts --legacy-peer-deps pi-subagents@${PI_SUBAGENTS_VERSION} ` +
      `(in this repository, or elsewhere and set ${PI_SUBAGENTS_DIR_VARIABLE} to its package directory)`,
  };
}

function locatePiExample(): Peer | { absent: string } {
  if (existsSync(join(PI_EXAMPLE_DIR, "index.ts"))) return piExamplePeer();
  return {
    absent: `Pi's example subagent extension not found at ${PI_EXAMPLE_DIR}: npm install (the @earendil-works/pi-coding-agent dev dependency)`,
  };
}

type Stamped = RpcRecord & { readonly receivedAt: number };

interface PeerPi {
  readonly records: Stamped[];
  command(command: Record<string, unknown>): void;
  waitFor(predicate: (record: RpcRecord) => boolean, timeoutMs: number, from?: number): Promise<Stamped>;
  stop(): Promise<void>;
}

/** Kills what is left of the process group `pid` leads (a Pi and the children it started). */
function killGroup(pid: number): void {
  try {
    process.kill(-pid, "SIGKILL");
  } catch (error) {
    // No process of the group is left: nothing to stop.
    if ((error as NodeJS.ErrnoException).code !== "ESRCH") throw error;
  }
}

/** A round's directories: the agent dir (settings, the child agent), the project, temporary files. */
function prepareRound(peer: Peer, base: string): { agentDir: string; cwd: string; sessions: string; temp: string } {
  const agentDir = join(base, "agent");
  const cwd = join(base, "project");
  const sessions = join(base, "sessions");
  const temp = join(base, "tmp");
  for (const dir of [join(agentDir, "agents"), cwd, sessions, temp]) mkdirSync(dir, { recursive: true });
  writeFileSync(join(agentDir, "settings.json"), JSON.stringify({ extensions: [SCRIPTED_MODEL_EXTENSION] }));
  const frontmatter = [
    `name: ${CHILD_AGENT}`,
    "description: Bench child; answers its task at once (scripted model)",
    "tools: read",
    `model: ${SCRIPTED_MODEL}`,
    ...peer.agentLines,
  ];
  writeFileSync(join(agentDir, "agents", `${CHILD_AGENT}.md`), `---\n${frontmatter.join("\n")}\n---\n\nAnswer the task.\n`);
  return { agentDir, cwd, sessions, temp };
}

/** The origin Pi: RPC mode, Bun, the peer alone, its own process group (so its children stop with it). */
function startPeerPi(peer: Peer, base: string): PeerPi {
  const { agentDir, cwd, sessions, temp } = prepareRound(peer, base);
  const env: Record<string, string | undefined> = {
    ...process.env,
    ...scriptedEnv({ script: ORIGIN_SCRIPT }),
    PI_CODING_AGENT_DIR: agentDir,
    PI_SUBAGENTS_TEMP_ROOT: temp,
  };
  const args = ["--mode", "rpc", "--session-dir", sessions, "--offline", "-e", peer.extension, "--model", SCRIPTED_MODEL];
  const child: Subprocess<"pipe", "pipe", "pipe"> = spawn([...piCommand(env), ...args], {
    cwd,
    env,
    stdin: "pipe",
    stdout: "pipe",
    stderr: "pipe",
    detached: true,
  });
  const channel = rpcChannel(child);
  return {
    records: channel.records,
    command: channel.command,
    waitFor: (predicate, timeoutMs, from) => channel.waitFor(predicate, timeoutMs, from) as Promise<Stamped>,
    async stop() {
      if (child.exitCode === null) child.stdin.end();
      await within(child.exited, SHUTDOWN_GRACE_MS);
      killGroup(child.pid);
      await child.exited;
    },
  };
}

/** Runs `step` of `peer`; a failure names both. */
async function step<T>(peer: Peer, name: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    throw new Error(`${peer.label} ${name}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
}

/** Makes the origin call `call`; ms from its `tool_execution_start` to its `tool_execution_end`, whose result must hold `answers`. */
async function timedCall(pi: PeerPi, call: DelegationCall, answers: readonly string[]): Promise<number> {
  const from = pi.records.length;
  pi.command({ id: `bench-${from}`, type: "prompt", message: delegatePrompt(call) });
  const started = await pi.waitFor(
    (record) => record.type === "tool_execution_start" && record.toolName === call.tool,
    CALL_TIMEOUT_MS,
    from,
  );
  const toolCallId = started.toolCallId;
  const ended = await pi.waitFor(
    (record) => record.type === "tool_execution_end" && record.toolCallId === toolCallId,
    CALL_TIMEOUT_MS,
    pi.records.indexOf(started),
  );
  const result = JSON.stringify((ended.result as { content?: unknown } | undefined)?.content ?? ended.result);
  const missing = answers.filter((answer) => !result.includes(answer));
  if (ended.isError === true || missing.length > 0)
    throw new Error(`the tool result lacks ${JSON.stringify(missing)} (isError ${String(ended.isError)}): ${result.slice(0, ERROR_CHARS)}`);
  await pi.waitFor((record) => record.type === "agent_settled", SETTLE_TIMEOUT_MS, pi.records.indexOf(ended));
  return ended.receivedAt - started.receivedAt;
}

type Round = Omit<PeerFigures, "version" | "rounds">;

/** One fresh origin Pi: first and warm single delegations, then four in parallel, then a chain of three. */
async function round(peer: Peer): Promise<Round> {
  const base = mkdtempSync(join(tmpdir(), "pi-tasks-bench-peers-"));
  const pi = startPeerPi(peer, base);
  let next = 0;
  const tasks = (count: number) => Array.from({ length: count }, () => `${PEER_TASK_TAG}${(next += 1)}`);
  try {
    await step(peer, "startup", () => {
      pi.command({ id: "bench-ready", type: "get_state" });
      return pi.waitFor((record) => record.type === "response" && record.id === "bench-ready", STARTUP_TIMEOUT_MS);
    });
    const single = async (name: string) => {
      const [task] = tasks(1) as [string];
      return step(peer, name, () => timedCall(pi, peer.single(task), [childAnswer(task)]));
    };
    const first = await single("first delegation");
    const warm = await single("warm delegation");
    const fanned = tasks(PARALLEL_TASKS);
    const parallel4 = await step(peer, "parallel delegation", () => timedCall(pi, peer.parallel(fanned), fanned.map(childAnswer)));
    const chained = tasks(CHAIN_STEPS);
    const chain3 = await step(peer, "chain delegation", () => timedCall(pi, peer.chain(chained), [childAnswer(chained.at(-1)!)]));
    return { first, warm, parallel4, chain3 };
  } finally {
    await pi.stop();
    rmSync(base, { recursive: true, force: true });
  }
}

const median = (samples: readonly number[]) => summarize(samples).p50;

async function measurePeer(located: Peer | { absent: string }, rounds: number): Promise<PeerResult> {
  if ("absent" in located) return located;
  const results: Round[] = [];
  for (let index = 0; index < rounds; index += 1) results.push(await round(located));
  return {
    version: located.version,
    first: median(results.map((result) => result.first)),
    warm: median(results.map((result) => result.warm)),
    parallel4: median(results.map((result) => result.parallel4)),
    chain3: median(results.map((result) => result.chain3)),
    rounds,
  };
}

/** Both peers, one after the other (never at once: the figures are per peer on a quiet machine). */
export async function measureDelegationPeers(options: { quick?: boolean; rounds?: number } = {}): Promise<DelegationPeers> {
  const rounds = options.rounds ?? (options.quick === true ? QUICK_ROUNDS : ROUNDS);
  const piSubagents = await measurePeer(locatePiSubagents(), rounds);
  const piExample = await measurePeer(locatePiExample(), rounds);
  return { piSubagents, piExample };
}
