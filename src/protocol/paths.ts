/**
 * Path containment, by the text of the paths: whether a path stays inside a directory. No I/O —
 * a caller that must see symbolic links (src/workspace/result-content.ts) resolves them first and
 * asks again with the resolved path.
 */
import { isAbsolute, normalize, sep } from "node:path";

/** The path leaves where it starts: it climbs out (`..`, `../…`) or is absolute. */
export function leavesStart(path: string): boolean {
  const normal = normalize(path);
  return isAbsolute(normal) || normal === ".." || normal.startsWith(`..${sep}`);
}

/**
 * `path` is `dir` itself or inside it, both normalized and compared up to a separator (so
 * `proj-sibling/x` is not inside `proj`). A relative `dir` of `.` holds every relative path that
 * does not leave it.
 */
export function isWithin(path: string, dir: string): boolean {
  const p = normalize(path);
  const d = normalize(dir);
  if (p === d) return true;
  if (d === "." || d === `.${sep}`) return !leavesStart(p);
  return p.startsWith(d.endsWith(sep) ? d : `${d}${sep}`);
}
