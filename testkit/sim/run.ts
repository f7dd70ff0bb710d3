/**
 * One seed's run, top to bottom: the world starts on a healed network and every session connects;
 * then `steps` steps, each drawn from the seed — a model's turn, time moving on (passes and relay
 * maintenance fire on the way), a partition, a relay restart, a Pi crash or restart, a stranger
 * taking a lapsed name — with the invariants checked after each, the relay hostile throughout as
 * the seed says (testkit/sim/hostile.ts); then the end: the network heals and the relay turns honest,
 * workers finish what they hold, time runs `SIM_END_MS`, and the end's invariant is checked. The
 * trace says every step in words, ids as short aliases, so two runs of one seed compare byte for
 * byte.
 */
import { activePollIntervalMs, defaultLeaseMs, idlePollIntervalMs, relayMaintenanceIntervalMs } from "../../src/protocol/limits.ts";
import { seedIds } from "./ids.ts";
import { createSimRandom } from "./random.ts";
import { createInvariants, type Invariants, type Violation } from "./invariants.ts";
import { finish, type ModelCall, modelTurn, SIM_TASK_TIMEOUT_MAX_MS } from "./model.ts";
import { type HostileRates, NO_HOSTILITY } from "./hostile.ts";
import { NO_NETWORK_FAULTS, type NetworkFaults } from "./network.ts";
import { createWorld, type SimSession, type World } from "./world.ts";

/** Virtual time the end gives the world to settle: past every task's expiry, plus the orphan bound. */
export const SIM_END_MS = SIM_TASK_TIMEOUT_MAX_MS + 60_000;
/** How likely the end begins with one working Pi crashing for good. */
const END_CRASH_CHANCE = 0.5;
/** The end advances in strides of this much virtual time, workers finishing between them. */
const END_STRIDE_MS = 5_000;
/** The longest a model's turn keeps its Pi busy, in virtual ms. */
const MAX_TURN_MS = 8_000;
/** The longest one time step moves the clock, in virtual ms. */
const MAX_TIME_STEP_MS = 4_000;
/** The longest partition, in virtual ms: well past a lease (60 s) and the orphan bound, so a cut-off worker can be orphaned, its task reassigned, and come back. */
const MAX_PARTITION_MS = 150_000;

export interface SimOptions {
  readonly sessions: number;
  readonly steps: number;
  readonly faults: NetworkFaults;
  /** Per step: how likely a partition of one session begins. */
  readonly partitions: number;
  /** Per step: how likely the relay restarts empty. */
  readonly relayRestarts: number;
  /** Per step: how likely a running Pi crashes. */
  readonly crashes: number;
  /** Per step: how likely a crashed session's Pi starts again (half of them resuming their tasks). */
  readonly restarts: number;
  /** Per step: how likely a stranger takes the name of a session whose Pi crashed (once per name). */
  readonly strangers: number;
  /** Per receive: how likely the relay withholds, reorders, replays, rewrites, forges or sends junk (testkit/sim/hostile.ts). */
  readonly hostile: HostileRates;
  /** The checks (default: every invariant of invariants.ts; a test may give its own). */
  readonly invariants?: () => Invariants;
}

export const DEFAULT_SIM_OPTIONS: SimOptions = {
  sessions: 3,
  steps: 120,
  faults: { delay: 0.05, loseRequest: 0.03, loseReply: 0.03, duplicate: 0.03 },
  partitions: 0.04,
  relayRestarts: 0.005,
  crashes: 0.01,
  restarts: 0.02,
  strangers: 0.1,
  hostile: { withhold: 0.05, reorder: 0.03, replay: 0.03, rewrite: 0.02, forge: 0.05, junk: 0.01 },
};

export interface SimResult {
  readonly seed: number;
  readonly options: SimOptions;
  readonly trace: readonly string[];
  readonly violation?: Violation & { readonly step: number };
  /** What the run reached: tool calls by kind and outcome, faults by kind, end states. */
  readonly coverage: Readonly<Record<string, number>>;
  readonly virtualMs: number;
}

