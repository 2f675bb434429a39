import { createHash, timingSafeEqual } from "node:crypto"
import type { IncomingMessage, ServerResponse } from "node:http"
import { bearerOfRequest } from "@agentgov/api"
import { Counter, collectDefaultMetrics, Gauge, type Metric, Registry } from "prom-client"

/**
 * The service's Prometheus metrics (issue 34). Off unless AGENTGOV_METRICS_TOKEN or
 * AGENTGOV_METRICS_PORT is set: then `startServer` creates them once per process and every hook
 * below is live; when off, no hook is installed and nothing here runs per request.
 *
 * Label cardinality is bounded by construction: operation names come from the catalog, outcomes
 * are error codes or `ok`, statuses are HTTP status codes, surfaces and results are fixed words.
 * No workspace, agent, key or request id is ever a label.
 */
export interface Metrics {
  readonly registry: Registry
  /** One HTTP request, after its handler returned. */
  readonly request: (surface: Surface, method: string, status: number, seconds: number) => void
  /** A label-bound recorder for one operation, cached by the caller. */
  readonly operation: (name: string) => OperationRecorder
  readonly guardDecision: (decision: string) => void
  /** One group-commit batch of the audit trail: how many appends and events it carried. */
  readonly appendBatch: (appends: number, events: number, seconds: number) => void
  readonly verification: (result: "valid" | "invalid", trigger: "scheduled" | "api") => void
  readonly webhookAttempt: (outcome: "delivered" | "retry" | "failed") => void
  /** Probes read at scrape time (the latest server's store): checkpoint age and webhook queue depth. */
  readonly probe: (probe: StoreProbe) => () => void
}

export type Surface = "rest" | "trpc" | "other"

export interface OperationRecorder {
  readonly done: (outcome: string, seconds: number) => void
}

export interface StoreProbe {
  /** Seconds since the newest checkpoint of the chains that have one; undefined when none has. */
  readonly checkpointAgeSeconds: () => Promise<number | undefined>
  readonly webhookQueueDepth: () => Promise<number>
  /** Events in every workspace's chain together (the sum of the chain heads' sequences). */
  readonly chainEvents: () => Promise<number>
}

/**
 * The request path's recorders (issue 34's metrics-on benchmark). prom-client's own children hash their label
 * set on every `inc` and `observe` (`labels()` binds the values, not the series: a label object, a key string
 * and a validation per call), so counting there cost the guard a few µs of CPU per request. Here a request adds
 * to plain numbers bound once per label set, and prom-client is told at scrape time: counters through their
 * `collect` callback, histograms by a metric of our own that the registry formats like its own.
 */
interface Tally {
  pending: number
}

const deferredCounter = <L extends string>(config: {
  readonly name: string
  readonly help: string
  readonly labelNames?: ReadonlyArray<L>
  readonly registers: Array<Registry>
}) => {
  const tallies: Array<{ readonly values: ReadonlyArray<string>; tally: Tally; child?: Counter.Internal }> = []
  const counter: Counter<L> = new Counter<L>({
    ...config,
    labelNames: config.labelNames ?? [],
    collect() {
      for (const t of tallies) {
        const n = t.tally.pending
        if (n === 0) continue
        t.tally.pending = 0
        if (t.values.length === 0) counter.inc(n)
        else {
          t.child ??= counter.labels(...t.values)
          t.child.inc(n)
        }
      }
    },
  })
  return {
    counter,
    /** A tally for one label set (values in `labelNames` order): bind once, add per event. */
    bind: (...values: ReadonlyArray<string>): Tally => {
      const tally: Tally = { pending: 0 }
      tallies.push({ values, tally })
      return tally
    },
  }
}

/** One histogram series: bucket counts (the last one is +Inf only), sum and count. */
export class HistogramCell {
  readonly labels: Readonly<Record<string, string>>
  readonly counts: Float64Array
  sum = 0
  count = 0
  private readonly bounds: ReadonlyArray<number>

  constructor(labels: Readonly<Record<string, string>>, bounds: ReadonlyArray<number>) {
    this.labels = labels
    this.bounds = bounds
    this.counts = new Float64Array(bounds.length + 1)
  }

  observe(value: number): void {
    const bounds = this.bounds
    let i = 0
    while (i < bounds.length && value > bounds[i]!) i++
    this.counts[i]!++
    this.sum += value
    this.count++
  }
}

/**
 * A Prometheus histogram whose series are {@link HistogramCell}s: observing is a bucket search and three adds.
 * The registry reads it through `get()`, as it reads prom-client's (`_bucket` with `le`, `_sum`, `_count`).
 */
export class FastHistogram {
  readonly type = "histogram"
  readonly aggregator = "sum"
  readonly name: string
  readonly help: string
  private readonly labelNames: ReadonlyArray<string>
  private readonly bounds: ReadonlyArray<number>
  private readonly cells = new Map<string, HistogramCell>()

