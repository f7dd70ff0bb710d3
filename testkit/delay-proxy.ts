/**
 * A TCP proxy that makes a link slow and lossy, as a program (this kernel has no `netem`): it
 * listens on 127.0.0.1 of the host it runs on (testkit/netns.ts) and forwards to `--target`, holding
 * every chunk `--delay-ms` in each direction, and a `--loss` share of chunks `--retransmit-ms` more —
 * what a lost segment costs a TCP connection, which retransmits it (bytes are never dropped: TCP
 * would not drop them either). Order is kept per direction. Prints `{"event":"listening","port":P}`.
 *
 * Run: `bun testkit/delay-proxy.ts --target HOST:PORT --delay-ms 200 --loss 0.05 --retransmit-ms 1000`.
 */
import type { Socket } from "bun";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: { target: { type: "string" }, "delay-ms": { type: "string" }, loss: { type: "string" }, "retransmit-ms": { type: "string" } },
});
const [targetHost, targetPort] = values.target!.split(":") as [string, string];
const delayMs = Number(values["delay-ms"] ?? "0");
const loss = Number(values.loss ?? "0");
const retransmitMs = Number(values["retransmit-ms"] ?? "1000");

/**
 * One direction of a connection: chunks leave in order (one queue, one timer), each no sooner than
 * its own delay — a chunk held for a retransmission holds the ones behind it, as TCP's does.
 */
function lane(): (chunk: Uint8Array, deliver: (chunk: Uint8Array) => void) => void {
  const queue: { at: number; chunk: Uint8Array; deliver: (chunk: Uint8Array) => void }[] = [];
  let timer: ReturnType<typeof setTimeout> | undefined;
  let last = 0;
  function pump(): void {
    timer = undefined;
    while (queue.length > 0 && queue[0]!.at <= Date.now()) {
      const next = queue.shift()!;
      next.deliver(next.chunk);
    }
    if (queue.length > 0) timer = setTimeout(pump, queue[0]!.at - Date.now());
  }
  return (chunk, deliver) => {
    const at = Math.max(Date.now() + delayMs + (Math.random() < loss ? retransmitMs : 0), last);
    last = at;
    queue.push({ at, chunk: new Uint8Array(chunk), deliver });
    timer ??= setTimeout(pump, at - Date.now());
  };
}

/** A socket's writes in order: what it did not take at once waits for its `drain`. */
interface Outbound {
  socket?: Socket<Pair>;
  readonly queue: Uint8Array[];
}

function write(out: Outbound, chunk: Uint8Array): void {
  if (out.socket === undefined || out.queue.length > 0) {
    out.queue.push(chunk);
    return;
  }
  const written = out.socket.write(chunk);
  if (written < chunk.length) out.queue.push(chunk.subarray(Math.max(written, 0)));
}

function flush(out: Outbound): void {
  while (out.socket !== undefined && out.queue.length > 0) {
    const chunk = out.queue[0]!;
    const written = out.socket.write(chunk);
    if (written < chunk.length) {
      out.queue[0] = chunk.subarray(Math.max(written, 0));
      return;
    }
    out.queue.shift();
  }
}

interface Pair {
  readonly toTarget: Outbound;
  readonly toClient: Outbound;
  readonly up: ReturnType<typeof lane>;
  readonly down: ReturnType<typeof lane>;
}

const server = Bun.listen<Pair>({
  hostname: "127.0.0.1",
  port: 0,
  socket: {
    open(client) {
      const pair: Pair = { toTarget: { queue: [] }, toClient: { socket: client, queue: [] }, up: lane(), down: lane() };
      client.data = pair;
      void Bun.connect<Pair>({
        hostname: targetHost,
        port: Number(targetPort),
        data: pair,
        socket: {
          open(upstream) {
            pair.toTarget.socket = upstream;
            flush(pair.toTarget);
          },
          data(_upstream, chunk) {
            pair.down(chunk, (held) => write(pair.toClient, held));
          },
          drain() {
            flush(pair.toTarget);
          },
          close() {
            setTimeout(() => pair.toClient.socket?.end(), delayMs);
          },
          error() {
            pair.toClient.socket?.end();
          },
        },
      }).catch(() => client.end());
    },
    data(client, chunk) {
      const pair = client.data;
      pair.up(chunk, (held) => write(pair.toTarget, held));
    },
    drain(client) {
      flush(client.data.toClient);
    },
    close(client) {
      setTimeout(() => client.data.toTarget.socket?.end(), delayMs);
    },
  },
});
process.stdout.write(`${JSON.stringify({ event: "listening", port: server.port })}\n`);
