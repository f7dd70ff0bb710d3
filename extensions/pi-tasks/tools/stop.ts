/**
 * `agent_task_stop`: stop a worker pi-tasks spawned and confirm its processes are gone. Sessions
 * pi-tasks did not spawn are refused (`SESSION_NOT_OWNED`). Coordinators only.
 */
import { killSession } from "../../../src/host/sessions.ts";
import { forgetSpecialist } from "../pool.ts";
import { TaskError } from "../../../src/protocol/errors.ts";
import { StopParams, TOOL_PARAMETERS } from "../../../src/protocol/schemas.ts";
import { assertValid } from "../../../src/protocol/validate.ts";
import { workspaceLines } from "../../../src/host/sessions.ts";
import { lines, ok, type TaskToolDefinition, type ToolDeps } from "./shared.ts";

export function stopTool(deps: ToolDeps): TaskToolDefinition<typeof TOOL_PARAMETERS.agent_task_stop> {
  return {
    name: "agent_task_stop",
    label: "Stop worker",
    description:
      "Stop a worker session that agent_task_spawn started, and confirm it is gone. Never stops sessions pi-tasks did not spawn.",
    promptSnippet: "agent_task_stop: stop a worker you spawned",
    promptGuidelines: ["Use agent_task_stop only for workers you started with agent_task_spawn, after their tasks are acknowledged."],
    parameters: TOOL_PARAMETERS.agent_task_stop,
    async execute(_id, params) {
      const input = assertValid(StopParams, params, { subject: "agent_task_stop" });
      await deps.ready();
      const info = deps.info();
      if (info === undefined) throw new TaskError("TASKS_NOT_RUNNING");
      const stopped = await killSession(input.name, info.env);
      forgetSpecialist(stopped.session);
      return ok(
        lines(
          "## worker stopped",
          `- session: ${input.name}`,
          `- pids: ${stopped.pids.join(", ")}`,
          "- confirmed gone: yes",
          ...workspaceLines(stopped).map((line) => `- ${line}`),
        ),
        { ...stopped },
      );
    },
  };
}
