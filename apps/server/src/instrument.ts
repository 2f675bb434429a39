import type { IncomingMessage, ServerResponse } from "node:http"
import type { Executor, ExecutorOptions } from "@agentgov/api"
import { activeTraceparent, appendBatchHook, type BatchHook, traceparentOf } from "@agentgov/domain"
import { SpanKind, SpanStatusCode, trace } from "@opentelemetry/api"
import type { Metrics, OperationRecorder, Surface } from "./metrics.ts"
import { extractFrom, inSpan, tracer } from "./tracing.ts"

/**
 * Where metrics and traces attach (issue 34), all at the edges: the HTTP handler, the executor's
 * operation boundary, and the audit appender's batch hook. `undefined` metrics and `tracing: false`
 * return the originals untouched, so a server with both off runs exactly the code it ran before.
 */
export interface Instruments {
  readonly metrics: Metrics | undefined
  readonly tracing: boolean
}

type Op = Parameters<Executor["run"]>[0]

const surfaceOf = (url: string | undefined): Surface =>
  url === undefined
    ? "other"
    : url.startsWith("/api/v1/") || url.startsWith("/v1/")
      ? "rest"
      : url.startsWith("/trpc")
        ? "trpc"
        : "other"

type Handler = (req: IncomingMessage, res: ServerResponse) => Promise<void>

/** Runs `f` now when the answer is written (or the connection gone), else once it is. */
const whenAnswered = (res: ServerResponse, f: () => void): void => {
  if (res.writableEnded || res.closed) f()
  else res.once("close", f)
}

/** The request edge: a server span (continuing an incoming traceparent) and the request metrics. */
export const instrumentHandler = (handle: Handler, { metrics, tracing }: Instruments): Handler => {
  // The handler's own promise is returned: recording hangs off it rather than wrapping it in another async frame.
  const measured: Handler = metrics
    ? (req, res) => {
        const t0 = performance.now()
        // 499 (nginx's "client closed request"): the connection ended before an answer was begun.
        const done = () =>
          metrics.request(
            surfaceOf(req.url),
            req.method ?? "GET",
            res.headersSent ? res.statusCode : 499,
            (performance.now() - t0) / 1000,
          )
        // Recorded once the answer is written: tRPC's handler settles before it writes, and a handler that throws
        // is answered (500) by the server after it settled. Most REST answers are written by then.
        const answered = () => whenAnswered(res, done)
        const handled = handle(req, res)
        handled.then(answered, answered)
        return handled
      }
    : handle
  if (!tracing) return measured
  return (req, res) =>
    tracer.startActiveSpan(
      `${req.method} ${surfaceOf(req.url)}`,
      { kind: SpanKind.SERVER, attributes: { "http.request.method": req.method ?? "" } },
      extractFrom(req.headers),
      (span) =>
        measured(req, res).then(
          () =>
            whenAnswered(res, () => {
              span.setAttribute("http.response.status_code", res.statusCode)
              if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR })
              span.end()
            }),
          (e) => {
            span.setStatus({ code: SpanStatusCode.ERROR, message: String(e) })
            span.end()
            throw e
          },
        ),
    )
}

/** The decision of a guard call from its rendered idempotent answer (`"decision":"allow"`). */
const DECISION = /"decision":"([a-z_]+)"/
const GUARD_OPS = new Set(["guard.evaluate", "policies.evaluate"])

/**
 * The operation metrics, as the executor's `observe` option (ExecutorOptions): recorded in line as each operation
 * settles, so a server with metrics on and tracing off runs no wrapper around its operations.
 */
export const operationObserver = (metrics: Metrics | undefined): ExecutorOptions["observe"] => {
  if (!metrics) return undefined
  const recorders = new Map<Op, OperationRecorder>()
  return (op, result, t0) => {
    let r = recorders.get(op)
    if (r === undefined) {
      r = metrics.operation(op.name)
      recorders.set(op, r)
    }
    r.done(result.ok ? "ok" : result.error.code, (performance.now() - t0) / 1000)
    if (!result.ok) return
    const value = result.value as Record<string, unknown>
    if (GUARD_OPS.has(op.name)) {
      if (typeof value.decision === "string") metrics.guardDecision(value.decision)
      else if (value.replayed === false && typeof value.body === "string") {
        const m = DECISION.exec(value.body)
        if (m) metrics.guardDecision(m[1]!)
      }
    } else if (op.name === "events.verify" && typeof value.valid === "boolean")
      metrics.verification(value.valid ? "valid" : "invalid", "api")
  }
}

/**
 * The operation boundary's spans (the domain's spans nest under each); the executor records the metrics itself
 * (`operationObserver`), so without tracing the executor is returned as it is.
 */
export const instrumentExecutor = (executor: Executor, { tracing }: Instruments): Executor => {
  if (!tracing) return executor
  const traced = <A extends { ok: boolean }>(op: Op, f: () => Promise<A>): Promise<A> =>
    inSpan(`operation ${op.name}`, { "agentgov.operation": op.name }, (span) =>
      f().then((r) => {
        if (!r.ok) span.setStatus({ code: SpanStatusCode.ERROR })
        return r
      }),
    )
  const run: Executor["run"] = (op, input, actor, requestId) =>
    traced(op, () => executor.run(op, input, actor, requestId))
  const runIdempotent: Executor["runIdempotent"] = (op, input, actor, key, fingerprint, respond, requestId) =>
    traced(op, () => executor.runIdempotent(op, input, actor, key, fingerprint, respond, requestId))
  return { ...executor, run, runIdempotent }
}

/**
 * The appender's batch boundary: a span per group commit and the batch metrics. Installed once per
 * process (the appender is per runtime, the hook is not); `uninstall` clears it when it is still ours.
 */
export const installBatchHook = ({ metrics, tracing }: Instruments): (() => void) => {
  if (!metrics && !tracing) return () => {}
  const hook: BatchHook = (appends, events, write) => {
    const t0 = performance.now()
    const timed = () => write().finally(() => metrics?.appendBatch(appends, events, (performance.now() - t0) / 1000))
    return tracing
      ? inSpan("audit.group_commit", { "agentgov.batch.appends": appends, "agentgov.batch.events": events }, timed)
      : timed()
  }
  appendBatchHook.current = hook
  // The caller's span, stored with the deliveries its events queue (their attempts are traced under it).
  const source = () => {
    const span = trace.getActiveSpan()
    if (span === undefined) return undefined
    const { traceId, spanId, traceFlags } = span.spanContext()
    return traceparentOf({ traceId, spanId, sampled: (traceFlags & 1) === 1 })
  }
  if (tracing) activeTraceparent.current = source
  return () => {
    if (appendBatchHook.current === hook) appendBatchHook.current = undefined
    if (activeTraceparent.current === source) activeTraceparent.current = undefined
  }
}
