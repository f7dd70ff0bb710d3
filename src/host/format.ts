/**
 * How the CLI prints for people (without `--json`): tables with a header row and aligned columns,
 * and `label: value` blocks.
 */

/** Rows under a header, columns padded to their widest cell (the last column is not padded). */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const all = [header, ...rows];
  const widths = header.map((_, column) => Math.max(...all.map((row) => (row[column] ?? "").length)));
  return all
    .map((row) =>
      row
        .map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column]!)))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

/** `label: value` lines, labels aligned; undefined values are left out. */
export function fields(entries: readonly (readonly [string, string | undefined])[]): string {
  const present = entries.filter((entry): entry is readonly [string, string] => entry[1] !== undefined);
  const width = Math.max(0, ...present.map(([label]) => label.length + 1));
  return present.map(([label, value]) => `${`${label}:`.padEnd(width)} ${value}`).join("\n");
}
