/**
 * The real relay through its CLI (the demo's starter, re-exported) and a free loopback port, for
 * tests and bench alike.
 */
export * from "../src/demo/relay-process.ts";

/** A loopback port with nothing listening on it (it was free a moment ago). */
export function freePort(): number {
  const probe = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("") });
  const port = probe.port!;
  probe.stop(true);
  return port;
}