  constructor(config: {
    readonly name: string
    readonly help: string
    readonly labelNames?: ReadonlyArray<string>
    readonly buckets: ReadonlyArray<number>
    readonly registers: Array<Registry>
  }) {
    this.name = config.name
    this.help = config.help
    this.labelNames = config.labelNames ?? []
    this.bounds = [...config.buckets].sort((a, b) => a - b)
    for (const r of config.registers) r.registerMetric(this as unknown as Metric)
  }

  /** The series of one label set (values in `labelNames` order), the same cell for the same values. */
  bind(...values: ReadonlyArray<string>): HistogramCell {
    if (values.length !== this.labelNames.length)
      throw new Error(`${this.name}: ${this.labelNames.length} label value(s) expected, got ${values.length}`)
    const key = values.join("\u0000")
    let cell = this.cells.get(key)
    if (cell === undefined) {
      cell = new HistogramCell(Object.fromEntries(this.labelNames.map((n, i) => [n, values[i]!])), this.bounds)
      this.cells.set(key, cell)
    }
    return cell
  }

  async get() {
    const values: Array<{ labels: Record<string, string | number>; value: number; metricName: string }> = []
    for (const cell of this.cells.values()) {
      if (cell.count === 0) continue
      let cumulative = 0
      for (let i = 0; i < this.bounds.length; i++) {
        cumulative += cell.counts[i]!
        values.push({
          labels: { ...cell.labels, le: this.bounds[i]! },
          value: cumulative,
          metricName: `${this.name}_bucket`,
        })
      }
      values.push({ labels: { ...cell.labels, le: "+Inf" }, value: cell.count, metricName: `${this.name}_bucket` })
      values.push({ labels: { ...cell.labels }, value: cell.sum, metricName: `${this.name}_sum` })
      values.push({ labels: { ...cell.labels }, value: cell.count, metricName: `${this.name}_count` })
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator }
  }

  reset(): void {
    for (const cell of this.cells.values()) {
      cell.counts.fill(0)
      cell.sum = 0
      cell.count = 0
    }
  }
}

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

let instance: Metrics | undefined

/** The process's metrics, created on first use (prom-client's default metrics register once per process). */
export const processMetrics = (): Metrics => {
  instance ??= makeMetrics()
  return instance
}

