/**
 * The Pi extension factory. It only registers; it starts nothing (Pi may load it without a
 * session). The agent_task_* tools arrive with the extension issue.
 */
export default function piTasks(_pi: unknown): void {}
