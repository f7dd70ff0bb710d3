/**
 * What the built extension (`dist/extension.js`) takes from Pi's own modules at run time. Pi hands
 * an extension its host packages through jiti (they are peer dependencies: not installed beside
 * pi-tasks), which the runtime's own loader cannot reach. So the loader (index.ts), run by jiti,
 * imports them and leaves them here under `PI_HOST_KEY`; the build (scripts/build.ts) makes each
 * import of a host package in the bundle read them from here.
 */

/** The global the loader leaves Pi's modules under (a registered symbol: one per process, whoever loads it). */
export const PI_HOST_KEY = "pi-tasks.pi-host";

/** The host packages the extension imports values from, in its sources. */
export const PI_HOST_PACKAGES = ["@earendil-works/pi-coding-agent", "@earendil-works/pi-tui"] as const;

export type PiHostModules = Readonly<Record<(typeof PI_HOST_PACKAGES)[number], Readonly<Record<string, unknown>>>>;

/** Leaves Pi's modules for the built extension. */
export function leavePiHost(modules: PiHostModules): void {
  (globalThis as Record<symbol, unknown>)[Symbol.for(PI_HOST_KEY)] = modules;
}
