/**
 * Redis with TLS and an ACL user restricted to the commands the relay uses: certificates are made
 * here (openssl: a certificate authority and a server certificate for 127.0.0.1); `redis-server`
 * listens on a TLS port only, its default user off, and one user `relay` allowed exactly
 * `RELAY_REDIS_COMMANDS` on the relay's keys and doorbell channels. Two relays start on
 * `rediss://relay@127.0.0.1:PORT` (the password from `PI_TASKS_REDIS_PASSWORD_FILE`, the authority
 * from `PI_TASKS_REDIS_CA_FILE`), one on Bun and one on Node, and a task crosses them. The same user cannot run anything else
 * (FLUSHALL is NOPERM), and a relay that does not trust the authority does not start.
 */
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { spawn, spawnSync } from "bun";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { settle } from "../../testkit/drain.ts";
import { closeParties, createParty, type Party } from "../../testkit/party.ts";
import { memoryOnlyArgs, REDIS_BINARY, REDIS_PACKAGE } from "../../testkit/redis-process.ts";
import { freePort, type RelayProcess } from "../../testkit/relay-process.ts";
import { RELAY_REDIS_COMMANDS } from "../../src/relay-server/store/redis/scripts.ts";
import { RUNTIMES, startRedisRelay } from "../helpers/redis-kit.ts";
import { describeWithPackage } from "../helpers/requires-package.ts";

setDefaultTimeout(60_000);

const PASSWORD = `relay-${crypto.randomUUID()}`;
const dir = mkdtempSync(join(tmpdir(), "pi-tasks-redis-tls-"));
const file = (name: string) => join(dir, name);

function openssl(...args: string[]): void {
  const done = spawnSync(["openssl", ...args], { stdout: "ignore", stderr: "pipe" });
  if (done.exitCode !== 0) throw new Error(`openssl ${args[0]} failed: ${done.stderr.toString()}`);
}

/** A certificate authority and a server certificate for 127.0.0.1 signed by it. */
function makeCertificates(): void {
  openssl(
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-days",
    "1",
    "-subj",
    "/CN=pi-tasks test CA",
    "-keyout",
    file("ca.key"),
    "-out",
    file("ca.crt"),
  );
  openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", file("redis.key"), "-out", file("redis.csr"));
  writeFileSync(file("san.ext"), "subjectAltName=IP:127.0.0.1\n");
  openssl(
    "x509",
    "-req",
    "-in",
    file("redis.csr"),
    "-CA",
    file("ca.crt"),
    "-CAkey",
    file("ca.key"),
    "-CAcreateserial",
    "-days",
    "1",
    "-extfile",
    file("san.ext"),
    "-out",
    file("redis.crt"),
  );
}

/** The ACL rule of the relay's user: exactly the commands it uses, on its keys and channels. */
const relayRule = [
  "on",
  `>${PASSWORD}`,
  "resetkeys",
  "~{pi-tasks}:*",
  "resetchannels",
  "&{pi-tasks}:*",
  "-@all",
  ...RELAY_REDIS_COMMANDS.map((command) => `+${command.toLowerCase()}`),
];

describeWithPackage("Redis with TLS and an ACL user of the relay's commands", REDIS_BINARY, REDIS_PACKAGE, () => {
  const port = freePort();
  let redis: ReturnType<typeof spawn> | undefined;
  const relays: RelayProcess[] = [];
  const parties: Party[] = [];
  const env = { PI_TASKS_REDIS_PASSWORD_FILE: file("password"), PI_TASKS_REDIS_CA_FILE: file("ca.crt") };
  const store = `rediss://relay@127.0.0.1:${port}`;

  beforeAll(async () => {
    makeCertificates();
    writeFileSync(file("password"), PASSWORD);
    chmodSync(file("password"), 0o600);
    writeFileSync(file("users.acl"), `user default off\nuser relay ${relayRule.join(" ")}\n`);
    redis = spawn(
      [
        REDIS_BINARY,
        "--port",
        "0",
        "--tls-port",
        String(port),
        "--bind",
        "127.0.0.1",
        "--tls-cert-file",
        file("redis.crt"),
        "--tls-key-file",
        file("redis.key"),
        "--tls-ca-cert-file",
        file("ca.crt"),
        "--tls-auth-clients",
        "no",
        "--aclfile",
        file("users.acl"),
        ...memoryOnlyArgs(dir),
      ],
      { stdout: "ignore", stderr: "pipe" },
    );
    for (let attempt = 0; attempt < 100; attempt += 1) {
      if (cli("PING").includes("PONG")) break;
      await Bun.sleep(50);
    }
  });
  afterAll(async () => {
    await closeParties(parties.splice(0));
    await Promise.all(relays.map((relay) => relay.stop().catch(() => undefined)));
    redis?.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });

  /** redis-cli over TLS as the relay's user. */
  function cli(...args: string[]): string {
    const done = spawnSync(
      [
        "redis-cli",
        "--tls",
        "--cacert",
        file("ca.crt"),
        "-p",
        String(port),
        "--user",
        "relay",
        "--pass",
        PASSWORD,
        "--no-auth-warning",
        ...args,
      ],
      { stdout: "pipe", stderr: "pipe" },
    );
    return done.stdout.toString() + done.stderr.toString();
  }

  test("two relays start on rediss:// as the restricted user, and a task crosses them", async () => {
    // One relay on Bun, one on Node (the built bundle): TLS and the ACL user work on both.
    relays.push(...(await Promise.all(RUNTIMES.map((runtime) => startRedisRelay(store, { env, runtime })))));
    const origin = await createParty({ url: relays[0]!.url });
    const worker = await createParty({ url: relays[1]!.url });
    parties.push(origin, worker);
    const { taskId } = await origin.core.createTask({ to: worker.core.endpoint()!, task: "over TLS, as the relay's user" });
    await settle([origin, worker]);
    await worker.core.done({ taskId, status: "completed", summary: "done over TLS" });
    await settle([origin, worker]);
    expect(origin.core.getTask(taskId).status).toBe("completed");
  });

  test("the user may run nothing else: FLUSHALL is NOPERM, and the data is still there", () => {
    expect(cli("FLUSHALL")).toContain("NOPERM");
    expect(cli("GET", "{pi-tasks}:epoch")).toMatch(/^[0-9a-f-]{36}\n$/);
  });

  test.each(RUNTIMES)("a relay that does not trust the certificate authority does not start (on %s)", async (runtime) => {
    const refused = await startRedisRelay(store, { runtime, env: { ...env, PI_TASKS_REDIS_CA_FILE: undefined } }).then(
      (relay) => {
        relays.push(relay);
        return "started";
      },
      (error: Error) => error.message,
    );
    expect(refused).toContain("REDIS_UNAVAILABLE");
  });
});
