/**
 * Pi's agent events, as the tasks this session works on need them: the activity tracker and its
 * reporter (activity.ts), the reminders for an unreported task (reminders.ts) and the budgets of
 * granted tasks (grant-budgets.ts). One observer per Pi run (pi-run.ts), fed by pi-events.ts; nothing
 * here throws into Pi (pi-events.ts calls it quietly).
 */
import type { TaskCore } from "../../src/core/task-core.ts";
import { createActivityReporter, createActivityTracker } from "./activity.ts";
import { createGrantBudgets, type Used } from "./grant-budgets.ts";
import type { PiMessage } from "./presenter.ts";
import { createReminders } from "./reminders.ts";

export interface AgentObserver {
  /** What the model spent on a granted task so far (grant-budgets.ts). */
  spentOn(taskId: string): Used | undefined;
  runStarted(): void;
  toolStarted(toolName: string, args: unknown): void;
  toolEnded(): void;
  messageEnded(message: unknown): void;
  turnEnded(): void;
  settled(): void;
  start(): void;
  stop(): void;
}

export interface AgentObserverDeps {
  readonly core: () => TaskCore | undefined;
  readonly now: () => number;
  sendMessage(message: PiMessage, options: { triggerTurn?: boolean; deliverAs?: "steer" | "followUp" | "nextTurn" }): void;
}

/** The task a question call is about, when the call is one (the model may wait for its answer). */
function questionOf(toolName: string, args: unknown): string | undefined {
  if (toolName !== "agent_task_message" || typeof args !== "object" || args === null) return undefined;
  const { type, taskId } = args as { type?: unknown; taskId?: unknown };
  return type === "question" && typeof taskId === "string" ? taskId : undefined;
}

export function createAgentObserver(deps: AgentObserverDeps): AgentObserver {
  const tracker = createActivityTracker(deps.now);
  const reporter = createActivityReporter({ tracker, core: deps.core, now: deps.now });
  const reminders = createReminders({ core: deps.core, sendMessage: deps.sendMessage, lastText: () => tracker.lastText() });
  const budgets = createGrantBudgets({ core: deps.core, now: deps.now });
  return {
    spentOn: (taskId) => budgets.spent(taskId),
    runStarted() {
      tracker.runStarted();
      reminders.runStarted();
      reporter.changed();
    },
    toolStarted(toolName, args) {
      tracker.toolStarted(toolName, args);
      const asked = questionOf(toolName, args);
      if (asked !== undefined) reminders.asked(asked);
      reporter.changed();
    },
    toolEnded() {
      tracker.toolEnded();
      reporter.changed();
    },
    messageEnded(message) {
      tracker.messageEnded(message);
      budgets.messageEnded(message);
    },
    turnEnded() {
      tracker.turnEnded();
      budgets.turnEnded();
    },
    settled() {
      tracker.settled(reminders.waiting());
      reporter.changed();
      reminders.settled();
    },
    start() {
      reporter.start();
      budgets.start();
    },
    stop() {
      reporter.stop();
      budgets.stop();
    },
  };
}
