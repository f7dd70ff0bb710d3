/**
 * Which workspace a spawned worker gets (issue 37: a workspace per worker by default): its own git
 * worktree when the project is in a git repository with a commit (worktree.ts), else a scratch copy
 * (scratch.ts) — unless the person asks otherwise (`worktree: false`: the project itself). Asking
 * for `worktree: true` means a git worktree or nothing (`WORKTREE_UNAVAILABLE`).
 */
import { createScratch, type ScratchCopy } from "./scratch.ts";
import { createWorktree, git, type Worktree } from "./worktree.ts";

export interface Workspace {
  /** The worker's project directory. */
  readonly workDir: string;
  readonly worktree?: Worktree;
  readonly scratch?: ScratchCopy;
}

/** The workspace for a worker `name` of `projectDir`: `asked` is the spawn's (or its profile's) `worktree`, undefined by default. */
export function createWorkspace(projectDir: string, name: string, home: string, asked: boolean | undefined): Workspace {
  if (asked === false) return { workDir: projectDir };
  const inGit = git(projectDir, ["rev-parse", "--verify", "HEAD"]).ok;
  if (asked === true || inGit) {
    const { worktree, workDir } = createWorktree(projectDir, name, home);
    return { workDir, worktree };
  }
  const scratch = createScratch(projectDir, name, home);
  return { workDir: scratch.path, scratch };
}
