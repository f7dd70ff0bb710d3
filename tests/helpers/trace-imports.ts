/**
 * Run in a fresh process by tests/extension/traces.test.ts: loads the whole extension, makes a task
 * tracer from this process's environment and prints which @opentelemetry packages were imported (Bun's
 * module cache lists ES modules too) — none unless the environment asks for traces.
 */
import "../../extensions/pi-tasks/extension.ts";
import { createTaskTracer } from "../../extensions/pi-tasks/traces.ts";
import type { TaskCore } from "../../src/core/task-core.ts";

/** Just enough of a core for a live tracer: no tasks. */
const core = { closed: () => false, onChange: () => () => undefined, listTasks: () => [] } as unknown as TaskCore;
const tracer = createTaskTracer(process.env, core, { session: "probe" });
await tracer.ready();
await tracer.stop();
const loaded = new Set<string>();
for (const path of Object.keys(require.cache)) {
  const name = path.match(/node_modules\/(@opentelemetry\/[^/]+)\//)?.[1];
  if (name !== undefined) loaded.add(name);
}
process.stdout.write(`${JSON.stringify({ enabled: tracer.enabled, loaded: [...loaded].sort() })}\n`);
