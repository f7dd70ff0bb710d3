/**
 * The relay client gate (docs/wire.md): loopback clients only, unless started with an explicit allow
 * list of addresses or IPv4 CIDRs. A loopback request with `X-Forwarded-For` is judged by the
 * forwarded address, which must be exactly one allowed address.
 */
import { isIP } from "node:net";

export interface ClientGate {
  allows(peer: string | undefined, forwardedFor: string | null): boolean;
}

/** Dotted-quad IPv4 (checked on every request: `node:net`'s `isIP` costs far more under Bun). */
const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
const MAPPED_PREFIX = "::ffff:";

function stripMapped(address: string): string {
  if (address.length > MAPPED_PREFIX.length && address.slice(0, MAPPED_PREFIX.length).toLowerCase() === MAPPED_PREFIX) {
    const rest = address.slice(MAPPED_PREFIX.length);
    if (IPV4.test(rest)) return rest;
  }
  return address;
}

export function isLoopback(address: string): boolean {
  // The usual loopback peers first (checked on every request).
  if (address === "127.0.0.1" || address === "::1" || address === "::ffff:127.0.0.1") return true;
  const plain = stripMapped(address);
  return plain === "::1" || (plain.startsWith("127.") && IPV4.test(plain));
}

const OCTET_VALUES = 2 ** 8;

function ipv4ToNumber(address: string): number {
  return address.split(".").reduce((value, part) => value * OCTET_VALUES + Number(part), 0);
}

type Rule = (address: string) => boolean;

function parseRule(entry: string): Rule {
  const [address, bits] = entry.split("/");
  if (address === undefined || isIP(address) === 0) throw new Error(`invalid --allow entry ${entry}`);
  if (bits === undefined) return (candidate) => stripMapped(candidate) === stripMapped(address);
  const prefix = Number(bits);
  if (isIP(address) !== 4 || !Number.isInteger(prefix) || prefix < 0 || prefix > 32) throw new Error(`invalid --allow CIDR ${entry}`);
  const span = 2 ** (32 - prefix);
  const base = Math.floor(ipv4ToNumber(address) / span);
  return (candidate) => {
    const plain = stripMapped(candidate);
    return IPV4.test(plain) && Math.floor(ipv4ToNumber(plain) / span) === base;
  };
}

export function createClientGate(allow: readonly string[]): ClientGate {
  const rules = allow.map(parseRule);
  const allowed = (address: string) => rules.some((rule) => rule(address));
  return {
    allows(peer, forwardedFor) {
      if (peer === undefined) return false;
      if (isLoopback(peer)) {
        if (forwardedFor === null) return true;
        const hops = forwardedFor.split(",").map((hop) => hop.trim());
        return hops.length === 1 && isIP(hops[0]!) !== 0 && allowed(hops[0]!);
      }
      return forwardedFor === null && allowed(peer);
    },
  };
}
