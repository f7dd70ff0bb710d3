/**
 * What answers at a URL that is not a volatile-v1 relay, in words a person can act on (issue 38):
 * most often the released Wolfpack (1.6.x), which serves only its older durable v2 task relay on the
 * port pi-tasks uses by default. It is recognised by two reads that change nothing there:
 * `GET /api/info` (Wolfpack names its version: `{name, version, machineId}`) and
 * `GET /api/task-relay/v2/receive` without a query (its v2 relay refuses it as `INVALID_REQUEST`).
 * Anything else that answers is "another HTTP server", with the status it gave the relay's profile.
 * pi-tasks does not speak the v2 wire (seed 004: not retained as a compatibility mode).
 */
import { relayProbeMs } from "../protocol/limits.ts";
import { RELAY_PROFILE, RELAY_PROFILE_PATH } from "../protocol/names.ts";
import { isRecord } from "../protocol/validate.ts";

/** Where Wolfpack tells its version. */
export const WOLFPACK_INFO_PATH = "/api/info";
/** Wolfpack's older durable task relay: a receive without its query is refused, which says it is there. */
export const WOLFPACK_V2_RECEIVE_PATH = "/api/task-relay/v2/receive";

/** Characters of a version shown (it is the server's text: only letters, digits, `.`, `+` and `-` are kept). */
const MAX_VERSION_CHARS = 40;

export interface ServerIdentity {
  /** `wolfpack-v2`: a Wolfpack with only its v2 task relay; `http`: another HTTP server; `none`: nothing answered. */
  readonly kind: "wolfpack-v2" | "http" | "none";
  /** Its version, when it says (Wolfpack's `/api/info`). */
  readonly version?: string;
  /** What answers, in words: "Wolfpack 1.6.22 with only its v2 task relay". */
  readonly words: string;
}

async function read(url: string, fetcher: typeof fetch): Promise<{ status: number; body: unknown } | undefined> {
  try {
    const response = await fetcher(url, { signal: AbortSignal.timeout(relayProbeMs) });
    const body: unknown = await response.json().catch(() => undefined);
    return { status: response.status, body };
  } catch {
    return undefined;
  }
}

/** Identifies what answers at `baseUrl` (which did not answer as a volatile-v1 relay). Never throws. */
export async function identifyServer(baseUrl: string, fetcher: typeof fetch = fetch): Promise<ServerIdentity> {
  const base = baseUrl.replace(/\/+$/, "");
  const [profile, info, v2] = await Promise.all([
    read(`${base}${RELAY_PROFILE_PATH}`, fetcher),
    read(`${base}${WOLFPACK_INFO_PATH}`, fetcher),
    read(`${base}${WOLFPACK_V2_RECEIVE_PATH}`, fetcher),
  ]);
  if (profile === undefined && info === undefined && v2 === undefined) return { kind: "none", words: "nothing answers there" };
  const version =
    isRecord(info?.body) && typeof info.body.version === "string"
      ? info.body.version.replace(/[^0-9A-Za-z.+-]/g, "").slice(0, MAX_VERSION_CHARS)
      : undefined;
  const v2Relay = isRecord(v2?.body) && v2.body.ok === false && isRecord(v2.body.error) && typeof v2.body.error.code === "string";
  if (v2Relay)
    return {
      kind: "wolfpack-v2",
      ...(version === undefined ? {} : { version }),
      words: `Wolfpack${version === undefined ? "" : ` ${version}`} with only its older v2 task relay (not ${RELAY_PROFILE}, which pi-tasks speaks)`,
    };
  const status = profile === undefined ? "no answer" : `HTTP ${profile.status}`;
  return { kind: "http", words: `another HTTP server, not a ${RELAY_PROFILE} relay (${status} to ${RELAY_PROFILE_PATH})` };
}
