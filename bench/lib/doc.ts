/**
 * Generated docs with a hand-kept tail: a generator writes the doc's head and keeps everything from a
 * heading on (written by another run, e.g. `npm run scale`'s section of docs/performance.md, or the
 * multi-host figures of docs/reliability.md).
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";

/** The doc's text from `heading` (a line `## …`) on, with the newline before it; nothing when absent. */
export function keptSections(path: string, heading: string): string {
  const current = existsSync(path) ? readFileSync(path, "utf8") : "";
  const at = current.indexOf(`\n${heading}\n`);
  return at < 0 ? "" : current.slice(at);
}

/** Replaces the doc's tail from `heading` on with `markdown` (which starts with that heading), keeping the head. */
export function replaceTail(path: string, heading: string, markdown: string): void {
  const current = existsSync(path) ? readFileSync(path, "utf8") : "";
  const at = current.indexOf(`\n${heading}\n`);
  const head = at < 0 ? current.replace(/\n*$/, "\n") : current.slice(0, at + 1);
  writeFileSync(path, `${head}${markdown}`);
}
