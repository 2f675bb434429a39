import { Effect, Option } from "effect"
import type * as Tracer from "effect/Tracer"

/**
 * Where an appended event's trace comes from (issue 34): set by the server when tracing is on, to read the
 * active OpenTelemetry span of a caller outside the Effect runtime (the guard's fast path). Unset (tracing off)
 * no append carries a trace, and nothing below runs.
 */
export const activeTraceparent: { current: (() => string | undefined) | undefined } = { current: undefined }

/** A span's W3C traceparent (version 00). */
export const traceparentOf = (span: { readonly traceId: string; readonly spanId: string; readonly sampled: boolean }) =>
  `00-${span.traceId}-${span.spanId}-${span.sampled ? "01" : "00"}`

/**
 * The caller's trace as a traceparent, to be stored with the deliveries its events queue: Effect's current span
 * (the domain's verbs are OpenTelemetry spans when tracing is on), else the active OpenTelemetry span.
 */
export const callerTraceparent: Effect.Effect<string | undefined> = Effect.suspend(() => {
  const active = activeTraceparent.current
  if (active === undefined) return Effect.undefined
  return Effect.option(Effect.currentParentSpan).pipe(
    Effect.map((span) => (Option.isSome(span) ? traceparentOf(span.value as Tracer.AnySpan) : active())),
  )
})
