/**
 * Faults across machines (docs/reliability.md, "Across machines"): hosts `a` and `b` are network
 * namespaces, each with its relay on its own loopback; their state is in one Redis on host `redis`.
 * An origin party on `a` keeps sending tasks to a worker party on `b` (testkit/netns-party.ts: the
 * library's task core, its own identity, paired), addressing the worker's session as it is
 * registered then. Each fault strikes while tasks are in flight; when it ends every task is completed
 * and acknowledged — 0 lost — and no event was presented twice on either side. Each test prints its
 * figures (`figures: {…}`).
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import {
  describeWithNetns,
  type HostParty,
  type LinkFaults,
  pairedHomes,
  type PartyStats,
  startHostParty,
  startHostRelay,
  useMachines,
} from "../helpers/netns-kit.ts";

setDefaultTimeout(240_000);

const WORKER_SESSION = "netns-worker";
/** Tasks each scenario sends, and how far apart. */
const TASKS = 20;
const SEND_EVERY_MS = 150;
/** How long the Redis link of a host stays cut. */
const LINK_CUT_MS = 10_000;
/** How long after a fault ends every task must be acknowledged. */
const RECOVERY_DEADLINE_MS = 60_000;
/**
 * The slow, lossy link: 200 ms more round trip (100 ms each way, as `netem delay 200ms` on one side
 * would add), and 5 % of chunks held a retransmission (1 s) longer.
 */
const SLOW_LOSSY: LinkFaults = { delayMs: 100, loss: 0.05, retransmitMs: 1_000 };
/** Tasks sent over the slow link (each takes seconds there). */
const SLOW_TASKS = 5;
/** Every Redis call of a relay takes 200 ms or more there: the tasks take longer to come back. */
const SLOW_DEADLINE_MS = 180_000;

type Figures = Record<string, number | string>;

/** Machines, paired parties on `a` (origin) and `b` (worker), and a scenario runner that sums what was sent. */
function useScenarios(faults?: LinkFaults, deadlineMs = RECOVERY_DEADLINE_MS) {
  const machines = useMachines(faults);
  const parties: { homes?: Awaited<ReturnType<typeof pairedHomes>>; origin?: HostParty; worker?: HostParty } = {};
  let sent = 0;
  beforeAll(async () => {
    parties.homes = await pairedHomes();
    const homes = parties.homes;
    parties.worker = await startHostParty(machines.net.host("b"), {
      relay: machines.relays.b,
      home: homes.b,
      session: WORKER_SESSION,
      role: "worker",
    });
    parties.origin = await startHostParty(machines.net.host("a"), {
      relay: machines.relays.a,
      home: homes.a,
      session: "netns-origin",
      role: "origin",
    });
  });
  afterAll(async () => {
    await Promise.allSettled([parties.origin?.stop(), parties.worker?.stop()]);
    parties.homes?.remove();
  });

  /** Sends a batch, runs `fault` while it is in flight; resolves with the figures once every task is acknowledged. */
  async function scenario(name: string, fault: () => Promise<void>, tasks = TASKS): Promise<Figures> {
    const origin = parties.origin!;
    sent += tasks;
    origin.send(WORKER_SESSION, tasks, SEND_EVERY_MS);
    await Bun.sleep(SEND_EVERY_MS * 3);
    await fault();
    const ended = Date.now();
    let stats: PartyStats = await origin.stats();
    while (stats.acknowledged < sent && Date.now() - ended < deadlineMs) {
      await Bun.sleep(250);
      stats = await origin.stats();
    }
    const atWorker = await parties.worker!.stats();
    const figures = {
      scenario: name,
      sent,
      acknowledged: stats.acknowledged,
      lost: sent - stats.acknowledged,
      twiceOrigin: stats.twice,
      twiceWorker: atWorker.twice,
      recoveredMs: Date.now() - ended,
    };
    console.log(`figures: ${JSON.stringify(figures)}`);
    return figures;
  }
  return { machines, scenario };
}

const nothingLost = { lost: 0, twiceOrigin: 0, twiceWorker: 0 };

describeWithNetns("faults across machines (network namespaces)", () => {
  const { machines, scenario } = useScenarios();

  test("baseline: tasks from host a to host b, through two relays and one Redis", async () => {
    expect(await scenario("baseline", async () => undefined)).toMatchObject(nothingLost);
  });

  test(`host b's link cut for ${LINK_CUT_MS / 1000} s (its relay loses Redis) and restored`, async () => {
    const figures = await scenario(`link cut ${LINK_CUT_MS / 1000} s`, async () => {
      machines.net.cut("b");
      await Bun.sleep(LINK_CUT_MS);
      machines.net.restore("b");
    });
    expect(figures).toMatchObject(nothingLost);
  });

  test("host b's relay killed and restarted on its port", async () => {
    const figures = await scenario("relay killed", async () => {
      const port = machines.relays.b.port;
      await machines.relays.b.stop("SIGKILL");
      await Bun.sleep(2_000);
      machines.relays.b = await startHostRelay(machines.net.host("b"), machines.storeUrl("b"), port);
    });
    expect(figures).toMatchObject(nothingLost);
  });

  test("Redis restarted empty (a reset): both sides rebind, find each other and re-send", async () => {
    expect(await scenario("redis restarted empty", () => machines.redis.restart())).toMatchObject(nothingLost);
  });
});

describeWithNetns("a slow, lossy link between the hosts and Redis (200 ms more round trip, 5 % loss)", () => {
  const { scenario } = useScenarios(SLOW_LOSSY, SLOW_DEADLINE_MS);

  test("every task completes and is acknowledged once", async () => {
    expect(await scenario("200 ms round trip, 5 % loss", async () => undefined, SLOW_TASKS)).toMatchObject(nothingLost);
  });
});
