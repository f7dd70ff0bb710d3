/**
 * How pi-tasks shows what others wrote, to the model and to people (docs/security.md, "Showing
 * what peers wrote"). A peer chooses every character of its claimed name (unsigned, next to its
 * signature) and of its text; none of it may pass for a line pi-tasks wrote — the peer-mail frame,
 * a fingerprint, an operator's instruction — or hide itself from a person.
 *
 * - A claimed name (`claimedName`): ASCII letters, digits, `.`, `_` and `-` as they are, every other
 *   character as its `\uXXXX` escape (quotes, line breaks, controls, markup, look-alike letters),
 *   cut at `maxShownClaimChars`, inside backticks (a code span, so no markup renders; a backtick is
 *   itself escaped) and always followed by "(unverified claim)".
 * - A line of peer text (`inlineText`): one JSON string literal — quotes, backslashes and line
 *   breaks escaped by JSON, then every control, format, line-separator, private-use and surrogate
 *   character as `\uXXXX` — cut at the caller's length.
 * - A block of peer text (`quotedBlock`, `quotedJson`): a label line naming the sender, then a
 *   fence of backticks longer than any run inside it, then every line of the text prefixed with
 *   `PEER_LINE` and a space, then the closing fence. So no line of it starts as a line of pi-tasks
 *   does, none can close the fence (each starts with `│`), Markdown renders none of it, and what
 *   would break a line (CR, VT, FF, NEL, U+2028, U+2029) starts a new prefixed line instead.
 * - A field value pi-tasks did not write (ids, codes, reasons): `oneLine`, the escapes without quotes.
 */
import { maxShownClaimChars, minQuoteFenceChars } from "../../src/protocol/limits.ts";

/** What every quoted line of peer text starts with (followed by a space). */
export const PEER_LINE = "│";
/** The mark that follows every claimed name. */
export const CLAIM_MARK = "(unverified claim)";
/** Marks a session name whose mail is signed by the user's own identity. */
export const OWN_MARK = "(your own session)";

/** Characters a claimed name shows as they are. */
const CLAIM_PLAIN = /^[A-Za-z0-9._-]$/;
/** Characters that control, hide, reorder or break text: escaped wherever peer text is shown. */
const UNSAFE = /[\p{Cc}\p{Cf}\p{Co}\p{Cs}\p{Zl}\p{Zp}]/gu;
/** Everything a terminal, a Markdown renderer or a model may read as the end of a line. */
const LINE_BREAK = /\r\n|[\n\r\v\f\u0085\u2028\u2029]/;
const ELLIPSIS = "…";
const HEX = 16;
const UNIT_DIGITS = 4;

/** `\uXXXX` for each UTF-16 unit of `char` (a valid JSON escape, so escaped JSON still parses). */
function escaped(char: string): string {
  let out = "";
  for (let index = 0; index < char.length; index += 1) out += `\\u${char.charCodeAt(index).toString(HEX).padStart(UNIT_DIGITS, "0")}`;
  return out;
}

/** `text` with every unsafe character escaped; `keep` characters (e.g. a tab) stay as they are. */
function escapeUnsafe(text: string, keep = ""): string {
  return text.replace(UNSAFE, (char) => (keep.includes(char) ? char : escaped(char)));
}

/** At most `max` characters (code points) of `text`, cut with `…`. */
function cut(text: string, max: number): string {
  const chars = Array.from(text);
  return chars.length > max ? `${chars.slice(0, Math.max(0, max - 1)).join("")}${ELLIPSIS}` : text;
}

/** A session name as it is shown anywhere: escaped, bounded, in backticks. */
function shownName(name: string): string {
  let shown = "";
  for (const char of name) {
    const piece = CLAIM_PLAIN.test(char) ? char : escaped(char);
    if (shown.length + piece.length > maxShownClaimChars) {
      shown += ELLIPSIS;
      break;
    }
    shown += piece;
  }
  return `\`${shown}\``;
}

/** A claimed (unverified) name as it is shown anywhere: escaped, bounded, in backticks, marked. */
export function claimedName(name: string): string {
  return `${shownName(name)} ${CLAIM_MARK}`;
}

/** A session name of the user's own (its mail signed by their identity): shown the same way, marked as theirs. */
export function ownSessionName(name: string): string {
  return `${shownName(name)} ${OWN_MARK}`;
}

/** Peer text on one line, as a JSON string literal with every unsafe character escaped. */
export function inlineText(text: unknown, maxChars: number): string {
  return escapeUnsafe(JSON.stringify(cut(String(text), maxChars)));
}

/** A value pi-tasks did not write, on one line: unsafe characters escaped, nothing else changed. */
export function oneLine(text: string): string {
  return escapeUnsafe(text);
}

/** The lines of a quoted block: each prefixed, inside a fence longer than any backtick run. */
function fenced(label: string, lines: readonly string[]): string[] {
  const longest = Math.max(0, ...lines.map((line) => Math.max(0, ...[...line.matchAll(/`+/g)].map((run) => run[0].length))));
  const fence = "`".repeat(Math.max(minQuoteFenceChars, longest + 1));
  return [`${label} (quoted; every line of it starts with "${PEER_LINE}"):`, fence, ...lines.map((line) => `${PEER_LINE} ${line}`), fence];
}

/** Peer text as a quoted block (see the header): line breaks start new quoted lines; tabs stay. */
export function quotedBlock(label: string, text: unknown): string[] {
  return fenced(
    label,
    String(text)
      .split(LINE_BREAK)
      .map((line) => escapeUnsafe(line, "\t")),
  );
}

/** A peer's JSON value (a result, an error, artifacts) as a quoted block, indented; it still parses. */
export function quotedJson(label: string, value: unknown): string[] {
  // Inside its strings JSON escapes "\n" and every other ASCII control; its own line breaks stay
  // (they split the lines), and the rest (U+2028, format characters, …) is escaped before that.
  return fenced(label, escapeUnsafe(JSON.stringify(value, null, 2) ?? "null", "\n").split("\n"));
}
