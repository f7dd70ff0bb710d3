/**
 * Lineage: where a task sits in a delegation chain. A session that works on a task (a coordinator:
 * no worker gate) may delegate onward; the sub-task inherits its parent's lineage — the same root
 * task and owner (the root origin, whose human answers for the chain), one more session in the
 * chain. The parent is the one active task the session works on; a session that works on none
 * starts a root task; a session that works on several cannot delegate (`DELEGATION_AMBIGUOUS`)
 * until it finished or handed back all but one — the model cannot pick a parent, so it cannot pick
 * its way around the chain. (A library caller may name the parent or ask for a root: `LineageChoice`.)
 * Before any relay request a send is refused when its target is already in the chain
 * (`DELEGATION_CYCLE`, e.g. A→B→A) or the chain would pass the depth cap (`maxDelegationDepth`
 * sessions, or less where configured: `DELEGATION_DEPTH_EXCEEDED`). The receiver checks the same
 * rules on every assignment. Lineage is part of the task record, so it is signed with the assignment.
 */
import { sameEndpoint } from "../protocol/endpoint.ts";
import { TaskError } from "../protocol/errors.ts";
import type { Lineage, TaskEndpoint, TaskRecord } from "../protocol/schemas.ts";
import type { StoredTask } from "../store/task-store.ts";
import type { CoreContext } from "./context.ts";
import type { LineageChoice } from "./results.ts";

/** Sessions in a root task's chain: its owner and its target. */
export const ROOT_DEPTH = 2;

/** The task a send is delegated from: the named one, else the one active task this session works on. */
function parentOf(context: CoreContext, choice: LineageChoice | undefined): StoredTask | undefined {
  const { store } = context;
  if (choice === "root") return undefined;
  if (choice !== undefined) {
    const stored = store.getStoredTask(choice.parentTaskId);
    if (stored === undefined || stored.role !== "worker" || stored.record.status !== "active") {
      throw new TaskError("INVALID_REQUEST", {
        message: "the parent task must be an active task this session works on",
        details: { parentTaskId: choice.parentTaskId },
      });
    }
    return stored;
  }
  const working = store.activeTaskIds("worker").map((taskId) => store.getStoredTask(taskId)!);
  if (working.length > 1)
    throw new TaskError("DELEGATION_AMBIGUOUS", { details: { working: working.map((stored) => stored.record.taskId) } });
  return working[0];
}

/** A parent's lineage; a parent from a peer that sent none counts as a root task. */
function lineageOf(context: CoreContext, parent: StoredTask): Lineage {
  const record = parent.record;
  if (record.lineage !== undefined) return record.lineage;
  const ownerKey = context.store.getTaskMeta(record.taskId)?.originKey ?? "";
  return {
    rootTaskId: record.taskId,
    depth: ROOT_DEPTH,
    owner: { endpoint: record.origin, key: ownerKey },
    chain: [record.origin, record.target],
  };
}

/**
 * The lineage of a task `self` is about to send to `target`; throws `DELEGATION_CYCLE` or
 * `DELEGATION_DEPTH_EXCEEDED` (nothing is created or sent).
 */
export function lineageFor(
  context: CoreContext,
  self: TaskEndpoint,
  target: TaskEndpoint,
  taskId: string,
  choice: LineageChoice | undefined,
): Lineage {
  const parent = parentOf(context, choice);
  if (parent === undefined) {
    return {
      rootTaskId: taskId,
      depth: ROOT_DEPTH,
      owner: { endpoint: self, key: context.trust.options.identity.publicKey },
      chain: [self, target],
    };
  }
  const inherited = lineageOf(context, parent);
  if (inherited.chain.some((endpoint) => sameEndpoint(endpoint, target))) {
    throw new TaskError("DELEGATION_CYCLE", { details: { target, chain: inherited.chain, rootTaskId: inherited.rootTaskId } });
  }
  const depth = inherited.depth + 1;
  if (depth > context.settings.maxDepth) {
    throw new TaskError("DELEGATION_DEPTH_EXCEEDED", {
      details: { depth, maxDepth: context.settings.maxDepth, rootTaskId: inherited.rootTaskId },
    });
  }
  return {
    rootTaskId: inherited.rootTaskId,
    parentTaskId: parent.record.taskId,
    depth,
    owner: inherited.owner,
    chain: [...inherited.chain, target],
  };
}

/** The receiver's check of an assignment's lineage against its depth cap (typed refusals; the schema bounds its size). */
export function checkLineage(task: TaskRecord, maxDepth: number): void {
  const lineage = task.lineage;
  if (lineage === undefined) return;
  const { chain, depth } = lineage;
  const invalid = (problem: string) =>
    new TaskError("INVALID_ASSIGNMENT", { message: `INVALID_ASSIGNMENT: ${problem}`, details: { taskId: task.taskId, problem } });
  if (depth !== chain.length) throw invalid("the lineage's depth is not the length of its chain");
  if (depth > maxDepth) throw new TaskError("DELEGATION_DEPTH_EXCEEDED", { details: { depth, maxDepth } });
  if (!sameEndpoint(chain.at(-1)!, task.target) || !sameEndpoint(chain.at(-2)!, task.origin))
    throw invalid("the lineage's chain does not end with the task's origin and target");
  if (!sameEndpoint(chain[0]!, lineage.owner.endpoint)) throw invalid("the lineage's chain does not start at its owner");
  if (chain.some((endpoint, index) => chain.findIndex((other) => sameEndpoint(other, endpoint)) !== index))
    throw new TaskError("DELEGATION_CYCLE", { details: { chain } });
  if ((lineage.parentTaskId === undefined) !== (depth === ROOT_DEPTH))
    throw invalid("only a delegated task (depth over 2) names a parent task");
  if (depth === ROOT_DEPTH && lineage.rootTaskId !== task.taskId) throw invalid("a root task is its own root");
}
