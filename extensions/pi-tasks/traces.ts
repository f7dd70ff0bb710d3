/**
 * Traces across hops: when the standard OpenTelemetry environment asks for them
 * (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT`; not with
 * `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`), every task this session owns (it is
 * the task's origin) becomes one span, exported over OTLP/HTTP (JSON) in batches.
 *
 * Why the origin: it holds the whole life of the task, from `task.created` to its terminal event and
 * the acknowledgement, so each task is reported once however many sessions see it. Its events become
 * span events named by their type, with ids only: task text, questions, answers and summaries never
 * leave the session through a trace (no payload is read).
 *
 * Why the ids are derived: the sessions of a chain A→B→C share nothing but the lineage each task
 * record carries, and the wire must not change for tracing. So the trace id is the first 16 bytes of
 * SHA-256("pi-tasks trace " + root task id) and a task's span id the first 8 bytes of
 * SHA-256("pi-tasks span " + task id): B names the span of A's task as the parent of its sub-task's
 * span without being told it, and the whole chain is one trace. The SDK takes the ids from a
 * generator handed to its provider (`IdGenerator`) and the parent as a remote span context.
 *
 * Why it costs nothing when off: without that environment no @opentelemetry module is loaded (the
 * SDK is imported on first use, dynamically), nothing observes the core and no timer runs. The
 * packages are optional peer dependencies, not in the default install (they are most of its size):
 * asked for and missing, the tracer says so once (`problem`), naming the command that installs them
 * beside pi-tasks (`missingTracePackages`). When on,
 * the span of a task ends when its origin acknowledged its terminal event, or when the session's core
 * stops (with the status it has then); the session's end flushes the batch, bounded
 * (`traceShutdownMs`). Export failures are counted, never thrown: no error reaches Pi.
 */
import { createHash, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Attributes, Span, Tracer } from "@opentelemetry/api";
import type { IdGenerator, SpanExporter, TracerProvider } from "@opentelemetry/sdk-trace";
import { ROOT_DEPTH } from "../../src/core/lineage.ts";
import type { TaskCore, TaskView } from "../../src/core/task-core.ts";
import { PACKAGE_ROOT } from "../../src/host/runtime.ts";
import { within } from "../../src/platform/waits.ts";
import {
  maxWireIdChars,
  traceExportDelayMs,
  traceExportTimeoutMs,
  maxTraceEventsPerSpan,
  maxTraceExportBatchSpans,
  maxTraceQueuedSpans,
  traceShutdownMs,
} from "../../src/protocol/limits.ts";
import type { Env } from "../../src/relay-client/config.ts";

/** The modules a live tracer uses, loaded only when the environment asks for traces. */
export interface TraceModules {
  readonly api: typeof import("@opentelemetry/api");
  readonly sdk: typeof import("@opentelemetry/sdk-trace");
  readonly otlp: typeof import("@opentelemetry/exporter-trace-otlp-http");
  readonly resources: typeof import("@opentelemetry/resources");
}

export interface TaskTracerOptions {
  /** This session's name (the origin session of every span it exports). */
  readonly session: string;
  /** Loads the OpenTelemetry modules (default: dynamic imports; tests count calls). */
  readonly load?: () => Promise<TraceModules>;
}

export interface TaskTracer {
  /** Whether the environment asked for traces. */
  readonly enabled: boolean;
  /** Failed export requests (and a failed load of the SDK) so far. */
  failures(): number;
  /** Why traces were asked for and cannot be sent (the SDK is not installed, or failed to load), once known. */
  problem(): string | undefined;
  /** Resolves once the tracer observes the core (true), or when it never will (false: off, stopped, or the SDK failed to load). */
  ready(): Promise<boolean>;
  /**
   * Ends the open spans at once (call it while the core still holds their tasks), then flushes and
   * shuts the exporter down within `traceShutdownMs`. Never rejects.
   */
  stop(): Promise<void>;
}

/** W3C trace context: a trace id is 16 bytes, a span id 8. */
const TRACE_ID_BYTES = 16;
const SPAN_ID_BYTES = 8;
const SPAN_NAME = "pi-tasks.task";
const SCOPE_NAME = "pi-tasks";
const DEFAULT_SERVICE_NAME = "pi-tasks";
/** `ExportResultCode.SUCCESS` and `FAILED` of @opentelemetry/core. */
const EXPORT_SUCCEEDED = 0;
const EXPORT_FAILED = 1;

