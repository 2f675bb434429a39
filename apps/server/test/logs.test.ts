/**
 * Logs (issue 34): JSON lines with the request's id and, when tracing is on, its trace id; and the
 * scanner the whole suite's logs go through (logScan.ts) finds each kind of secret it is meant to.
 */

import { pgConnect, withDatabase } from "@agentgov/testing"
import { context, ROOT_CONTEXT, trace } from "@opentelemetry/api"
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks"
import { describe, expect, it } from "vitest"
import { makeLogger } from "../src/logger.ts"
import { startTestServer } from "./helpers.ts"
import { findSecrets } from "./logScan.ts"

describe("the logger", () => {
  it("writes one JSON object per line with the fields given, and no traceId without an active span", () => {
    const lines: Array<string> = []
    const log = makeLogger("info", (l) => lines.push(l))
    log.debug("not written")
    log.error("operation failed", { requestId: "req_abc", op: "agents.get" })
    expect(lines).toHaveLength(1)
    expect(lines[0]!.endsWith("\n")).toBe(true)
    const line = JSON.parse(lines[0]!)
    expect(line).toMatchObject({ level: "error", msg: "operation failed", requestId: "req_abc", op: "agents.get" })
    expect(line.traceId).toBeUndefined()
  })

  it("adds the active span's traceId", () => {
    const lines: Array<string> = []
    const log = makeLogger("info", (l) => lines.push(l))
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736"
    const span = trace.wrapSpanContext({ traceId, spanId: "00f067aa0ba902b7", traceFlags: 1 })
    // A context manager is registered when tracing is on; with the no-op one, `with` still passes the span.
    const manager = new AsyncLocalStorageContextManager().enable()
    context.setGlobalContextManager(manager)
    try {
      context.with(trace.setSpan(ROOT_CONTEXT, span), () => log.warn("slow", { requestId: "req_x" }))
    } finally {
      context.disable()
    }
    expect(JSON.parse(lines[0]!)).toMatchObject({ requestId: "req_x", traceId })
  })
})

describe("a server's error lines", () => {
  it("carry the request's id when a request fails while it is authenticated (the store gone)", async () => {
    const t = await startTestServer()
    // A key made but never used: authenticating it needs the store.
    const unused = await t.createKey({ type: "workspace", scopes: ["agents:read"] })
    const database = new URL(t.store.url).pathname.slice(1)
    const admin = pgConnect(withDatabase(t.store.url, "postgres"))
    try {
      await admin.unsafe(`ALTER DATABASE "${database}" WITH ALLOW_CONNECTIONS false`)
      await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ${database}`
      for (const path of ["/api/v1/agents", "/trpc/agents.list"]) {
        const res = await fetch(`${t.url}${path}`, { headers: { authorization: `Bearer ${unused}` } })
        expect(res.status, path).toBe(500)
        const requestId = res.headers.get("x-request-id")
        expect(requestId).toMatch(/^req_/)
        const line = t.logs
          .map((l) => JSON.parse(l))
          .find((l) => l.msg === "operation failed" && l.requestId === requestId)
        expect(line, `${path}: ${t.logs.join("")}`).toMatchObject({ stage: "authenticate", requestId })
      }
    } finally {
      await admin.unsafe(`ALTER DATABASE "${database}" WITH ALLOW_CONNECTIONS true`)
      await admin.end()
      await t.close()
    }
  })
})

describe("the log scan", () => {
  it("finds keys, tokens, webhook secrets, bearer credentials, URL passwords and secret-named fields", () => {
    const samples = [
      `{"msg":"x","key":"svc_ws_live_${"A1b2".repeat(8)}"}`,
      `{"msg":"x","k":"svc_ag_sk_test_${"Zz9".repeat(10)}"}`,
      `{"msg":"x","t":"eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJhZ3RfMTIzIn0.c2ln"}`,
      `{"msg":"x","s":"whsec_${"q".repeat(20)}"}`,
      `{"msg":"x","h":"Bearer abcdefghijklmnop"}`,
      `{"msg":"x","u":"postgres://app:hunter2@db:5432/agentgov"}`,
      `{"msg":"x","secret":"my-webhook-secret"}`,
      `{"msg":"x","masterKey":"0123456789abcdef"}`,
      "-----BEGIN PRIVATE KEY-----",
    ]
    const found = findSecrets(samples.join("\n"))
    expect(found.map((f) => f.line).sort((a, b) => a - b)).toEqual(samples.map((_, i) => i + 1))
  })

  it("passes the lines the service does write", () => {
    const clean = [
      '{"time":"2026-11-25T04:00:00.000Z","level":"info","msg":"agentgov listening","url":"http://127.0.0.1:3000","store":"PostgreSQL (DATABASE_URL)"}',
      '{"level":"error","msg":"operation failed","op":"agents.get","requestId":"req_abc","traceId":"4bf92f3577b34da6a3ce929d0e0e4736"}',
      '{"level":"warn","msg":"AGENTGOV_PUBLIC_URL is not set: SDK tokens are issued by this instance\'s own URL"}',
      '{"level":"info","msg":"revoked expired keys","count":2,"keyPrefix":"svc_ws_live_"}',
    ]
    expect(findSecrets(clean.join("\n"))).toEqual([])
  })
})
