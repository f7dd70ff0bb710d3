/**
 * Optional Wolfpack JWT for the client: a fresh HS256 token per request, only for plain-HTTP
 * loopback URLs (`127.0.0.1`, `[::1]`, `localhost`). The secret never goes to HTTPS or remote URLs.
 */
import { type JwtClaimsOptions, jwtClaimsFromEnv, readJwtSecret, signJwt } from "../protocol/jwt.ts";

export interface RelayAuth extends JwtClaimsOptions {
  readonly secret: string;
}

const LOOPBACK_HOSTS: ReadonlySet<string> = new Set(["127.0.0.1", "[::1]", "localhost"]);

export function isLoopbackHttpUrl(url: string): boolean {
  try {
    const parsed = new URL(url);
    return parsed.protocol === "http:" && LOOPBACK_HOSTS.has(parsed.hostname);
  } catch {
    return false;
  }
}

/** The auth configuration from the environment; a secret under 32 characters is `RELAY_AUTH_REQUIRED`. */
export function authFromEnv(env: Record<string, string | undefined>): RelayAuth | undefined {
  const secret = readJwtSecret(env);
  return secret === undefined ? undefined : { secret, ...jwtClaimsFromEnv(env) };
}

export async function tokenFor(auth: RelayAuth, url: string): Promise<string | undefined> {
  if (!isLoopbackHttpUrl(url)) return undefined;
  return signJwt(auth.secret, auth);
}