/** Span and event attribute names (ids, counts, session names and states only: never text). */
export const TRACE_ATTRIBUTES = {
  taskId: "pi_tasks.task.id",
  rootTaskId: "pi_tasks.task.root_id",
  parentTaskId: "pi_tasks.task.parent_id",
  depth: "pi_tasks.task.depth",
  originSession: "pi_tasks.origin.session",
  workerSession: "pi_tasks.worker.session",
  status: "pi_tasks.task.status",
  outcome: "pi_tasks.task.outcome",
  ended: "pi_tasks.task.ended",
  eventId: "pi_tasks.event.id",
  eventType: "pi_tasks.event.type",
} as const;

const OFF: TaskTracer = {
  enabled: false,
  failures: () => 0,
  problem: () => undefined,
  ready: () => Promise.resolve(false),
  stop: () => Promise.resolve(),
};

/** The @opentelemetry packages traces need, as package.json names them (optional peer dependencies). */
function tracePackages(): string[] {
  const manifest = JSON.parse(readFileSync(join(PACKAGE_ROOT, "package.json"), "utf8")) as { peerDependencies?: Record<string, string> };
  return Object.entries(manifest.peerDependencies ?? {})
    .filter(([name]) => name.startsWith("@opentelemetry/"))
    .map(([name, version]) => `${name}@${version}`);
}

/**
 * Why traces cannot be sent when loading the SDK failed: a package not installed (the default
 * install has none) names the command that installs them beside pi-tasks; any other failure as it is.
 */
export function missingTracePackages(error: unknown): string {
  const code = (error as { code?: unknown } | undefined)?.code;
  const text = error instanceof Error ? error.message : String(error);
  const notFound = code === "ERR_MODULE_NOT_FOUND" || code === "MODULE_NOT_FOUND" || /Cannot find (package|module)/.test(text);
  if (!notFound) return `pi-tasks: traces are asked for (OTEL_EXPORTER_OTLP_*) but OpenTelemetry failed to load: ${text}`;
  return `pi-tasks: traces are asked for (OTEL_EXPORTER_OTLP_*) but OpenTelemetry is not installed beside pi-tasks, so no trace is sent. Install it with: npm install --prefix ${PACKAGE_ROOT} --no-save ${tracePackages().join(" ")}`;
}

function flag(value: string | undefined): string {
  return value?.trim().toLowerCase() ?? "";
}

/** Where spans go, when the environment asks for traces at all (the OTLP/HTTP traces URL). */
export function tracesUrl(env: Env): string | undefined {
  if (flag(env.OTEL_SDK_DISABLED) === "true" || flag(env.OTEL_TRACES_EXPORTER) === "none") return undefined;
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  if (traces) return traces;
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  return base ? `${base.replace(/\/+$/, "")}/v1/traces` : undefined;
}

function digestHex(text: string, bytes: number): string {
  return createHash("sha256").update(text, "utf8").digest().subarray(0, bytes).toString("hex");
}

/** The trace id of every task under one root task (32 hex characters). */
export function traceIdOf(rootTaskId: string): string {
  return digestHex(`pi-tasks trace ${rootTaskId}`, TRACE_ID_BYTES);
}

/** A task's span id (16 hex characters); its sub-tasks' spans name it as their parent. */
export function spanIdOf(taskId: string): string {
  return digestHex(`pi-tasks span ${taskId}`, SPAN_ID_BYTES);
}

/** The SDK's modules, imported on first use only. */
export async function loadTraceModules(): Promise<TraceModules> {
  const [api, sdk, otlp, resources] = await Promise.all([
    import("@opentelemetry/api"),
    import("@opentelemetry/sdk-trace"),
    import("@opentelemetry/exporter-trace-otlp-http"),
    import("@opentelemetry/resources"),
  ]);
  return { api, sdk, otlp, resources };
}

/** Hands the SDK the ids of the span being started (set just before `startSpan`). */
interface TaskIds extends IdGenerator {
  next(traceId: string, spanId: string): void;
}

function taskIds(): TaskIds {
  let pending: { traceId: string; spanId: string } | undefined;
  return {
    next: (traceId, spanId) => {
      pending = { traceId, spanId };
    },
    // Only a span started by this file asks, and always after `next`; a random id is never needed.
    generateTraceId: () => pending?.traceId ?? randomBytes(TRACE_ID_BYTES).toString("hex"),
    generateSpanId: () => pending?.spanId ?? randomBytes(SPAN_ID_BYTES).toString("hex"),
  };
}

/** The OTLP exporter, each failed export counted (the batch processor drops the error silently). */
function countedExporter(inner: SpanExporter, failed: () => void): SpanExporter {
  return {
    export(spans, done) {
      try {
        inner.export(spans, (result) => {
          if (result.code !== EXPORT_SUCCEEDED) failed();
          done(result);
        });
      } catch (error) {
        failed();
        done({ code: EXPORT_FAILED, error: error instanceof Error ? error : new Error(String(error)) });
      }
    },
    shutdown: () => inner.shutdown(),
    forceFlush: () => inner.forceFlush?.() ?? Promise.resolve(),
  };
}

