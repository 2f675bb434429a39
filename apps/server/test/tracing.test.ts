/**
 * OpenTelemetry (issue 34): one guard call, continuing the caller's W3C trace context, exported
 * over OTLP/HTTP to a receiver in this test: the request, operation, domain, SQL and group-commit
 * spans with their parent links, and a webhook delivery whose traceparent reaches the receiver.
 */
import { randomBytes } from "node:crypto"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { loadConfig } from "../src/config.ts"
import { startTracing } from "../src/tracing.ts"
import { startTestServer, type TestServer } from "./helpers.ts"
import { eventually, type Receiver, startReceiver } from "./webhooks-support.ts"

interface ExportedSpan {
  readonly name: string
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string
}

/** OTLP/JSON ids are hex; some encoders write base64: read both. */
const hexId = (v: unknown): string => {
  if (typeof v !== "string" || v === "") return ""
  return /^[0-9a-f]+$/i.test(v) ? v.toLowerCase() : Buffer.from(v, "base64").toString("hex")
}

let otlp: Server
const spans: Array<ExportedSpan> = []
let t: TestServer
let hooks: Receiver

beforeAll(async () => {
  otlp = createServer((req, res) => {
    let body = ""
    req.on("data", (c) => (body += c))
    req.on("end", () => {
      // The exporter's default encoding is JSON; it posts to <endpoint>/v1/traces.
      if (req.url === "/v1/traces" && req.headers["content-type"]?.includes("json")) {
        for (const rs of JSON.parse(body).resourceSpans ?? [])
          for (const ss of rs.scopeSpans ?? [])
            for (const s of ss.spans ?? [])
              spans.push({
                name: s.name,
                traceId: hexId(s.traceId),
                spanId: hexId(s.spanId),
                parentSpanId: hexId(s.parentSpanId),
              })
        res.writeHead(200, { "content-type": "application/json" }).end("{}")
      } else res.writeHead(415).end()
    })
  })
  await new Promise<void>((r) => otlp.listen(0, "127.0.0.1", r))
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${(otlp.address() as AddressInfo).port}`
  hooks = await startReceiver()
  // Sweeps and checkpoints every half second: the idle test sees them run.
  t = await startTestServer({
    tracing: true,
    webhookAllowlist: ["127.0.0.1"],
    sweepIntervalMs: 500,
    checkpointIntervalMs: 500,
  })
})
afterAll(async () => {
  await t?.close()
  await hooks?.close()
  await (await startTracing()).shutdown()
  otlp?.close()
  delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT
})

const flushed = async (traceId: string, names: ReadonlyArray<string>) => {
  const tracing = await startTracing()
  return eventually(
    async () => {
      await tracing.forceFlush()
      const mine = spans.filter((s) => s.traceId === traceId)
      return names.every((n) => mine.some((s) => s.name.startsWith(n))) ? mine : undefined
    },
    20_000,
    `spans ${names.join(", ")} of trace ${traceId}`,
  )
}

describe("tracing", () => {
  it("is switched on by the standard OTEL_* variables only", () => {
    expect(loadConfig({}).tracing).toBe(false)
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" }).tracing).toBe(true)
    expect(loadConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://collector:4318/v1/traces" }).tracing).toBe(true)
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_SDK_DISABLED: "true" }).tracing).toBe(false)
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_TRACES_EXPORTER: "none" }).tracing).toBe(
      false,
    )
  })

  it("an endpoint that is not an http(s) URL is refused with the configuration, not left to export nothing", () => {
    for (const name of ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"])
      expect(() => loadConfig({ [name]: "collector:4318" })).toThrow(
        `${name}: expected a URL starting with http:// or https://`,
      )
    // off anyway: not checked
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "nope", OTEL_SDK_DISABLED: "true" }).tracing).toBe(false)
  })

  it("AGENTGOV_TRUST_WORKER other than true or false is refused", () => {
    expect(() => loadConfig({ AGENTGOV_TRUST_WORKER: "nah" })).toThrow(
      'AGENTGOV_TRUST_WORKER="nah": expected true or false',
    )
    expect(loadConfig({ AGENTGOV_TRUST_WORKER: "false" }).trustWorker).toBe(false)
    expect(loadConfig({ AGENTGOV_TRUST_WORKER: "0" }).trustWorker).toBe(false)
    expect(loadConfig({}).trustWorker).toBe(true)
  })

  it("exports nothing while the server is idle (its workers' polls are not traced)", async () => {
    const tracing = await startTracing()
    await tracing.forceFlush()
    const before = spans.length
    // The compliance worker, the sweeps and the checkpointer look every 0.5 s here, the webhook worker every 2 s;
    // a scrape's store probes are not traced either.
    await new Promise((r) => setTimeout(r, 2_500))
    await tracing.forceFlush()
    const idle = spans.slice(before)
    expect(idle.map((s) => s.name)).toEqual([])
  })

  it("exports a guard call as request → operation → domain verb → SQL and the group commit, under the caller's trace", async () => {
    const agent = await t.call("POST", "/api/v1/agents", { body: { name: "traced" } })
    expect(agent.status).toBe(201)
    // What the SDK sends when its caller has an active span (AgentGovOptions.traceContext).
    const traceId = randomBytes(16).toString("hex")
    const callerSpan = randomBytes(8).toString("hex")
    const guard = await t.call("POST", "/api/v1/guard", {
      body: { agentId: agent.body.data.id, action: "db.read" },
      headers: { traceparent: `00-${traceId}-${callerSpan}-01` },
    })
    expect(guard.status).toBe(200)

    const mine = await flushed(traceId, ["POST rest", "operation guard.evaluate", "audit.group_commit"])
    const byId = new Map(mine.map((s) => [s.spanId, s]))
    const one = (name: string) => {
      const found = mine.filter((s) => s.name === name)
      expect(found, `one span named ${name}`).toHaveLength(1)
      return found[0]!
    }
    const request = one("POST rest")
    expect(request.parentSpanId).toBe(callerSpan)
    const operation = one("operation guard.evaluate")
    expect(operation.parentSpanId).toBe(request.spanId)
    /** Whether `span` descends from `ancestor` through exported parent links. */
    const under = (span: ExportedSpan, ancestor: ExportedSpan): boolean => {
      for (let p = byId.get(span.parentSpanId); p; p = byId.get(p.parentSpanId)) if (p === ancestor) return true
      return false
    }
    expect(under(one("audit.group_commit"), operation)).toBe(true)
    // Whichever path the guard took (the runtime, or its fast handler once built), every other span of the
    // trace hangs under the operation: none is orphaned, none starts a trace of its own.
    for (const s of mine) if (s !== request) expect(under(s, request), `${s.name} under the request`).toBe(true)

    // A runtime operation: the domain verb (Effect.fn) and its SQL statements nest under it.
    const trace2 = randomBytes(16).toString("hex")
    const listed = await t.call("GET", "/api/v1/agents", {
      headers: { traceparent: `00-${trace2}-${randomBytes(8).toString("hex")}-01` },
    })
    expect(listed.status).toBe(200)
    const second = await flushed(trace2, ["operation agents.list", "AgentService.list"])
    const verb = second.find((s) => s.name === "AgentService.list")!
    const op2 = second.find((s) => s.name === "operation agents.list")!
    expect(verb.parentSpanId).toBe(op2.spanId)
    // effect/sql names a statement's span after its database system
    expect(
      second.filter((s) => s.name === "postgresql" && s.parentSpanId === verb.spanId).length,
      "SQL spans under the domain verb",
    ).toBeGreaterThan(0)
  })

  it("sends each webhook under the trace of the call that appended its event, with the delivery span's traceparent", async () => {
    const created = await t.call("POST", "/api/v1/webhooks", {
      body: { url: `${hooks.url}?w=traced`, events: ["traced.thing"] },
    })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    // The caller's trace (what the SDK sends) reaches the receiver through the queue, however late the attempt.
    const traceId = randomBytes(16).toString("hex")
    const ingest = await t.call("POST", "/api/v1/events/ingest", {
      body: { events: [{ type: "traced.thing", data: {} }] },
      headers: { traceparent: `00-${traceId}-${randomBytes(8).toString("hex")}-01` },
    })
    expect(ingest.status, JSON.stringify(ingest.body)).toBe(201)
    await hooks.waitFor((all) => all.some((r) => r.url === "/hook?w=traced"))
    const got = hooks.received.find((r) => r.url === "/hook?w=traced")!
    const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$/.exec(String(got.headers.traceparent))
    expect(m, `traceparent ${got.headers.traceparent}`).not.toBeNull()
    expect(m![1], "the webhook carries the caller's trace").toBe(traceId)
    const mine = await flushed(traceId, ["POST rest", "operation events.ingest", "webhook.delivery"])
    const delivery = mine.find((s) => s.name === "webhook.delivery")!
    expect(delivery.spanId).toBe(m![2])
    // The delivery hangs under the ingest call's operation, through the span that appended its event.
    const byId = new Map(mine.map((s) => [s.spanId, s]))
    const operation = mine.find((s) => s.name === "operation events.ingest")!
    let p = byId.get(delivery.parentSpanId)
    while (p && p !== operation) p = byId.get(p.parentSpanId)
    expect(
      p,
      `the delivery's ancestors: ${mine.map((s) => `${s.name}:${s.spanId}<-${s.parentSpanId}`).join(" ")}`,
    ).toBe(operation)

    // A delivery queued by an event appended in a change's own transaction (agents.create's agent.registered).
    const agentsHook = await t.call("POST", "/api/v1/webhooks", {
      body: { url: `${hooks.url}?w=agents`, events: ["agent.registered"] },
    })
    expect(agentsHook.status).toBe(201)
    const trace2 = randomBytes(16).toString("hex")
    const agent = await t.call("POST", "/api/v1/agents", {
      body: { name: "traced-delivery" },
      headers: { traceparent: `00-${trace2}-${randomBytes(8).toString("hex")}-01` },
    })
    expect(agent.status).toBe(201)
    await hooks.waitFor((all) => all.some((r) => r.url === "/hook?w=agents"))
    const second = hooks.received.find((r) => r.url === "/hook?w=agents")!
    expect(String(second.headers.traceparent)).toMatch(new RegExp(`^00-${trace2}-`))
  })
})
