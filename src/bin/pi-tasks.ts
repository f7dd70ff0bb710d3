#!/usr/bin/env node
/** The `pi-tasks` command (built to dist/pi-tasks.js, the package's `bin`; see src/cli/main.ts). */
import { main } from "../cli/main.ts";

process.exitCode = await main(process.argv.slice(2));