function providerFor(modules: TraceModules, env: Env, url: string, ids: TaskIds, failed: () => void): TracerProvider {
  const { sdk, otlp, resources } = modules;
  // keepAlive off: no idle socket outlives an export (Pi's print mode exits when nothing is pending).
  const exporter = new otlp.OTLPTraceExporter({ url, timeoutMillis: traceExportTimeoutMs, keepAlive: false });
  const serviceName = env.OTEL_SERVICE_NAME?.trim() || DEFAULT_SERVICE_NAME;
  return new sdk.TracerProvider({
    resource: resources.defaultResource().merge(resources.resourceFromAttributes({ "service.name": serviceName })),
    idGenerator: ids,
    spanLimits: { eventCountLimit: maxTraceEventsPerSpan, attributeValueLengthLimit: maxWireIdChars },
    spanProcessors: [
      new sdk.BatchSpanProcessor({
        exporter: countedExporter(exporter, failed),
        maxQueueSize: maxTraceQueuedSpans,
        maxExportBatchSize: maxTraceExportBatchSpans,
        scheduledDelayMillis: traceExportDelayMs,
        exportTimeoutMillis: traceExportTimeoutMs,
      }),
    ],
  });
}

/** One open span of a task this session owns. */
interface TaskSpan {
  readonly span: Span;
  /** Event ids already recorded on the span. */
  readonly seen: Set<string>;
  /** The task as last observed (a task that vanished ends with it). */
  last: TaskView;
  workerNamed: boolean;
}

/** What one live tracer keeps: its spans by task id, and the tasks whose span already ended. */
interface Spans {
  readonly modules: TraceModules;
  readonly tracer: Tracer;
  readonly ids: TaskIds;
  readonly session: string;
  readonly open: Map<string, TaskSpan>;
  readonly ended: Set<string>;
}

/** The worker's session name as its verified mail claims it (a claim, like the board shows it). */
function workerSession(view: TaskView): string | undefined {
  return view.peer?.verified === true ? view.peer.claimedName : undefined;
}

function startTaskSpan(spans: Spans, view: TaskView): TaskSpan {
  const { api } = spans.modules;
  const rootTaskId = view.lineage?.rootTaskId ?? view.taskId;
  const parentTaskId = view.lineage?.parentTaskId;
  const traceId = traceIdOf(rootTaskId);
  const parent =
    parentTaskId === undefined
      ? api.ROOT_CONTEXT
      : api.trace.setSpanContext(api.ROOT_CONTEXT, {
          traceId,
          spanId: spanIdOf(parentTaskId),
          traceFlags: api.TraceFlags.SAMPLED,
          isRemote: true,
        });
  const attributes: Attributes = {
    [TRACE_ATTRIBUTES.taskId]: view.taskId,
    [TRACE_ATTRIBUTES.rootTaskId]: rootTaskId,
    [TRACE_ATTRIBUTES.depth]: view.lineage?.depth ?? ROOT_DEPTH,
    [TRACE_ATTRIBUTES.originSession]: spans.session,
    ...(parentTaskId === undefined ? {} : { [TRACE_ATTRIBUTES.parentTaskId]: parentTaskId }),
  };
  spans.ids.next(traceId, spanIdOf(view.taskId));
  const span = spans.tracer.startSpan(SPAN_NAME, { startTime: view.createdAt, attributes }, parent);
  return { span, seen: new Set(), last: view, workerNamed: false };
}

/** Records the task's new events (ids and type only) and a worker name learned since. */
function observe(taskSpan: TaskSpan, view: TaskView): void {
  taskSpan.last = view;
  for (const event of view.events) {
    if (taskSpan.seen.has(event.eventId)) continue;
    taskSpan.seen.add(event.eventId);
    taskSpan.span.addEvent(
      event.type,
      { [TRACE_ATTRIBUTES.taskId]: event.taskId, [TRACE_ATTRIBUTES.eventId]: event.eventId, [TRACE_ATTRIBUTES.eventType]: event.type },
      event.occurredAt,
    );
  }
  const worker = workerSession(view);
  if (!taskSpan.workerNamed && worker !== undefined) {
    taskSpan.span.setAttribute(TRACE_ATTRIBUTES.workerSession, worker);
    taskSpan.workerNamed = true;
  }
}

/** How a task's span ended: its acknowledgement, the core stopping, or the task leaving the store. */
type Ending = "acknowledged" | "closed" | "removed";

