/**
 * `pi-tasks relay [--host 127.0.0.1] [--port 18790] [--allow ADDR[,ADDR…]]`
 *
 * Starts the memory-only relay. When ready it prints exactly one JSON line
 * `{"event":"listening","url":…,"epoch":…,"profile":"volatile-v1"}` on stdout; SIGTERM and SIGINT
 * stop it and exit 0 within 2 s.
 */
import { parseArgs } from "node:util";
import { TaskError } from "../protocol/errors.ts";
import { DEFAULT_RELAY_PORT, MAX_TCP_PORT, RELAY_PROFILE, relayDefaultHost, relayShutdownGraceMs } from "../protocol/limits.ts";
import { startRelayServer } from "../relay-server/server.ts";

export interface RelayCommandIo {
  readonly stdout: (line: string) => void;
  readonly env: Record<string, string | undefined>;
}

function parsePort(value: string | undefined): number {
  if (value === undefined) return DEFAULT_RELAY_PORT;
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > MAX_TCP_PORT || !/^\d+$/.test(value)) {
    throw new TaskError("CLI_USAGE", { message: `--port must be an integer from 0 to ${MAX_TCP_PORT}`, details: { port: value } });
  }
  return port;
}

/** Runs the relay until a signal; resolves with the exit code. */
export async function relayCommand(argv: readonly string[], io: RelayCommandIo): Promise<number> {
  const { values } = parseArgs({
    args: [...argv],
    options: { host: { type: "string" }, port: { type: "string" }, allow: { type: "string", multiple: true }, json: { type: "boolean" } },
    strict: true,
  });
  const allow = (values.allow ?? []).flatMap((entry) => entry.split(",")).map((entry) => entry.trim()).filter(Boolean);
  const server = await startRelayServer({ host: values.host ?? relayDefaultHost, port: parsePort(values.port), allow, env: io.env });
  io.stdout(`${JSON.stringify({ event: "listening", url: server.url, epoch: server.epoch, profile: RELAY_PROFILE })}\n`);
  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = () => {
      if (stopping) return;
      stopping = true;
      const force = setTimeout(() => resolve(0), relayShutdownGraceMs / 2);
      force.unref();
      server.stop().then(
        () => resolve(0),
        () => resolve(0),
      );
    };
    process.once("SIGTERM", stop);
    process.once("SIGINT", stop);
  });
}
