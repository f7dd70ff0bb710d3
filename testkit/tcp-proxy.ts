/**
 * A loopback TCP proxy for tests: bytes pass both ways between a client and `targetPort` until
 * `cut()`, which closes every connection and stops listening (the target "goes away" while it keeps
 * its data); `restore()` listens again on the same port; `retarget(port)` does both, towards another
 * target. (testkit/fault-proxy.ts is the HTTP one.)
 */
import type { Socket, TCPSocketListener } from "bun";
import { freePort } from "./relay-process.ts";

export interface TcpProxy {
  readonly port: number;
  cut(): void;
  restore(): void;
  /** Cuts every connection and points the proxy at another port from now on (a failover's new primary). */
  retarget(targetPort: number): void;
  stop(): void;
}

interface Pair {
  /** The connection to the target, once open. */
  upstream?: Socket<Pair>;
  /** Bytes the client sent before the upstream connection opened. */
  pending: Uint8Array[];
  client?: Socket<Pair>;
}

/** Opens the pair's connection to the target: bytes from it go to the client, its end or failure ends the client. */
function connectUpstream(pair: Pair, targetPort: number, pairs: Set<Pair>): void {
  void Bun.connect<Pair>({
    hostname: "127.0.0.1",
    port: targetPort,
    data: pair,
    socket: {
      open(upstream) {
        pair.upstream = upstream;
        for (const chunk of pair.pending.splice(0)) upstream.write(chunk);
      },
      data(_upstream, chunk) {
        pair.client?.write(chunk);
      },
      close() {
        pair.client?.end();
        pairs.delete(pair);
      },
      error() {
        pair.client?.end();
      },
      connectError() {
        pair.client?.end();
      },
    },
  }).catch(() => pair.client?.end());
}

export function createTcpProxy(initialTarget: number): TcpProxy {
  const port = freePort();
  let targetPort = initialTarget;
  const pairs = new Set<Pair>();
  let listener: TCPSocketListener<Pair> | undefined;

  function listen(): void {
    listener = Bun.listen<Pair>({
      hostname: "127.0.0.1",
      port,
      socket: {
        open(client) {
          const pair: Pair = { pending: [], client };
          client.data = pair;
          pairs.add(pair);
          connectUpstream(pair, targetPort, pairs);
        },
        data(client, chunk) {
          const pair = client.data;
          if (pair.upstream === undefined) pair.pending.push(new Uint8Array(chunk));
          else pair.upstream.write(chunk);
        },
        close(client) {
          client.data.upstream?.end();
          pairs.delete(client.data);
        },
      },
    });
  }

  function cut(): void {
    listener?.stop(true);
    listener = undefined;
    for (const pair of pairs) {
      pair.client?.end();
      pair.upstream?.end();
    }
    pairs.clear();
  }

  listen();
  return {
    port,
    cut,
    restore() {
      if (listener === undefined) listen();
    },
    retarget(next) {
      cut();
      targetPort = next;
      listen();
    },
    stop: cut,
  };
}
