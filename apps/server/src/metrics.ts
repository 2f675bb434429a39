import { createHash, timingSafeEqual } from "node:crypto"
import type { IncomingMessage, ServerResponse } from "node:http"
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client"

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
  const requests = new Counter({
    name: "agentgov_http_requests_total",
    help: "HTTP requests answered, by surface, method and status code",
    labelNames: ["surface", "method", "status"] as const,
    registers: [registry],
  })
  const requestSeconds = new Histogram({
    name: "agentgov_http_request_duration_seconds",
    help: "Time to answer an HTTP request (until its handler returned), by surface",
    labelNames: ["surface"] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  })
  const rateLimited = new Counter({
    name: "agentgov_rate_limited_total",
    help: "Requests refused with 429 RATE_LIMITED (D10's limits and the guard's per-workspace queue)",
    labelNames: ["surface"] as const,
    registers: [registry],
  })
  const operations = new Counter({
    name: "agentgov_operations_total",
    help: "Operations run, by operation and outcome (ok, or the error code)",
    labelNames: ["operation", "outcome"] as const,
    registers: [registry],
  })
  const operationSeconds = new Histogram({
    name: "agentgov_operation_duration_seconds",
    help: "Time an operation took, from its input decoded to its result, by operation",
    labelNames: ["operation"] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  })
  const decisions = new Counter({
    name: "agentgov_guard_decisions_total",
    help: "Guard decisions answered, by decision",
    labelNames: ["decision"] as const,
    registers: [registry],
  })
  const appended = new Counter({
    name: "agentgov_events_appended_total",
    help: "Audit events written by the group commit (ingest, the guard; batches attempted); agentgov_audit_chain_events counts every event",
    registers: [registry],
  })
  const batchEvents = new Histogram({
    name: "agentgov_append_batch_events",
    help: "Events per group-commit batch of the audit trail",
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024],
    registers: [registry],
  })
  const batchSeconds = new Histogram({
    name: "agentgov_append_batch_duration_seconds",
    help: "Time to write one group-commit batch",
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  })
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

  // Children bound once per label set: a request costs a Map lookup and two adds, never a label hash.
  const surfaceSeconds = {
    rest: requestSeconds.labels("rest"),
    trpc: requestSeconds.labels("trpc"),
    other: requestSeconds.labels("other"),
  }
  const surfaceLimited = {
    rest: rateLimited.labels("rest"),
    trpc: rateLimited.labels("trpc"),
    other: rateLimited.labels("other"),
  }
  const METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "OTHER"]
  const SURFACES: Record<Surface, number> = { rest: 0, trpc: 1, other: 2 }
  // One number per (surface, method, status): no string is built per request.
  const requestChildren = new Map<number, Counter.Internal>()
  // Bound once per decision (allow, deny, require_approval): a guard call increments, never builds labels.
  const decisionChildren = new Map<string, Counter.Internal>()
  return {
    registry,
    request: (surface, method, status, seconds) => {
      let m = METHODS.indexOf(method)
      if (m < 0) m = METHODS.length - 1
      const key = (status * 8 + m) * 4 + SURFACES[surface]
      let child = requestChildren.get(key)
      if (child === undefined) {
        child = requests.labels(surface, METHODS[m]!, String(status))
        requestChildren.set(key, child)
      }
      child.inc()
      surfaceSeconds[surface].observe(seconds)
      if (status === 429) surfaceLimited[surface].inc()
    },
    operation: (name) => {
      const seconds = operationSeconds.labels(name)
      const outcomes = new Map<string, Counter.Internal>()
      return {
        done: (outcome, s) => {
          let c = outcomes.get(outcome)
          if (c === undefined) {
            c = operations.labels(name, outcome)
            outcomes.set(outcome, c)
          }
          c.inc()
          seconds.observe(s)
        },
      }
    },
    guardDecision: (decision) => {
      let child = decisionChildren.get(decision)
      if (child === undefined) {
        child = decisions.labels(decision)
        decisionChildren.set(decision, child)
      }
      child.inc()
    },
    appendBatch: (_appends, events, seconds) => {
      appended.inc(events)
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
      res.writeHead(405, { allow: "GET", "content-type": "application/json", "x-request-id": requestId })
      return void res.end(
        JSON.stringify({
          ok: false,
          error: { code: "METHOD_NOT_ALLOWED", message: `${req.method} is not allowed on /metrics` },
        }),
      )
    }
    if (expected !== undefined) {
      const auth = req.headers.authorization
      const given = auth?.startsWith("Bearer ") ? auth.slice(7) : undefined
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
