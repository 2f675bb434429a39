/**
 * GET /metrics (issue 34): Prometheus text format that a Prometheus parser reads, counters that move
 * as the test acts, a bearer token or a port of its own, and no id in any label.
 */
import { randomBytes } from "node:crypto"
// @ts-expect-error: the parser ships no types
import parsePrometheusTextFormat from "parse-prometheus-text-format"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { loadConfig } from "../src/config.ts"
import { startTestServer, type TestServer, withAuthorizations } from "./helpers.ts"

interface Family {
  readonly name: string
  readonly type: string
  readonly metrics: ReadonlyArray<{ labels?: Record<string, string>; value?: string; count?: string }>
}

const TOKEN = randomBytes(24).toString("hex")
let t: TestServer

const scrape = async (url = `${t.url}/metrics`, token: string | null = TOKEN) => {
  const res = await fetch(url, token ? { headers: { authorization: `Bearer ${token}` } } : {})
  const text = await res.text()
  return { res, text, families: res.status === 200 ? (parsePrometheusTextFormat(text) as Array<Family>) : [] }
}
const family = (families: ReadonlyArray<Family>, name: string) => {
  const f = families.find((x) => x.name === name)
  if (!f) throw new Error(`no metric family ${name}`)
  return f
}
const sum = (f: Family, labels: Record<string, string> = {}) =>
  f.metrics
    .filter((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v))
    .reduce((n, m) => n + Number(m.value ?? m.count ?? 0), 0)

beforeAll(async () => {
  t = await startTestServer({ metrics: { token: TOKEN, port: undefined, host: "127.0.0.1" } })
})
afterAll(() => t?.close())

