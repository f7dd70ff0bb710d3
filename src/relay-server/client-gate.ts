/**
 * The relay client gate (Part B §6): loopback clients only, unless started with an explicit allow
 * list of addresses or IPv4 CIDRs. A loopback request with `X-Forwarded-For` is judged by the
 * forwarded address, which must be exactly one allowed address.
 */
import { isIP } from "node:net";

export interface ClientGate {
  allows(peer: string | undefined, forwardedFor: string | null): boolean;
}

function stripMapped(address: string): string {
  return address.toLowerCase().startsWith("::ffff:") && isIP(address.slice(7)) === 4 ? address.slice(7) : address;
}

export function isLoopback(address: string): boolean {
  const plain = stripMapped(address);
  return plain === "::1" || (isIP(plain) === 4 && plain.startsWith("127."));
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
    return isIP(plain) === 4 && Math.floor(ipv4ToNumber(plain) / span) === base;
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
