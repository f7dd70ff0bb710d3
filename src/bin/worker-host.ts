/** The worker holder's entry (built to dist/worker-host.js; see src/host/worker-host.ts). */
import { type HostConfig, hold } from "../host/worker-host.ts";

process.exitCode = await hold(JSON.parse(process.argv[2] ?? "{}") as HostConfig);