/** What one run keeps while it goes: the world, its trace and counts, the first violation. */
interface Run {
  readonly world: World;
  readonly invariants: Invariants;
  readonly trace: string[];
  readonly coverage: Record<string, number>;
  readonly calls: Set<Promise<void>>;
  readonly nextPass: Map<SimSession, number>;
  /** When each stranger's Pi passes next, by the name it took. */
  readonly strangerPass: Map<string, number>;
  /** Until when each session's Pi is busy with a turn of its model (it cannot be shown items). */
  readonly busyUntil: Map<SimSession, number>;
  nextMaintenance: number;
  violation: Violation | undefined;
  alias(text: string): string;
}

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;

function createAliases(): (text: string) => string {
  const names = new Map<string, string>();
  return (text) =>
    text.replace(UUID, (id) => {
      let name = names.get(id);
      if (name === undefined) names.set(id, (name = `#${names.size + 1}`));
      return name;
    });
}

function count(run: Run, key: string): void {
  run.coverage[key] = (run.coverage[key] ?? 0) + 1;
}

function note(run: Run, text: string): void {
  for (const news of run.world.drainNews()) run.trace.push(`${String(run.world.timers.now()).padStart(7)} ${run.alias(news)}`);
  run.trace.push(`${String(run.world.timers.now()).padStart(7)} ${run.alias(text)}`);
}

/** A tool call or pass begun: its outcome is counted, traced and checked when it settles. */
function begin(run: Run, session: SimSession | undefined, call: ModelCall): void {
  const kind = call.label.split(" ")[0]!;
  const who = session === undefined ? "stranger" : session.name;
  if (kind !== "pass" || session !== undefined) note(run, `${who}: ${call.label}`);
  const settled = call.run.then(
    () => ({ status: "fulfilled", value: undefined }) as const,
    (reason: unknown) => ({ status: "rejected", reason }) as const,
  );
  const tracked: Promise<void> = settled.then((outcome) => {
    run.calls.delete(tracked);
    const code = outcome.status === "fulfilled" ? "ok" : ((outcome.reason as { code?: string }).code ?? "untyped");
    const reason =
      outcome.status === "rejected" ? (outcome.reason as { details?: { reason?: unknown; problem?: unknown } }).details : undefined;
    const why = reason?.reason ?? reason?.problem;
    count(run, `call ${kind} ${code}`);
    if (kind !== "pass" || code !== "ok") note(run, `${who}: ${call.label} → ${code}${typeof why === "string" ? ` (${why})` : ""}`);
    run.violation ??= run.invariants.callSettled(`${who}: ${call.label}`, outcome);
  });
  run.calls.add(tracked);
}

/** Passes and maintenance due now run; then the next due instant. */
async function runDue(run: Run): Promise<void> {
  const { world } = run;
  const now = world.timers.now();
  for (const session of world.sessions) session.host.busy = (run.busyUntil.get(session) ?? 0) > now;
  for (const session of world.sessions) {
    if ((run.nextPass.get(session) ?? 0) > now || session.down) continue;
    const busy = session.core.hasActiveTasks() || session.core.hasPendingWork();
    run.nextPass.set(session, now + (busy ? activePollIntervalMs : idlePollIntervalMs));
    begin(run, session, { label: "pass", run: session.pi.configured.refresh() });
  }
  for (const [name, pi] of world.strangers) {
    if ((run.strangerPass.get(name) ?? 0) > now) continue;
    run.strangerPass.set(name, now + activePollIntervalMs);
    begin(run, undefined, { label: `pass of the stranger as ${name}`, run: pi.configured.refresh() });
  }
  if (run.nextMaintenance <= now) {
    run.nextMaintenance = now + relayMaintenanceIntervalMs;
    await world.relay().engine.maintain();
  }
  await world.quiet();
}

/** Whether a pass or maintenance is due now (else a stop at this instant would repeat forever). */
function dueNow(run: Run): boolean {
  const now = run.world.timers.now();
  const passDue = run.world.sessions.some((session) => !session.down && (run.nextPass.get(session) ?? 0) <= now);
  return passDue || run.nextMaintenance <= now || (run.world.timers.nextAt() ?? Number.POSITIVE_INFINITY) <= now;
}