const makeMetrics = (): Metrics => {
  const registry = new Registry()
  collectDefaultMetrics({ register: registry, prefix: "agentgov_", eventLoopMonitoringPrecision: 20 })
  const requests = deferredCounter({
    name: "agentgov_http_requests_total",
    help: "HTTP requests answered, by surface, method and status code",
    labelNames: ["surface", "method", "status"] as const,
    registers: [registry],
  })
  const requestSeconds = new FastHistogram({
    name: "agentgov_http_request_duration_seconds",
    help: "Time to answer an HTTP request (until its handler returned), by surface",
    labelNames: ["surface"],
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  })
  const rateLimited = deferredCounter({
    name: "agentgov_rate_limited_total",
    help: "Requests refused with 429 RATE_LIMITED (D10's limits and the guard's per-workspace queue)",
    labelNames: ["surface"] as const,
    registers: [registry],
  })
  const operations = deferredCounter({
    name: "agentgov_operations_total",
    help: "Operations run, by operation and outcome (ok, or the error code)",
    labelNames: ["operation", "outcome"] as const,
    registers: [registry],
  })
  const operationSeconds = new FastHistogram({
    name: "agentgov_operation_duration_seconds",
    help: "Time an operation took, from its input decoded to its result, by operation",
    labelNames: ["operation"],
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  })
  const decisions = deferredCounter({
    name: "agentgov_guard_decisions_total",
    help: "Guard decisions answered, by decision",
    labelNames: ["decision"] as const,
    registers: [registry],
  })
  const appended = deferredCounter({
    name: "agentgov_events_appended_total",
    help: "Audit events written by the group commit (ingest, the guard; batches attempted); agentgov_audit_chain_events counts every event",
    registers: [registry],
  }).bind()
  const batchEvents = new FastHistogram({
    name: "agentgov_append_batch_events",
    help: "Events per group-commit batch of the audit trail",
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024],
    registers: [registry],
  }).bind()
  const batchSeconds = new FastHistogram({
    name: "agentgov_append_batch_duration_seconds",
    help: "Time to write one group-commit batch",
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  }).bind()
  const verifications = new Counter({
    name: "agentgov_chain_verifications_total",
    help: "Chain verifications, by result (valid, invalid) and trigger (scheduled, api)",
    labelNames: ["result", "trigger"] as const,
    registers: [registry],
  })
  const webhookAttempts = new Counter({
    name: "agentgov_webhook_attempts_total",
    help: "Webhook delivery attempts, by outcome (delivered, retry, failed)",
    labelNames: ["outcome"] as const,
    registers: [registry],
  })
  let probe: StoreProbe | undefined
  new Gauge({
    name: "agentgov_checkpoint_age_seconds",
    help: "Seconds since the newest signed checkpoint (absent when no chain has one)",
    registers: [registry],
    async collect() {
      const age = probe ? await probe.checkpointAgeSeconds().catch(() => undefined) : undefined
      if (age === undefined) this.reset()
      else this.set(age)
    },
  })
  new Gauge({
    name: "agentgov_audit_chain_events",
    help: "Events in all audit chains together, however they were appended (read at scrape); rate() of it is the append rate",
    registers: [registry],
    async collect() {
      if (probe) this.set(await probe.chainEvents().catch(() => Number.NaN))
    },
  })
  new Gauge({
    name: "agentgov_webhook_queue_depth",
    help: "Webhook deliveries waiting to be sent (pending)",
    registers: [registry],
    async collect() {
      if (probe) this.set(await probe.webhookQueueDepth().catch(() => Number.NaN))
    },
  })

  // Bound once per label set: a request adds to numbers, never builds a label object or key string.
  const surfaceSeconds = {
    rest: requestSeconds.bind("rest"),
    trpc: requestSeconds.bind("trpc"),
    other: requestSeconds.bind("other"),
  }
  const surfaceLimited = {
    rest: rateLimited.bind("rest"),
    trpc: rateLimited.bind("trpc"),
    other: rateLimited.bind("other"),
  }
  const METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "OTHER"]
  const SURFACES: Record<Surface, number> = { rest: 0, trpc: 1, other: 2 }
  // One number per (surface, method, status): no string is built per request.
  const requestTallies = new Map<number, Tally>()
  // Bound once per decision (allow, deny, require_approval).
  const decisionTallies = new Map<string, Tally>()
  return {
    registry,
    request: (surface, method, status, seconds) => {
      let m = METHODS.indexOf(method)
      if (m < 0) m = METHODS.length - 1
      const key = (status * 8 + m) * 4 + SURFACES[surface]
      let tally = requestTallies.get(key)
      if (tally === undefined) {
        tally = requests.bind(surface, METHODS[m]!, String(status))
        requestTallies.set(key, tally)
      }
      tally.pending++
      surfaceSeconds[surface].observe(seconds)
      if (status === 429) surfaceLimited[surface].pending++
    },
    operation: (name) => {
      const seconds = operationSeconds.bind(name)
      const outcomes = new Map<string, Tally>()
      return {
        done: (outcome, s) => {
          let tally = outcomes.get(outcome)
          if (tally === undefined) {
            tally = operations.bind(name, outcome)
            outcomes.set(outcome, tally)
          }
          tally.pending++
          seconds.observe(s)
        },
      }
    },
    guardDecision: (decision) => {
      let tally = decisionTallies.get(decision)
      if (tally === undefined) {
        tally = decisions.bind(decision)
        decisionTallies.set(decision, tally)
      }
      tally.pending++
    },
    appendBatch: (_appends, events, seconds) => {
      appended.pending += events
      batchEvents.observe(events)
      batchSeconds.observe(seconds)
    },
    verification: (result, trigger) => verifications.labels(result, trigger).inc(),
    webhookAttempt: (outcome) => webhookAttempts.labels(outcome).inc(),
    probe: (p) => {
      probe = p
      return () => {
        if (probe === p) probe = undefined
      }
    },
  }
}

const digest = (s: string) => createHash("sha256").update(s).digest()

/**
 * GET /metrics in Prometheus text format. With a token, only `Authorization: Bearer <token>` is
 * answered (compared in constant time); anything else is a 401 that says nothing about the metrics.
 */
export const makeMetricsHandler = (metrics: Metrics, token: string | undefined) => {
  const expected = token === undefined ? undefined : digest(token)
  return async (req: IncomingMessage, res: ServerResponse, requestId: string): Promise<void> => {
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { allow: "GET, HEAD", "content-type": "application/json", "x-request-id": requestId })
      return void res.end(
        JSON.stringify({
          ok: false,
          error: { code: "METHOD_NOT_ALLOWED", message: `${req.method} is not allowed on /metrics` },
        }),
      )
    }
    if (expected !== undefined) {
      // The scheme is case-insensitive (RFC 9110 11.1), and several Authorization headers are refused, as on the API.
      const given = bearerOfRequest(req)
      if (given === undefined || !timingSafeEqual(digest(given), expected)) {
        res.writeHead(401, {
          "content-type": "application/json",
          "www-authenticate": 'Bearer realm="metrics"',
          "x-request-id": requestId,
        })
        return void res.end(
          JSON.stringify({
            ok: false,
            error: { code: "UNAUTHORIZED", message: "send Authorization: Bearer <AGENTGOV_METRICS_TOKEN>" },
          }),
        )
      }
    }
    const body = await metrics.registry.metrics()
    res.writeHead(200, { "content-type": metrics.registry.contentType, "x-request-id": requestId })
    res.end(req.method === "HEAD" ? undefined : body)
  }
}
