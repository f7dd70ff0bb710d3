/**
 * The status line (from the error registry) and the `/tasks` board.
 */
import type { PassReport } from "../../src/core/pass.ts";
import type { TaskView } from "../../src/core/task-core.ts";
import { formatEndpoint } from "../../src/protocol/endpoint.ts";
import { statusLabel } from "../../src/protocol/errors.ts";
import type { DeliveryReceiptPayload } from "../../src/protocol/schemas.ts";

export const STATUS_KEY = "pi-tasks";

/** The label after a pass: the first reported failure's label, or undefined when healthy. */
export function passLabel(report: PassReport): string | undefined {
  const first = report.failures.values().next();
  return first.done ? undefined : statusLabel(first.value);
}

export function errorLabel(error: unknown): string {
  return statusLabel(error);
}

function receiptSummary(task: TaskView): string {
  const stages = task.events
    .filter((event) => event.type === "task.delivery_receipt")
    .map((event) => (event.payload as unknown as DeliveryReceiptPayload).stage);
  return stages.length === 0 ? "-" : [...new Set(stages)].join(",");
}

/** One line per task: role, status, last event, receipts, terminal delivery. */
export function boardLines(tasks: readonly TaskView[], endpoint: string | undefined): string[] {
  const header = `pi-tasks ${endpoint ?? "(not bound)"}: ${tasks.length} task${tasks.length === 1 ? "" : "s"}`;
  return [
    header,
    ...tasks.map((task) => {
      const last = task.events.at(-1);
      const peer = task.role === "origin" ? `to ${formatEndpoint(task.target)}` : `from ${formatEndpoint(task.origin)}`;
      return `${task.taskId.slice(0, 8)} ${task.role} ${task.status} ${peer} last=${last?.type ?? "-"} receipts=${receiptSummary(task)} terminal=${task.terminalDelivery.state}`;
    }),
  ];
}
