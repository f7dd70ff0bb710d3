import { describe, expect, test } from "bun:test";
import { createClientGate, isLoopback } from "../../src/relay-server/client-gate.ts";

describe("relay client gate", () => {
  test("loopback addresses, plain and IPv4-mapped", () => {
    for (const address of ["127.0.0.1", "127.255.0.9", "::1", "::ffff:127.0.0.1", "::FFFF:127.0.0.2"])
      expect({ address, loopback: isLoopback(address) }).toEqual({ address, loopback: true });
    for (const address of ["128.0.0.1", "10.0.0.1", "::2", "::ffff:10.0.0.1", "127.0.0.256", "127.1", "localhost", ""]) {
      expect({ address, loopback: isLoopback(address) }).toEqual({ address, loopback: false });
    }
  });

  test("loopback only by default; forwarded or remote clients need the allow list", () => {
    const gate = createClientGate([]);
    expect(gate.allows("127.0.0.1", null)).toBe(true);
    expect(gate.allows("::1", null)).toBe(true);
    expect(gate.allows(undefined, null)).toBe(false);
    expect(gate.allows("10.1.2.3", null)).toBe(false);
    expect(gate.allows("127.0.0.1", "8.8.8.8")).toBe(false);
  });

  test("exact addresses and IPv4 CIDRs in the allow list", () => {
    const gate = createClientGate(["100.64.0.0/10", "192.168.1.7"]);
    expect(gate.allows("100.64.0.1", null)).toBe(true);
    expect(gate.allows("100.127.255.255", null)).toBe(true);
    expect(gate.allows("100.128.0.0", null)).toBe(false);
    expect(gate.allows("::ffff:192.168.1.7", null)).toBe(true);
    expect(gate.allows("192.168.1.8", null)).toBe(false);
    expect(gate.allows("127.0.0.1", "100.100.1.1")).toBe(true);
    expect(gate.allows("127.0.0.1", "100.100.1.1, 100.100.1.2")).toBe(false);
    expect(gate.allows("100.64.0.1", "100.64.0.2")).toBe(false);
    expect(() => createClientGate(["not-an-address"])).toThrow("invalid --allow entry");
    expect(() => createClientGate(["10.0.0.0/33"])).toThrow("invalid --allow CIDR");
  });
});
