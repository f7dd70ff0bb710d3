/**
 * What a fault scenario is (`FaultSpec`: a name, how the fault is injected, and a run that yields
 * its row) and the simplest kind of one (`ruleFault`: fault-proxy rules applied during the standard
 * workload, cleared to heal). Also the request matchers the scenarios' proxy rules use.
 */
import type { RelayProcess } from "../../../src/demo/relay-process.ts";
import type { TaskEndpoint } from "../../../src/protocol/schemas.ts";
import type { FaultRule, ProxyRequest } from "../../../testkit/fault-proxy.ts";
import { account, type FaultRow } from "./accounting.ts";
import { createLedger } from "./ledger.ts";
import { closeRig, makeRig, type Rig } from "./rig.ts";
import { workload } from "./workload.ts";

type Body = {
  envelope?: { envelopeId?: string; target?: TaskEndpoint; payload?: { kind?: string } };
  envelopeId?: string;
  endpoint?: TaskEndpoint;
};
const bodyOf = (request: ProxyRequest): Body => (request.body ?? {}) as Body;
export const fromEndpoint = (endpoint: TaskEndpoint) => (request: ProxyRequest) => bodyOf(request).endpoint?.id === endpoint.id;

export interface FaultContext {
  readonly relay: RelayProcess;
  readonly tasks: number;
  readonly quick: boolean;
}

export interface FaultSpec {
  readonly name: string;
  readonly injection: string;
  run(context: FaultContext): Promise<FaultRow>;
}

/** A fault made of proxy rules applied during the standard workload. */
export function ruleFault(name: string, injection: string, rules: (rig: Rig) => FaultRule[], note = ""): FaultSpec {
  return {
    name,
    injection,
    async run({ relay, tasks }) {
      const rig = await makeRig(relay);
      try {
        const handles = rules(rig).map((rule) => rig.proxy.push(rule));
        const ledger = createLedger();
        const drained = await workload(rig, ledger, tasks, () => rig.proxy.clear());
        const faulted = handles.reduce((sum, handle) => sum + handle.hits(), 0);
        return account(name, injection, rig, ledger, rig.proxy.stats().total.seen, faulted, [{ name: "drained", ok: drained }], note);
      } finally {
        await closeRig(rig);
      }
    },
  };
}
