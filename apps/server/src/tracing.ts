import {
  type Context,
  context,
  type Span as OtelSpan,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
} from "@opentelemetry/api"
import { Effect, Layer, Option, Tracer } from "effect"

/**
 * OpenTelemetry (issue 34). The code speaks only `@opentelemetry/api`; the SDK and its OTLP/HTTP
 * exporter are loaded and registered by `startTracing` when the standard variables ask for it
 * (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set, OTEL_SDK_DISABLED not
 * true, OTEL_TRACES_EXPORTER not `none`). Otherwise nothing is registered: the API's tracer is the
 * no-op one, and the server installs none of its tracing wrappers, so tracing costs nothing.
 */
export const tracer = trace.getTracer("agentgov")

export interface Tracing {
  readonly forceFlush: () => Promise<void>
  readonly shutdown: () => Promise<void>
}

/** Whether the OTEL_* variables switch tracing on. */
export const tracingWanted = (env: Record<string, string | undefined> = process.env): boolean =>
  (env.OTEL_SDK_DISABLED ?? "").toLowerCase() !== "true" &&
  (env.OTEL_TRACES_EXPORTER ?? "otlp").toLowerCase() !== "none" &&
  Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)

let started: Promise<Tracing> | undefined

/** Registers the SDK once per process (OTLP over HTTP, batched); later calls share it. */
export const startTracing = (env: Record<string, string | undefined> = process.env): Promise<Tracing> => {
  started ??= (async () => {
    const [{ TracerProvider, BatchSpanProcessor }, { OTLPTraceExporter }, { AsyncLocalStorageContextManager }, core] =
      await Promise.all([
        import("@opentelemetry/sdk-trace"),
        import("@opentelemetry/exporter-trace-otlp-http"),
        import("@opentelemetry/context-async-hooks"),
        import("@opentelemetry/core"),
      ])
    const { resourceFromAttributes } = await import("@opentelemetry/resources")
    const provider = new TracerProvider({
      resource: resourceFromAttributes({ "service.name": env.OTEL_SERVICE_NAME || "agentgov" }),
      spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter() })],
    })
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
    propagation.setGlobalPropagator(new core.W3CTraceContextPropagator())
    trace.setGlobalTracerProvider(provider)
    return { forceFlush: () => provider.forceFlush(), shutdown: () => provider.shutdown() }
  })()
  return started
}

const hrTime = (nanos: bigint): [number, number] => [Number(nanos / 1_000_000_000n), Number(nanos % 1_000_000_000n)]

const KINDS: Record<Tracer.SpanKind, SpanKind> = {
  internal: SpanKind.INTERNAL,
  server: SpanKind.SERVER,
  client: SpanKind.CLIENT,
  producer: SpanKind.PRODUCER,
  consumer: SpanKind.CONSUMER,
}

const attributeValue = (v: unknown): string | number | boolean =>
  typeof v === "string" || typeof v === "number" || typeof v === "boolean" ? v : String(v)

/** An Effect span that is an OpenTelemetry span: the domain's `Effect.fn` verbs and effect/sql's queries. */
class BridgedSpan implements Tracer.Span {
  readonly _tag = "Span"
  readonly spanId: string
  readonly traceId: string
  readonly sampled: boolean
  readonly attributes = new Map<string, unknown>()
  readonly links: Array<Tracer.SpanLink> = []
  status: Tracer.SpanStatus
  readonly otel: OtelSpan
  readonly name: string
  readonly parent: Option.Option<Tracer.AnySpan>
  readonly annotations: Tracer.Span["annotations"]
  readonly kind: Tracer.SpanKind
  constructor(
    otel: OtelSpan,
    name: string,
    parent: Option.Option<Tracer.AnySpan>,
    annotations: Tracer.Span["annotations"],
    kind: Tracer.SpanKind,
    startTime: bigint,
  ) {
    this.otel = otel
    this.name = name
    this.parent = parent
    this.annotations = annotations
    this.kind = kind
    const sc = otel.spanContext()
    this.spanId = sc.spanId
    this.traceId = sc.traceId
    this.sampled = (sc.traceFlags & 1) === 1
    this.status = { _tag: "Started", startTime }
  }
  end(endTime: bigint, exit: Parameters<Tracer.Span["end"]>[1]) {
    this.status = { _tag: "Ended", startTime: this.status.startTime, endTime, exit }
    if (exit._tag === "Failure") this.otel.setStatus({ code: SpanStatusCode.ERROR })
    this.otel.end(hrTime(endTime))
  }
  attribute(key: string, value: unknown) {
    this.attributes.set(key, value)
    this.otel.setAttribute(key, attributeValue(value))
  }
  event(name: string, startTime: bigint, attributes?: Record<string, unknown>) {
    this.otel.addEvent(
      name,
      attributes && Object.fromEntries(Object.entries(attributes).map(([k, v]) => [k, attributeValue(v)] as const)),
      hrTime(startTime),
    )
  }
  addLinks(links: ReadonlyArray<Tracer.SpanLink>) {
    this.links.push(...links)
  }
}

const parentContext = (parent: Option.Option<Tracer.AnySpan>, root: boolean): Context => {
  if (root) return ROOT_CONTEXT
  if (Option.isNone(parent)) return context.active()
  const p = parent.value
  if (p instanceof BridgedSpan) return trace.setSpan(context.active(), p.otel)
  return trace.setSpanContext(context.active(), {
    traceId: p.traceId,
    spanId: p.spanId,
    traceFlags: p.sampled ? 1 : 0,
    isRemote: true,
  })
}

/** Effect's tracer, writing OpenTelemetry spans: provided to the runtime only when tracing is on. */
export const effectTracerLayer = Layer.succeed(
  Tracer.Tracer,
  Tracer.make({
    span: (options) => {
      const otel = tracer.startSpan(
        options.name,
        { kind: KINDS[options.kind], startTime: hrTime(options.startTime) },
        parentContext(options.parent, options.root),
      )
      return new BridgedSpan(otel, options.name, options.parent, options.annotations, options.kind, options.startTime)
    },
  }),
)

/** Runs `f` in a new active span that ends when its promise settles (status ERROR when it rejects). */
export const inSpan = <A>(
  name: string,
  attributes: Record<string, string | number | boolean>,
  f: (span: OtelSpan) => Promise<A>,
  options: { readonly kind?: SpanKind; readonly parent?: Context } = {},
): Promise<A> =>
  tracer.startActiveSpan(
    name,
    { kind: options.kind ?? SpanKind.INTERNAL, attributes },
    options.parent ?? context.active(),
    (span) =>
      f(span).then(
        (a) => {
          span.end()
          return a
        },
        (e) => {
          span.setStatus({ code: SpanStatusCode.ERROR, message: String(e) })
          span.end()
          throw e
        },
      ),
  )

/**
 * A background poll, not traced: the workers look for work every few hundred milliseconds, and an idle server
 * exported a trace for each look. The work they find is traced on its own (a delivery's attempt, a trust pass).
 */
export const untraced = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withTracerEnabled(effect, false)

/** The W3C trace context of an incoming request (traceparent, tracestate), as a parent for its span. */
export const extractFrom = (headers: Record<string, string | Array<string> | undefined>): Context =>
  propagation.extract(ROOT_CONTEXT, headers)

/** The trace id of the active span, for log lines; undefined when none (always so when tracing is off). */
export const activeTraceId = (): string | undefined => trace.getActiveSpan()?.spanContext().traceId
