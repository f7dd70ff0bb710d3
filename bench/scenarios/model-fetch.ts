/**
 * A Pi extension for the idle bench (bench/measure/idle.ts), loaded by both kinds of Pi: at session
 * start it makes the one HTTP request a Pi makes when it first talks to its model (the scripted
 * model is offline and makes none), here to the relay's profile. Node's `fetch` is initialized by
 * its first use (12 MiB in a bare Node process here; about 2 MiB more in a Pi, which has loaded
 * its HTTP client for its proxy support), which every Pi of a real user has paid before pi-tasks'
 * first request — so the figures compare what pi-tasks adds to a Pi as users run it.
 */
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";

export default function modelFetch(pi: ExtensionAPI): void {
  pi.on("session_start", async () => {
    const url = process.env.PI_TASKS_RELAY_URL;
    if (url === undefined) return;
    try {
      await (await fetch(`${url}/api/task-relay/profile`)).text();
    } catch {
      // The bench's relay is up; a failure only leaves this Pi without its first request.
    }
  });
}
