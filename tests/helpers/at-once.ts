/**
 * Several bun processes doing the same kind of work at the same instant, for races between
 * processes (identity creation, peers.json changes). Each child runs a script of its own (given its
 * index) once a shared start time comes (after its setup), so process start-up does not spread them out; it prints
 * one JSON line on success. Children that outlive the deadline are killed and fail the run.
 */
import { spawn } from "bun";
import { BUN, REPO_ROOT } from "../../testkit/relay-process.ts";

export interface ChildOutcome {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Time the children get to start before the shared instant. */
const START_DELAY_MS = 1_500;
/** Deadline of one run of children. */
const CHILDREN_DEADLINE_MS = 20_000;

/** An absolute import specifier of a repository module, for child scripts. */
export function repoModule(path: string): string {
  return JSON.stringify(`${REPO_ROOT}/${path}`);
}

export interface ChildScript {
  /** Run before the start instant (imports, preparation), so loading modules does not spread the children out. */
  readonly setup: string;
  /** Run at the start instant by child `index` (top-level await allowed). */
  run(index: number): string;
}

/** Runs `count` children at once. */
export async function runAtOnce(count: number, script: ChildScript): Promise<ChildOutcome[]> {
  const startAt = Date.now() + START_DELAY_MS;
  const children = Array.from({ length: count }, (_, index) =>
    spawn([BUN, "-e", `${script.setup}\nawait Bun.sleep(Math.max(0, ${startAt} - Date.now()));\n${script.run(index)}`], {
      cwd: REPO_ROOT,
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    }),
  );
  const deadline = setTimeout(() => {
    for (const child of children) child.kill("SIGKILL");
  }, CHILDREN_DEADLINE_MS);
  try {
    return await Promise.all(
      children.map(async (child) => {
        const [stdout, stderr, code] = await Promise.all([
          new Response(child.stdout).text(),
          new Response(child.stderr).text(),
          child.exited,
        ]);
        return { code, stdout, stderr };
      }),
    );
  } finally {
    clearTimeout(deadline);
  }
}