/** Moves virtual time on by `ms`, stopping at every timeout, pass and maintenance on the way. */
async function advance(run: Run, ms: number): Promise<void> {
  const { timers } = run.world;
  const end = timers.now() + ms;
  while (timers.now() < end) {
    const passes = run.world.sessions.filter((session) => !session.down).map((session) => run.nextPass.get(session) ?? 0);
    const due = Math.max(timers.now(), Math.min(end, timers.nextAt() ?? end, run.nextMaintenance, ...passes));
    if (due === timers.now() && !dueNow(run)) throw new Error(`simulator: time cannot move on at ${timers.now()} ms`);
    if (due > timers.now()) await timers.advance(due - timers.now());
    await run.world.quiet();
    await runDue(run);
  }
}

/** The session's Pi works on a task now. */
const holdsWork = (session: SimSession) => session.core.listTasks().some((task) => task.role === "worker" && task.status === "active");

/** A Pi crashes, or a crashed session's Pi starts again — or nothing, as the seed says. */
function piFault(run: Run, options: SimOptions): boolean {
  const { world } = run;
  const { random } = world;
  const up = world.sessions.filter((session) => !session.down);
  const down = world.sessions.filter((session) => session.down);
  if (up.length > 0 && random.chance(options.crashes)) {
    // A worker's Pi crashing mid-task is the case that matters: it is the victim when there is one.
    const working = up.filter(holdsWork);
    const session = random.pick(working.length > 0 ? working : up);
    note(run, `${session.pi.id} crashes`);
    count(run, "fault crash");
    world.crash(session);
    return true;
  }
  // A name lapses a lease after its Pi crashed: a stranger takes it then.
  const lapsed = world.timers.now() - defaultLeaseMs - relayMaintenanceIntervalMs;
  const nameless = down.filter(
    (session) => !world.strangers.has(session.name) && (session.pi.crashedAt ?? Number.POSITIVE_INFINITY) < lapsed,
  );
  if (nameless.length > 0 && random.chance(options.strangers)) {
    const session = random.pick(nameless);
    count(run, "fault stranger");
    begin(run, undefined, { label: `takes the name ${session.name}`, run: world.takeName(session) });
    return true;
  }
  if (down.length > 0 && random.chance(options.restarts)) {
    const session = random.pick(down);
    const resume = random.chance(0.5);
    count(run, `fault restart${resume ? " (resume)" : ""}`);
    begin(run, session, { label: `restart${resume ? " resuming" : ""}`, run: world.restart(session, resume) });
    run.nextPass.set(session, world.timers.now());
    return true;
  }
  return false;
}

async function step(run: Run, options: SimOptions): Promise<void> {
  const { world } = run;
  const { random } = world;
  if (piFault(run, options)) return world.quiet();
  if (random.chance(options.relayRestarts)) {
    note(run, "relay restarts empty");
    count(run, "fault relay-restart");
    return world.restartRelay();
  }
  if (random.chance(options.partitions)) {
    // A worker cut off mid-task (long enough to be orphaned, then back as a zombie) matters most.
    const working = world.sessions.filter((session) => !session.down && holdsWork(session));
    const session = random.pick(working.length > 0 ? working : world.sessions);
    const forMs = random.between(1_000, MAX_PARTITION_MS);
    note(run, `${session.name} partitioned for ${forMs} ms`);
    count(run, "fault partition");
    return world.network.partition(session.name, world.timers.now() + forMs);
  }
  if (random.chance(0.5)) {
    const session = random.pick(world.sessions);
    const call = session.down ? undefined : modelTurn(world, session);
    if (call !== undefined) {
      begin(run, session, call);
      // The turn keeps the Pi busy a while: what arrives meanwhile waits to be shown.
      run.busyUntil.set(session, world.timers.now() + random.between(0, MAX_TURN_MS));
    }
    return world.quiet();
  }
  return advance(run, random.between(10, MAX_TIME_STEP_MS));
}

