/**
 * The task tracer (extensions/pi-tasks/traces.ts) without Pi: when the OpenTelemetry environment is
 * unset it is a no-op that loads no @opentelemetry module and never touches the core (checked in a
 * fresh process, by its module cache); when set, an origin's task becomes one span with derived ids
 * and its events, exported to a local OTLP/HTTP receiver; a failed export is counted, never thrown.
 * OpenTelemetry is not in the default install: asked for and missing, the tracer names the install command.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { createTaskTracer, spanIdOf, traceIdOf, tracesUrl } from "../../extensions/pi-tasks/traces.ts";
import type { TaskCore } from "../../src/core/task-core.ts";
import { bunPath, PACKAGE_ROOT } from "../../src/host/pi-cli.ts";
import { startOtlpReceiver } from "../helpers/otlp-receiver.ts";
import { settleVirtually, virtualPair } from "../helpers/virtual-pair.ts";

const receiver = startOtlpReceiver();
afterAll(() => receiver.stop());

/** A core that fails the test if the tracer touches it at all. */
const untouchable = new Proxy({} as TaskCore, {
  get(_target, property) {
    throw new Error(`the tracer touched the core: ${String(property)}`);
  },
});

describe("when the environment asks for traces", () => {
  test("an endpoint turns them on (the traces endpoint as it is, the base endpoint with /v1/traces); disabling wins", () => {
    expect(tracesUrl({})).toBeUndefined();
    expect(tracesUrl({ OTEL_EXPORTER_OTLP_ENDPOINT: " " })).toBeUndefined();
    expect(tracesUrl({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/" })).toBe("http://collector:4318/v1/traces");
    expect(
      tracesUrl({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://traces:9/in" }),
    ).toBe("http://traces:9/in");
    expect(tracesUrl({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318", OTEL_SDK_DISABLED: "TRUE" })).toBeUndefined();
    expect(tracesUrl({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318", OTEL_SDK_DISABLED: "false" })).toBe(
      "http://collector:4318/v1/traces",
    );
    expect(tracesUrl({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://traces:9/in", OTEL_TRACES_EXPORTER: "none" })).toBeUndefined();
  });

  test("unset (or disabled), the tracer is a no-op: nothing is loaded, the core is never touched, stop resolves", async () => {
    let loads = 0;
    const load = () => {
      loads += 1;
      return Promise.reject(new Error("must not load"));
    };
    for (const env of [{}, { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9", OTEL_SDK_DISABLED: "true" }]) {
      const tracer = createTaskTracer(env, untouchable, { session: "s", load });
      expect(tracer.enabled).toBe(false);
      expect(await tracer.ready()).toBe(false);
      await tracer.stop();
      expect(tracer.failures()).toBe(0);
    }
    expect(loads).toBe(0);
  });

  test("asked for while OpenTelemetry is not installed (the default install): the problem names the command that installs it", async () => {
    const missing = Object.assign(new Error("Cannot find package '@opentelemetry/api'"), { code: "ERR_MODULE_NOT_FOUND" });
    const tracer = createTaskTracer({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9" }, untouchable, {
      session: "s",
      load: () => Promise.reject(missing),
    });
    expect(tracer.problem()).toBeUndefined();
    expect(await tracer.ready()).toBe(false);
    const { peerDependencies } = (await Bun.file(join(PACKAGE_ROOT, "package.json")).json()) as {
      peerDependencies: Record<string, string>;
    };
    const wanted = Object.entries(peerDependencies)
      .filter(([name]) => name.startsWith("@opentelemetry/"))
      .map(([name, version]) => `${name}@${version}`);
    expect(wanted.length).toBe(4);
    expect(tracer.problem()).toBe(
      `pi-tasks: traces are asked for (OTEL_EXPORTER_OTLP_*) but OpenTelemetry is not installed beside pi-tasks, so no trace is sent. Install it with: npm install --prefix ${PACKAGE_ROOT} --no-save ${wanted.join(" ")}`,
    );
    // Any other failure to load is named as it is.
    const broken = createTaskTracer({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9" }, untouchable, {
      session: "s",
      load: () => Promise.reject(new Error("bad build")),
    });
    await broken.ready();
    expect(broken.problem()).toEndWith("OpenTelemetry failed to load: bad build");
  });

  test("in a fresh process, the whole extension and an unset tracer import no @opentelemetry module; a set one does", () => {
    const probe = join(PACKAGE_ROOT, "tests", "helpers", "trace-imports.ts");
    const run = (env: Record<string, string | undefined>) => {
      const child = Bun.spawnSync([bunPath(), probe], {
        cwd: PACKAGE_ROOT,
        env: { ...process.env, OTEL_EXPORTER_OTLP_ENDPOINT: undefined, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: undefined, ...env },
        stdout: "pipe",
        stderr: "pipe",
      });
      return { code: child.exitCode, out: child.stdout.toString().trim(), err: child.stderr.toString() };
    };
    const unset = run({});
    expect(unset).toEqual({ code: 0, out: JSON.stringify({ enabled: false, loaded: [] }), err: "" });
    const set = run({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url });
    expect(set.code).toBe(0);
    const parsed = JSON.parse(set.out) as { enabled: boolean; loaded: string[] };
    expect(parsed.enabled).toBe(true);
    expect(parsed.loaded).toEqual(expect.arrayContaining(["@opentelemetry/api", "@opentelemetry/sdk-trace"]));
  });
});

describe("ids", () => {
  test("the trace id is SHA-256 of the root task id (16 bytes), a span id SHA-256 of the task id (8 bytes)", () => {
    const sha = (text: string, bytes: number) => createHash("sha256").update(text).digest().subarray(0, bytes).toString("hex");
    expect(traceIdOf("root-1")).toBe(sha("pi-tasks trace root-1", 16));
    expect(spanIdOf("task-1")).toBe(sha("pi-tasks span task-1", 8));
    expect([traceIdOf("root-1").length, spanIdOf("task-1").length]).toEqual([32, 16]);
    expect(traceIdOf("root-1")).not.toBe(traceIdOf("root-2"));
  });
});

describe("a live tracer on an origin core", () => {
  const TEXT = `secret-${crypto.randomUUID()}`;

  test("an acknowledged task is one root span with its events; an open task ends when the tracer stops", async () => {
    const p = await virtualPair();
    const tracer = createTaskTracer({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: "unit" }, p.origin, {
      session: "origin-s",
    });
    expect(tracer.enabled).toBe(true);
    expect(await tracer.ready()).toBe(true);
    const done = await settleVirtually(p.timers, p.origin.createTask({ to: p.worker.endpoint()!, task: `${TEXT} one` }));
    const open = await settleVirtually(p.timers, p.origin.createTask({ to: p.worker.endpoint()!, task: `${TEXT} two` }));
    await settleVirtually(p.timers, p.worker.refresh());
    await settleVirtually(p.timers, p.worker.done({ taskId: done.taskId, status: "completed", summary: `${TEXT} summary` }));
    await settleVirtually(p.timers, p.origin.refresh());
    await settleVirtually(p.timers, p.origin.acknowledge({ taskId: done.taskId }));
    await tracer.stop();
    await p.origin.close();
    await p.worker.close();

    const spanOf = (taskId: string) => receiver.spans.filter((span) => span.attributes["pi_tasks.task.id"] === taskId);
    expect(spanOf(done.taskId).length).toBe(1);
    const finished = spanOf(done.taskId)[0]!;
    expect(finished.traceId).toBe(traceIdOf(done.taskId));
    expect(finished.spanId).toBe(spanIdOf(done.taskId));
    expect(finished.parentSpanId).toBeUndefined();
    expect(finished.resource["service.name"]).toBe("unit");
    expect(finished.attributes).toMatchObject({
      "pi_tasks.origin.session": "origin-s",
      "pi_tasks.task.status": "completed",
      "pi_tasks.task.ended": "acknowledged",
    });
    expect(finished.events.map((event) => event.name)).toEqual(
      expect.arrayContaining(["task.created", "task.completed", "task.parent_acknowledged"]),
    );
    const unfinished = spanOf(open.taskId);
    expect(unfinished.map((span) => span.attributes["pi_tasks.task.status"])).toEqual(["active"]);
    expect(unfinished.map((span) => span.attributes["pi_tasks.task.ended"])).toEqual(["closed"]);
    expect(unfinished[0]!.traceId).toBe(traceIdOf(open.taskId));
    expect(receiver.bodies.join("\n").includes(TEXT)).toBe(false);
    expect(tracer.failures()).toBe(0);
  });

  test("a refused export is counted and never thrown; stop still resolves", async () => {
    const refusing = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("no", { status: 400 }) });
    try {
      const p = await virtualPair();
      const tracer = createTaskTracer({ OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${refusing.port}` }, p.origin, { session: "s" });
      await tracer.ready();
      await settleVirtually(p.timers, p.origin.createTask({ to: p.worker.endpoint()!, task: "refused" }));
      await tracer.stop();
      await p.origin.close();
      await p.worker.close();
      expect(tracer.failures()).toBeGreaterThan(0);
    } finally {
      await refusing.stop(true);
    }
  });
});
