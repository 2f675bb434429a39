/**
 * Logs (issue 34): JSON lines with the request's id and, when tracing is on, its trace id; and the
 * scanner the whole suite's logs go through (logScan.ts) finds each kind of secret it is meant to.
 */

import { randomBytes } from "node:crypto"
import { rmSync } from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { join } from "node:path"
import { runningClusterUrl } from "@agentgov/db"
import { makeTestStore, pgConnect, reachableTempDir, withDatabase } from "@agentgov/testing"
import { context, ROOT_CONTEXT, trace } from "@opentelemetry/api"
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks"
import { afterEach, describe, expect, it } from "vitest"
import { makeLogger } from "../src/logger.ts"
import { spawnServer, stopChildren } from "./childServer.ts"
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
        // The store out of reach: a 503 the client retries (STORE_UNAVAILABLE), logged with the request's id.
        expect(res.status, `${path}: ${await res.clone().text()}`).toBe(503)
        if (path.startsWith("/api/")) expect(res.headers.get("retry-after"), path).toBe("1")
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

/** The advisory lock class that serialises a workspace's checkpoints (packages/domain/src/audit/MerkleStore.ts). */
const CHECKPOINT_LOCK = 72_410_004

describe("a clean shutdown under load", () => {
  const cleanups: Array<() => Promise<void> | void> = []
  afterEach(async () => {
    await stopChildren()
    for (const c of cleanups.splice(0).reverse()) await c()
  })

  it("logs no error after 'shutting down' while webhooks, trust passes and a checkpoint run, and exits 0", {
    timeout: 120_000,
  }, async () => {
    // A slow receiver: the worker holds attempts in flight when the signal comes.
    let n = 0
    const receiver = createServer((req, res) => {
      req.resume()
      // Some answer only after the worker's stop grace (5 s): those attempts are left to their leases.
      const ms = n++ % 10 === 0 ? 8_000 : 150
      req.on("end", () => setTimeout(() => res.writeHead(200).end("ok"), ms))
    })
    await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", () => r()))
    cleanups.push(() => {
      receiver.closeAllConnections()
      receiver.close()
    })
    const store: Record<string, string> = {}
    if (process.env.DATABASE_URL) {
      const s = await makeTestStore()
      cleanups.push(s.cleanup)
      store.DATABASE_URL = s.url!
    } else {
      const dir = reachableTempDir("agentgov-shutdown-")
      cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
      store.AGENTGOV_DATA_DIR = join(dir, "data")
    }
    const server = await spawnServer({
      ...store,
      AGENTGOV_MASTER_KEY: randomBytes(32).toString("hex"),
      AGENTGOV_WEBHOOK_ALLOWLIST: "127.0.0.1",
      // Every background pass runs all the time: trust, checkpoints, chain verification, the sweeps.
      AGENTGOV_TRUST_WORKER: "true",
      AGENTGOV_CHECKPOINT_INTERVAL_MS: "1000",
      AGENTGOV_VERIFY_INTERVAL_MS: "1000",
      AGENTGOV_SWEEP_INTERVAL_MS: "100",
    })
    const key = await server.waitForKey()
    const call = (method: string, path: string, body?: unknown) =>
      fetch(`${server.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      })
    const hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`
    expect((await call("POST", "/api/v1/webhooks", { url: hookUrl, events: ["load.*"] })).status).toBe(201)
    // An agent's events keep the trust worker busy.
    expect((await call("POST", "/api/v1/agents", { name: "loaded" })).status).toBe(201)
    let running = true
    let written = 0
    const client = async () => {
      while (running) {
        const events = Array.from({ length: 20 }, (_, i) => ({ type: "load.tick", data: { i } }))
        const res = await call("POST", "/api/v1/events/ingest", { events }).catch(() => undefined)
        if (res?.status === 201) written++
        await res?.arrayBuffer().catch(() => {})
      }
    }
    const clients = [client(), client(), client()]
    while (written < 20) await new Promise((r) => setTimeout(r, 20))
    // A checkpoint pass that cannot finish before the pool closes: the test holds its workspace's lock (as a
    // long pass on a big chain, or another instance's, would).
    const admin = pgConnect(store.DATABASE_URL ?? runningClusterUrl(join(store.AGENTGOV_DATA_DIR!, "pg"))!)
    cleanups.push(() => admin.end())
    await admin`SELECT pg_advisory_lock(${CHECKPOINT_LOCK}, hashtext(id)) FROM workspaces`
    for (;;) {
      const [waiting] = await admin`SELECT count(*)::int AS n FROM pg_locks l JOIN pg_database d ON d.oid = l.database
          WHERE d.datname = current_database() AND l.locktype = 'advisory' AND NOT l.granted`
      if (waiting!.n > 0) break
      await new Promise((r) => setTimeout(r, 50))
    }
    server.proc.kill("SIGTERM")
    await server.exited
    running = false
    await Promise.all(clients)

    const lines = server
      .output()
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as { level: string; msg: string })
    const from = lines.findIndex((l) => l.msg === "shutting down")
    expect(from, server.output()).toBeGreaterThanOrEqual(0)
    expect(
      lines.slice(from).filter((l) => l.level === "error"),
      server.output(),
    ).toEqual([])
    expect(server.proc.exitCode, server.output()).toBe(0)
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
