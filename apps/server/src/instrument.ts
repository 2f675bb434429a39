import type { IncomingMessage, ServerResponse } from "node:http"
import type { Executor } from "@agentgov/api"
import { appendBatchHook, type BatchHook } from "@agentgov/domain"
import { SpanKind, SpanStatusCode } from "@opentelemetry/api"
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

/** The request edge: a server span (continuing an incoming traceparent) and the request metrics. */
export const instrumentHandler = (handle: Handler, { metrics, tracing }: Instruments): Handler => {
  const measured: Handler = metrics
    ? async (req, res) => {
        const t0 = performance.now()
        try {
          await handle(req, res)
        } finally {
          metrics.request(surfaceOf(req.url), req.method ?? "GET", res.statusCode, (performance.now() - t0) / 1000)
        }
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
          () => {
            span.setAttribute("http.response.status_code", res.statusCode)
            if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR })
            span.end()
          },
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

/** The operation boundary: a span per operation (the domain's spans nest under it) and its metrics. */
export const instrumentExecutor = (executor: Executor, { metrics, tracing }: Instruments): Executor => {
  if (!metrics && !tracing) return executor
  const recorders = new Map<Op, OperationRecorder>()
  const recorderOf = (op: Op) => {
    let r = recorders.get(op)
    if (r === undefined) {
      r = metrics!.operation(op.name)
      recorders.set(op, r)
    }
    return r
  }
  const observe = (op: Op, result: { ok: boolean; value?: unknown; error?: { code: string } }, t0: number) => {
    if (!metrics) return
    recorderOf(op).done(result.ok ? "ok" : result.error!.code, (performance.now() - t0) / 1000)
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
  const traced = <A extends { ok: boolean }>(op: Op, f: () => Promise<A>): Promise<A> =>
    inSpan(`operation ${op.name}`, { "agentgov.operation": op.name }, (span) =>
      f().then((r) => {
        if (!r.ok) span.setStatus({ code: SpanStatusCode.ERROR })
        return r
      }),
    )
  const run: Executor["run"] = tracing
    ? (op, input, actor, requestId) => {
        const t0 = performance.now()
        return traced(op, () => executor.run(op, input, actor, requestId)).then((r) => {
          observe(op, r as never, t0)
          return r
        })
      }
    : async (op, input, actor, requestId) => {
        // Metrics only: no closure, one timestamp and the recorder's adds.
        const t0 = performance.now()
        const r = await executor.run(op, input, actor, requestId)
        observe(op, r as never, t0)
        return r
      }
  const runIdempotent: Executor["runIdempotent"] = tracing
    ? (op, input, actor, key, fingerprint, respond, requestId) => {
        const t0 = performance.now()
        return traced(op, () => executor.runIdempotent(op, input, actor, key, fingerprint, respond, requestId)).then(
          (r) => {
            observe(op, r as never, t0)
            return r
          },
        )
      }
    : async (op, input, actor, key, fingerprint, respond, requestId) => {
        const t0 = performance.now()
        const r = await executor.runIdempotent(op, input, actor, key, fingerprint, respond, requestId)
        observe(op, r as never, t0)
        return r
      }
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
  return () => {
    if (appendBatchHook.current === hook) appendBatchHook.current = undefined
  }
}
