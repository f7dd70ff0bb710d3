/**
 * docs/multi-machine.md is a tested recipe: the Redis command, the relay's ACL line and the relay
 * command it shows are the ones the multi-host tests run (tests/helpers/netns-kit.ts,
 * tests/redis/tls-acl.test.ts, RELAY_REDIS_COMMANDS).
 */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../../testkit/relay-process.ts";
import { RELAY_REDIS_COMMANDS } from "../../src/relay-server/store/redis/scripts.ts";
import { hostRedisArgs } from "../helpers/netns-kit.ts";

const doc = readFileSync(join(REPO_ROOT, "docs", "multi-machine.md"), "utf8");

test("the ACL line names exactly the commands the relay uses", () => {
  const line = doc.split("\n").find((text) => text.trim().startsWith("user relay on"))!;
  const allowed = line
    .trim()
    .split(" ")
    .filter((word) => word.startsWith("+"))
    .map((word) => word.slice(1).toUpperCase());
  expect(allowed).toEqual([...RELAY_REDIS_COMMANDS]);
});

test("the Redis command is the tests' own", () => {
  const shown = hostRedisArgs("ADDR", "DIR")
    .map((arg) => (arg === "" ? '""' : arg))
    .join(" ");
  expect(doc).toContain(shown);
});

test("the relay command stores its state in Redis as the tests start it", () => {
  expect(doc).toContain("pi-tasks relay --store redis://ADDR:6379");
  expect(doc).toContain("pi-tasks relay --store rediss://relay@ADDR:6380");
});