/**
 * The end: a healed network and an honest relay; half the time one worker's Pi crashes for good
 * (its tasks must be orphaned within the bound); the others finish everything they hold; time for
 * all of it to land.
 */
async function end(run: Run): Promise<void> {
  const { world } = run;
  world.network.setFaults(NO_NETWORK_FAULTS);
  world.hostile.setRates(NO_HOSTILITY);
  for (const session of world.sessions) world.network.partition(session.name, 0);
  note(run, "end: the network heals");
  const working = world.sessions.filter((session) => !session.down && holdsWork(session));
  if (working.length > 0 && world.random.chance(END_CRASH_CHANCE)) {
    const lost = world.random.pick(working);
    note(run, `end: ${lost.pi.id} crashes for good`);
    count(run, "fault crash (end)");
    world.crash(lost);
  }
  for (let elapsed = 0; elapsed < SIM_END_MS && run.violation === undefined; elapsed += END_STRIDE_MS) {
    for (const session of world.sessions.filter((each) => !each.down)) {
      for (const task of session.core.listTasks()) {
        if (task.role === "worker" && task.status === "active" && task.terminalDelivery.state === "not_submitted")
          begin(run, session, finish(session, task.taskId));
      }
    }
    await advance(run, END_STRIDE_MS);
    run.violation ??= run.invariants.afterStep(world);
  }
  for (const session of world.sessions.filter((each) => !each.down))
    for (const task of session.core.listTasks())
      if (task.role === "origin") count(run, `end ${task.status}${task.attention ? ` (${task.attention})` : ""}`);
  run.violation ??= run.invariants.atEnd(world);
}

async function connectAll(run: Run): Promise<void> {
  for (const session of run.world.sessions)
    begin(run, session, { label: "connect", run: session.pi.configured.run((core) => core.connect()) });
  for (let rounds = 0; run.calls.size > 0; rounds += 1) {
    if (rounds > 100) throw new Error("simulator: the sessions did not connect on a healed network");
    await advance(run, 100);
  }
}

/** Runs one seed. `steps` may be cut short (shrinking): the steps it keeps are the same draws. */
export async function runSeed(seed: number, options: SimOptions = DEFAULT_SIM_OPTIONS): Promise<SimResult> {
  const restoreIds = seedIds(createSimRandom(seed, "ids"));
  try {
    return await runWorld(seed, options);
  } finally {
    restoreIds();
  }
}

async function runWorld(seed: number, options: SimOptions): Promise<SimResult> {
  const world = await createWorld(seed, { sessions: options.sessions, faults: NO_NETWORK_FAULTS, hostile: NO_HOSTILITY });
  const run: Run = {
    world,
    invariants: (options.invariants ?? createInvariants)(),
    trace: [],
    coverage: {},
    calls: new Set(),
    nextPass: new Map(world.sessions.map((session) => [session, 0])),
    busyUntil: new Map(),
    strangerPass: new Map(),
    nextMaintenance: 0,
    violation: undefined,
    alias: createAliases(),
  };
  let at = 0;
  try {
    await connectAll(run);
    world.network.setFaults(options.faults);
    world.hostile.setRates(options.hostile);
    for (; at < options.steps && run.violation === undefined; at += 1) {
      await step(run, options);
      run.violation ??= run.invariants.afterStep(world);
    }
    if (run.violation === undefined) await end(run);
  } finally {
    await world.close();
  }
  for (const [fate, times] of Object.entries(world.network.fates())) if (times > 0) run.coverage[`network ${fate}`] = times;
  for (const [act, times] of Object.entries(world.hostile.acts())) if (times > 0) run.coverage[`hostile ${act}`] = times;
  return {
    seed,
    options,
    trace: run.trace,
    ...(run.violation === undefined ? {} : { violation: { ...run.violation, message: run.alias(run.violation.message), step: at } }),
    coverage: run.coverage,
    virtualMs: world.timers.now(),
  };
}
