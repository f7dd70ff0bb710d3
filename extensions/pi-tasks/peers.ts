/**
 * Session names of peer endpoints, for people: learned from `agent_task_spawn`/`agent_task_workers`,
 * the workers pi-tasks spawned, and the relay's session list (asked when `/tasks` runs). Names are
 * display only: an endpoint is never derived from a name.
 */
import { sessionList } from "../../src/host/sessions.ts";
import { listSpawned } from "../../src/host/spawned.ts";
import { endpointKey } from "../../src/protocol/endpoint.ts";
import type { TaskEndpoint } from "../../src/protocol/schemas.ts";
import type { PeerNames } from "./board.ts";
import type { SessionInfo } from "./lifecycle.ts";

export interface PeerDirectory {
  remember(session: string, endpoint: TaskEndpoint): void;
  /** Learns names from spawn records and the relay's session list (failures leave what is known). */
  refresh(info: SessionInfo): Promise<void>;
  names(): PeerNames;
}

export function createPeerDirectory(): PeerDirectory {
  const names = new Map<string, string>();
  const remember = (session: string, endpoint: TaskEndpoint) => names.set(endpointKey(endpoint), session);
  return {
    remember,
    async refresh(info) {
      for (const worker of listSpawned(info.env)) if (worker.taskEndpoint !== undefined) remember(worker.session, worker.taskEndpoint);
      try {
        const listing = await sessionList(info.env, info.relay.url);
        for (const item of listing.sessions) if (item.taskEndpoint !== undefined) remember(item.session, item.taskEndpoint);
      } catch {
        // The relay is unreachable: the board shows what is known (and the footer says why).
      }
    },
    names: () => names,
  };
}
