/**
 * Delegation as the origin's model feels it (issue 39): a specialist by name, cold and warm, and a
 * workflow of four (bench/measure/specialists.ts), each beside the same step in pi-subagents'
 * foreground mode and in Pi's example `subagent` extension when those are installed
 * (bench/measure/delegation-peers.ts). With pi-subagents present each figure is a same-run ratio
 * to its figure and holds a goal; without it, the figure is our milliseconds, with no goal.
 */
import type { DelegationPeers, PeerFigures } from "../measure/delegation-peers.ts";
import type { SpecialistsResult } from "../measure/specialists.ts";
import { GOALS } from "../goals.ts";
import { round } from "../lib/stats.ts";
import type { Figure } from "../report.ts";
import { fmt } from "./format.ts";

type Peer = DelegationPeers["piSubagents"];
const present = (peer: Peer): peer is PeerFigures => !("absent" in peer);

function peersDetail(peers: DelegationPeers): string {
  const one = (name: string, peer: Peer) =>
    present(peer)
      ? `${name}: first ${fmt(peer.first)} ms, warm ${fmt(peer.warm)} ms, 4 in parallel ${fmt(peer.parallel4)} ms (${peer.rounds} rounds)`
      : `${name}: not measured (${peer.absent})`;
  return `${one("pi-subagents 0.67.0 (foreground)", peers.piSubagents)}; ${one("Pi's example subagent (a process per task)", peers.piExample)}`;
}

const HOW =
  "A real Pi 1.6 (RPC, Bun, scripted model) per peer; from the bench's arrival of the origin's `tool_execution_start` to the arrival of the result in the origin's session (ours: the `## task completed` event message, or the one `pi-tasks-workflow` message; the peers': the tool's `tool_execution_end`, which carries the child's answer). Children answer at once. Medians over the rounds; each round a fresh origin.";

/** One figure: ours ÷ the peer's same step (`theirs`, named `theirLabel`) when pi-subagents is present (goal `goal`), else our ms. */
function versus(
  id: string,
  label: string,
  ours: number,
  [theirLabel, theirs]: readonly [string, (peer: PeerFigures) => number],
  goal: number,
  detail: string,
  peers: DelegationPeers,
): Figure {
  const peer = peers.piSubagents;
  const common = { how: HOW, anchor: "—", detail: `${detail}; ${peersDetail(peers)}` };
  if (!present(peer)) return { id, label: `${label} (ms; pi-subagents not installed: no goal)`, measured: ours, unit: "ms", ...common };
  return {
    id,
    label: `${label} ÷ pi-subagents' ${theirLabel}`,
    measured: round(ours / theirs(peer), 2),
    unit: "×",
    goal: { op: "<=", value: goal },
    ...common,
  };
}

export function delegationFigures(s: SpecialistsResult, peers: DelegationPeers): Figure[] {
  const cold = versus(
    "specialist-cold",
    "First delegation to a specialist, cold (a scout started for it)",
    s.coldMs,
    ["first call", (peer) => peer.first],
    GOALS.coldSpecialistPerSubagentsFirst,
    `ours ${fmt(s.coldMs)} ms`,
    peers,
  );
  return [
    {
      ...cold,
      evidence: `cold ${fmt(s.coldMs)} ms against warm ${fmt(s.warmMs)} ms: the difference is starting the scout's Pi.`,
      reason:
        "A cold specialist is a new Pi process (start-up, extension load, relay registration); pi-subagents runs its child inside the origin's process. Proposed (issue 41, workers as light as a Pi): a lighter worker start; meanwhile the warm pool keeps every later delegation warm.",
    },
    versus(
      "specialist-warm",
      "Delegation to a specialist kept warm",
      s.warmMs,
      ["first call", (peer) => peer.first],
      GOALS.warmSpecialistPerSubagentsFirst,
      `ours ${fmt(s.warmMs)} ms`,
      peers,
    ),
    versus(
      "workflow-four",
      "A workflow of four steps at once (scouts warm)",
      s.workflowWarmMs,
      ["four in one call", (peer) => peer.parallel4],
      GOALS.workflowPerSubagentsParallel,
      `ours ${fmt(s.workflowWarmMs)} ms warm, ${fmt(s.workflowWithStartsMs)} ms with three scouts started; ${s.rounds} rounds`,
      peers,
    ),
  ];
}