describe("GET /metrics", () => {
  it("answers only the metrics token, in constant-time comparison, with a 401 envelope otherwise", async () => {
    expect((await scrape(undefined, null)).res.status).toBe(401)
    expect((await scrape(undefined, `${TOKEN}x`)).res.status).toBe(401)
    // an API key is not the metrics token
    expect((await scrape(undefined, t.key)).res.status).toBe(401)
    const bad = await scrape(undefined, null)
    expect(JSON.parse(bad.text).error.code).toBe("UNAUTHORIZED")
    // The scheme is case-insensitive (RFC 9110 11.1).
    const lower = await fetch(`${t.url}/metrics`, { headers: { authorization: `bearer ${TOKEN}` } })
    expect(lower.status).toBe(200)
    const post = await fetch(`${t.url}/metrics`, { method: "POST", headers: { authorization: `Bearer ${TOKEN}` } })
    expect(post.status).toBe(405)
  })

  it("refuses two Authorization headers whichever comes first, as the API does", async () => {
    // node:http keeps the first of several; a proxy in front may act on the last.
    const scrapeWith = async (authorization: Array<string>) =>
      (await withAuthorizations(`${t.url}/metrics`, authorization)).status
    expect(await scrapeWith([`Bearer ${TOKEN}`])).toBe(200)
    for (const headers of [
      [`Bearer ${TOKEN}`, "Bearer wrong"],
      ["Bearer wrong", `Bearer ${TOKEN}`],
      [`Bearer ${TOKEN}`, `Bearer ${TOKEN}`],
      [`Bearer ${TOKEN}`, ""],
    ])
      expect(await scrapeWith(headers), JSON.stringify(headers)).toBe(401)
  })

  it("parses as Prometheus text and its counters move with requests, guard decisions and appends", async () => {
    const before = await scrape()
    expect(before.res.headers.get("content-type")).toContain("text/plain")
    const agent = await t.call("POST", "/api/v1/agents", { body: { name: "metered" } })
    expect(agent.status).toBe(201)
    const policy = await t.call("POST", "/api/v1/policies", {
      body: {
        name: "no-payments",
        rules: [
          { id: "deny-pay", effect: "deny", actions: ["payments.*"] },
          { id: "allow-read", effect: "allow", actions: ["db.read"] },
        ],
      },
    })
    expect(policy.status).toBe(201)
    const guard = (action: string, key?: string) =>
      t.call("POST", "/api/v1/guard", {
        body: { agentId: agent.body.data.id, action },
        headers: key ? { "idempotency-key": key } : {},
      })
    expect((await guard("payments.send")).body.data.decision).toBe("deny")
    expect((await guard("db.read")).body.data.decision).toBe("allow")
    expect((await guard("db.read", "same-key-1")).body.data.decision).toBe("allow")
    // a replay answers the first decision again: not a second decision
    expect((await guard("db.read", "same-key-1")).body.data.decision).toBe("allow")
    expect((await t.call("POST", "/api/v1/events/verify", { body: {} })).status).toBe(200)
    expect((await t.call("GET", "/api/v1/agents/agt_nope")).status).toBe(404)

    const after = await scrape()
    const delta = (name: string, labels?: Record<string, string>) =>
      sum(family(after.families, name), labels) - sum(family(before.families, name), labels)
    expect(delta("agentgov_guard_decisions_total", { decision: "deny" })).toBe(1)
    expect(delta("agentgov_guard_decisions_total", { decision: "allow" })).toBe(2)
    expect(delta("agentgov_operations_total", { operation: "guard.evaluate", outcome: "ok" })).toBe(4)
    expect(delta("agentgov_operations_total", { operation: "agents.get", outcome: "AGENT_NOT_FOUND" })).toBe(1)
    expect(delta("agentgov_http_requests_total", { surface: "rest", method: "POST", status: "200" })).toBeGreaterThan(4)
    expect(delta("agentgov_http_requests_total", { surface: "rest", status: "404" })).toBe(1)
    // agent.registered, policy.created, three policy.evaluated (+ denied, violated) at least
    expect(delta("agentgov_events_appended_total")).toBeGreaterThanOrEqual(5)
    expect(delta("agentgov_append_batch_events")).toBeGreaterThanOrEqual(1)
    // every event, the agent's and the policy's (appended in their own transactions) included
    expect(sum(family(after.families, "agentgov_audit_chain_events"))).toBe(await t.chainLength())
    expect(delta("agentgov_audit_chain_events")).toBeGreaterThanOrEqual(delta("agentgov_events_appended_total"))
    expect(delta("agentgov_chain_verifications_total", { result: "valid", trigger: "api" })).toBe(1)
    for (const name of [
      "agentgov_operation_duration_seconds",
      "agentgov_http_request_duration_seconds",
      "agentgov_webhook_queue_depth",
      "agentgov_webhook_attempts_total",
      "agentgov_rate_limited_total",
      "agentgov_nodejs_eventloop_lag_seconds",
      "agentgov_process_resident_memory_bytes",
      "agentgov_checkpoint_age_seconds",
    ])
      family(after.families, name)
  })

  it("counts each request with the status it was answered with, on tRPC as on REST", async () => {
    const before = await scrape()
    // tRPC's handler settles before it writes its answer: these were all counted as 200.
    expect((await fetch(`${t.url}/trpc/agents.list`)).status).toBe(401)
    expect((await fetch(`${t.url}/trpc/agents.list`, { headers: { authorization: `Bearer ${t.key}` } })).status).toBe(
      200,
    )
    expect((await fetch(`${t.url}/trpc/nothing.here`, { headers: { authorization: `Bearer ${t.key}` } })).status).toBe(
      404,
    )
    const after = await scrape()
    const delta = (labels: Record<string, string>) =>
      sum(family(after.families, "agentgov_http_requests_total"), labels) -
      sum(family(before.families, "agentgov_http_requests_total"), labels)
    expect(delta({ surface: "trpc", status: "401" })).toBe(1)
    expect(delta({ surface: "trpc", status: "404" })).toBe(1)
    expect(delta({ surface: "trpc", status: "200" })).toBe(1)

    // A request Node's parser refuses never reaches a handler: counted all the same.
    const { connect } = await import("node:net")
    const port = new URL(t.url).port
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(port), "127.0.0.1", () => socket.write("NOT HTTP AT ALL\r\n\r\n"))
      let got = ""
      socket.on("data", (c) => (got += c))
      socket.on("end", () => resolve(got))
      socket.on("error", reject)
    })
    expect(raw).toMatch(/^HTTP\/1\.1 400/)
    // Nor does an HTTP/1.1 request without a Host header (Node answered it itself), nor one its client abandoned.
    const exchange = (text: string, wait = true) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(Number(port), "127.0.0.1", () => {
          socket.write(text)
          if (!wait) setTimeout(() => socket.destroy(), 100)
        })
        let got = ""
        socket.on("data", (c) => (got += c))
        socket.on("close", () => resolve(got))
        socket.on("error", reject)
      })
    const noHost = await exchange("GET /api/v1/agents HTTP/1.1\r\nconnection: close\r\n\r\n")
    expect(noHost).toMatch(/^HTTP\/1\.1 400/)
    expect(noHost).toContain("Host header")
    await exchange(
      `POST /api/v1/events/ingest HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${t.key}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"events":`,
      false,
    )
    // The cut-off request is counted when the server sees its socket close: scraped until it is (then exactly).
    const cutOff = async () =>
      sum(family((await scrape()).families, "agentgov_http_requests_total"), { surface: "rest", status: "499" }) -
      sum(family(after.families, "agentgov_http_requests_total"), { surface: "rest", status: "499" })
    await expect.poll(cutOff, { timeout: 10_000 }).toBeGreaterThanOrEqual(1)
    const last = await scrape()
    expect(
      sum(family(last.families, "agentgov_http_requests_total"), { surface: "other", status: "400" }) -
        sum(family(after.families, "agentgov_http_requests_total"), { surface: "other", status: "400" }),
    ).toBe(2)
    expect(
      sum(family(last.families, "agentgov_http_requests_total"), { surface: "rest", status: "499" }) -
        sum(family(after.families, "agentgov_http_requests_total"), { surface: "rest", status: "499" }),
    ).toBe(1)
  })

  it("counts rate-limit refusals", async () => {
    const limited = await startTestServer({
      metrics: { token: TOKEN, port: undefined, host: "127.0.0.1" },
      rateLimits: {
        ...(await import("@agentgov/domain")).DEFAULT_RATE_LIMITS,
        plans: { free: 1e9, pro: 1e9, enterprise: 1e9 },
        agent: 1e9,
        anonymous: 2,
      },
    })
    try {
      const refusals = async () => {
        const res = await fetch(`${limited.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })
        return sum(family(parsePrometheusTextFormat(await res.text()), "agentgov_rate_limited_total"), {
          surface: "rest",
        })
      }
      const before = await refusals()
      const statuses: Array<number> = []
      for (let i = 0; i < 4; i++)
        statuses.push((await fetch(`${limited.url}/api/v1/badge/agt_unknown?format=json`)).status)
      expect(statuses).toEqual([404, 404, 429, 429])
      expect((await refusals()) - before).toBe(2)
    } finally {
      await limited.close()
    }
  })

  it("puts no id in any label", async () => {
    const { text } = await scrape()
    for (const prefix of ["ws_", "agt_", "key_", "evt_", "req_", "pol_", "whk_", "dlv_"])
      expect(text, `a label holds an ${prefix} id`).not.toMatch(new RegExp(`="${prefix}[A-Za-z0-9]`))
  })
})

describe("configuration", () => {
  it("refuses a short metrics token, a bad port and a host without a port, together", () => {
    expect(() =>
      loadConfig({ AGENTGOV_METRICS_TOKEN: "short", AGENTGOV_METRICS_PORT: "99999", AGENTGOV_METRICS_HOST: "0.0.0.0" }),
    ).toThrow(/AGENTGOV_METRICS_TOKEN[\s\S]*AGENTGOV_METRICS_PORT/)
    expect(() => loadConfig({ AGENTGOV_METRICS_HOST: "0.0.0.0" })).toThrow(/AGENTGOV_METRICS_HOST/)
    expect(loadConfig({}).metrics).toBeUndefined()
    expect(loadConfig({ AGENTGOV_METRICS_PORT: "9464" }).metrics).toEqual({
      token: undefined,
      port: 9464,
      host: "127.0.0.1",
    })
  })

  it("serves /metrics on its own port, and not on the API's, when AGENTGOV_METRICS_PORT is set", async () => {
    const other = await startTestServer({ metrics: { token: undefined, port: 0, host: "127.0.0.1" } })
    try {
      expect(other.server.metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/)
      const own = await scrape(other.server.metricsUrl, null)
      expect(own.res.status).toBe(200)
      family(own.families, "agentgov_http_requests_total")
      expect((await fetch(`${other.url}/metrics`)).status).toBe(404)
      expect((await fetch(other.server.metricsUrl!.replace("/metrics", "/healthz"))).status).toBe(404)
    } finally {
      await other.close()
    }
  })
})