function acknowledgement(view: TaskView): number | undefined {
  if (view.status === "active") return undefined;
  return view.events.find((event) => event.type === "task.parent_acknowledged")?.occurredAt;
}

function endTaskSpan(spans: Spans, taskId: string, taskSpan: TaskSpan, ending: Ending, at: number): void {
  const { api } = spans.modules;
  const { span, last } = taskSpan;
  span.setAttributes({
    [TRACE_ATTRIBUTES.status]: last.status,
    [TRACE_ATTRIBUTES.outcome]: last.outcome,
    [TRACE_ATTRIBUTES.ended]: ending,
  });
  if (last.status === "completed") span.setStatus({ code: api.SpanStatusCode.OK });
  else if (last.status === "failed" || last.status === "timed_out")
    span.setStatus({ code: api.SpanStatusCode.ERROR, message: last.status });
  span.end(at);
  spans.open.delete(taskId);
  spans.ended.add(taskId);
}

/** Brings the spans up to the core's tasks: new spans, new events, ended spans. */
function sync(spans: Spans, core: TaskCore): void {
  const present = new Set<string>();
  for (const view of core.listTasks()) {
    if (view.role !== "origin") continue;
    present.add(view.taskId);
    if (spans.ended.has(view.taskId)) continue;
    let taskSpan = spans.open.get(view.taskId);
    if (taskSpan === undefined) {
      taskSpan = startTaskSpan(spans, view);
      spans.open.set(view.taskId, taskSpan);
    }
    observe(taskSpan, view);
    const acknowledgedAt = acknowledgement(view);
    if (acknowledgedAt !== undefined) endTaskSpan(spans, view.taskId, taskSpan, "acknowledged", acknowledgedAt);
  }
  for (const [taskId, taskSpan] of spans.open) if (!present.has(taskId)) endTaskSpan(spans, taskId, taskSpan, "removed", Date.now());
  for (const taskId of spans.ended) if (!present.has(taskId)) spans.ended.delete(taskId);
}

interface Live {
  /** Ends every open span, then flushes and shuts down (bounded, never rejects). */
  stop(): Promise<void>;
}

/** Observes the core (one sync per burst of changes) and exports through a provider of its own. */
function startLive(modules: TraceModules, core: TaskCore, settings: { url: string; env: Env; session: string; failed: () => void }): Live {
  const ids = taskIds();
  const provider = providerFor(modules, settings.env, settings.url, ids, settings.failed);
  const spans: Spans = {
    modules,
    tracer: provider.getTracer(SCOPE_NAME),
    ids,
    session: settings.session,
    open: new Map(),
    ended: new Set(),
  };
  let scheduled = false;
  let stopped = false;
  const quietSync = () => {
    scheduled = false;
    if (stopped) return;
    try {
      sync(spans, core);
    } catch {
      // A trace is an observer: nothing it fails at may reach the core or Pi.
    }
  };
  const unsubscribe = core.onChange(() => {
    if (scheduled || stopped) return;
    scheduled = true;
    queueMicrotask(quietSync);
  });
  quietSync();
  return {
    stop() {
      quietSync();
      stopped = true;
      unsubscribe();
      try {
        for (const [taskId, taskSpan] of spans.open) endTaskSpan(spans, taskId, taskSpan, "closed", Date.now());
      } catch {
        // Ending is best effort; the flush below still runs.
      }
      return within(provider.shutdown(), traceShutdownMs).then(
        () => undefined,
        () => undefined,
      );
    },
  };
}

/**
 * A tracer of the tasks `core` owns, when `env` asks for traces; otherwise a no-op that loads
 * nothing and observes nothing. The SDK loads in the background; tasks created meanwhile are
 * caught up from the core's store (their spans start at their creation time).
 */
export function createTaskTracer(env: Env, core: TaskCore, options: TaskTracerOptions): TaskTracer {
  const url = tracesUrl(env);
  if (url === undefined) return OFF;
  let failures = 0;
  let stopped = false;
  let live: Live | undefined;
  let problem: string | undefined;
  const failed = () => {
    failures += 1;
  };
  const ready = (options.load ?? loadTraceModules)()
    .then((modules) => {
      if (!stopped && !core.closed()) live = startLive(modules, core, { url, env, session: options.session, failed });
      return live !== undefined;
    })
    .catch((error: unknown) => {
      failed();
      problem = missingTracePackages(error);
      return false;
    });
  return {
    enabled: true,
    failures: () => failures,
    problem: () => problem,
    ready: () => ready,
    stop() {
      if (stopped) return Promise.resolve();
      stopped = true;
      const current = live;
      live = undefined;
      return current === undefined ? Promise.resolve() : current.stop();
    },
  };
}
