/**
 * The worker of the cross-process delivery run (bench/measure/delivery.ts `deliveryAcrossProcesses`):
 * a fake Pi worker (the real extension stack, bench/lib/fake-pi.ts) in a process of its own, on the
 * relay URL given as its argument. It prints JSON lines on stdout: `{ready, endpoint}` once bound,
 * then `{ack, envelopeId, at}` as each acknowledge of an envelope returns and `{inserted, taskId, at}`
 * as each task event is inserted — `at` in wall-clock milliseconds (`performance.timeOrigin +
 * performance.now()`: comparable across processes on one machine). It stops when stdin closes.
 */
import { boundEndpoint, startFakePi } from "../lib/fake-pi.ts";

const url = process.argv[2];
if (url === undefined) throw new Error("usage: bun bench/scenarios/delivery-worker.ts <relay url>");
const wall = (monotonic: number) => performance.timeOrigin + monotonic;
const say = (line: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(line)}\n`);

const worker = startFakePi({
  url,
  worker: true,
  onInsert: (insertion) => say({ inserted: true, taskId: insertion.taskId, at: wall(insertion.at) }),
});
worker.log.onAck((envelopeId, at) => say({ ack: true, envelopeId, at: wall(at) }));
say({ ready: true, endpoint: await boundEndpoint(worker) });
for await (const _ of process.stdin) {
  // Nothing is read: the process lives until stdin closes.
}
await worker.stop();
process.exit(0);
