/**
 * `pi-tasks demo [--model provider/id] [--json]` — see src/demo/run.ts. Exits 0 only when the origin
 * acknowledged the completed task; otherwise non-zero with the code that failed.
 */
import { parseArgs } from "node:util";
import { formatTimeline, runDemo } from "../demo/run.ts";

export async function demoCommand(argv: readonly string[], env: Record<string, string | undefined>): Promise<number> {
  const { values } = parseArgs({ args: [...argv], options: { model: { type: "string" }, json: { type: "boolean" } }, strict: true });
  const json = values.json === true;
  const result = await runDemo({
    env,
    ...(values.model === undefined ? {} : { model: values.model }),
    progress: (line) => process.stderr.write(`demo: ${line}\n`),
  });
  process.stdout.write(json ? `${JSON.stringify(result)}\n` : `${formatTimeline(result)}\n`);
  return result.ok ? 0 : 1;
}
