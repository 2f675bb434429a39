import { randomBytes } from "node:crypto"
import { request } from "node:http"
import { DEFAULT_RATE_LIMITS, DEFAULT_STREAM_LIMITS, SCOPES } from "@agentgov/domain"
import { makeTestStore, type TestStore } from "@agentgov/testing"
import * as SqlClient from "effect/sql/SqlClient"
import { expect } from "vitest"
import type { ServerConfig } from "../src/config.ts"
import { makeLogger } from "../src/logger.ts"
import { type RunningServer, type StartOptions, startServer } from "../src/server.ts"
import { sinkLine } from "./logScan.ts"

export interface ApiResponse<T = any> {
  readonly status: number
  readonly headers: Headers
  readonly body: T
}

export interface CallOptions {
  readonly body?: unknown
  /** Raw body text, sent as is (for malformed JSON). */
  readonly rawBody?: string
  /** Bearer credential; `null` sends none. Defaults to the server's bootstrap key. */
  readonly key?: string | null
  readonly headers?: Record<string, string>
}

export interface TestServer {
  readonly url: string
  /** The server's log lines so far (JSON), down to debug. */
  readonly logs: ReadonlyArray<string>
  /** The bootstrap key: every scope in workspace `default`. */
  readonly key: string
  readonly workspaceId: string
  readonly server: RunningServer
  readonly store: TestStore
  readonly call: <T = any>(method: string, path: string, options?: CallOptions) => Promise<ApiResponse<T>>
  /** Creates a key in the bootstrap workspace (or with `as`) and returns its value. */
  readonly createKey: (spec: Record<string, unknown>, as?: string) => Promise<string>
  /** Runs SQL on the server's own store: what it stored, or a row changed behind its back. */
  readonly query: <A extends object>(f: (sql: SqlClient.SqlClient) => any) => Promise<ReadonlyArray<A>>
  /** The sequence of the workspace's last event (the bootstrap workspace's by default; 0 when empty). */
  readonly chainLength: (workspaceId?: string) => Promise<number>
  readonly close: () => Promise<void>
}

/** An ISO 8601 UTC timestamp with milliseconds, as every API timestamp is written. */
export const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

let counter = 0
/** A name no other test of this run uses. */
export const unique = (prefix: string) => `${prefix}-${Date.now().toString(36)}-${++counter}`

/** Asserts the error envelope: status, code, a message, and the field when given. */
export const expectError = (res: ApiResponse, status: number, code: string, field?: string) => {
  expect(res.status, JSON.stringify(res.body)).toBe(status)
  expect(res.body.ok).toBe(false)
  expect(res.body.error.code).toBe(code)
  expect(typeof res.body.error.message).toBe("string")
  if (field !== undefined) expect(res.body.error.details?.field).toBe(field)
}

/** Changes a key's last checksum character: still well-formed, but the checksum no longer holds. */
/**
 * A GET with one `Authorization` line per value (fetch would join them into one line itself): what a client or proxy
 * that repeats the header sends. Answers the status and the body's text.
 */
export const withAuthorizations = (url: string, values: ReadonlyArray<string>) =>
  new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = request(url, { headers: { authorization: [...values] } as Record<string, Array<string>> }, (res) => {
      let text = ""
      res.setEncoding("utf8")
      res.on("data", (chunk: string) => (text += chunk))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text }))
    })
    req.on("error", reject)
    req.end()
  })

export const tamper = (key: string) => key.slice(0, -1) + (key.endsWith("A") ? "B" : "A")

export interface CredentialFixtures {
  /** A workspace key holding every scope except `scope` (made once per scope). */
  readonly keyWithout: (scope: string) => Promise<string>
  /** An all-scope key whose expiresAt has passed (waits for it the first time). */
  readonly expiredKey: () => Promise<string>
}

/** The credentials every suite's security cases need, in the bootstrap workspace. */
export const credentialFixtures = async (t: TestServer): Promise<CredentialFixtures> => {
  const keysWithout = new Map<string, string>()
  const expiringAt = Date.now() + 1500
  const expiringKey = await t.createKey({
    type: "workspace",
    scopes: [...SCOPES],
    expiresAt: new Date(expiringAt).toISOString(),
  })
  return {
    keyWithout: async (scope) => {
      let key = keysWithout.get(scope)
      if (!key) {
        key = await t.createKey({ type: "workspace", scopes: SCOPES.filter((s) => s !== scope) })
        keysWithout.set(scope, key)
      }
      return key
    },
    expiredKey: async () => {
      const wait = expiringAt + 50 - Date.now()
      if (wait > 0) await new Promise((r) => setTimeout(r, wait))
      return expiringKey
    },
  }
}

/** The master key of every test server (testConfig): a CLI process on a test server's store needs it too. */
export const TEST_MASTER_KEY = randomBytes(32)

export const testConfig = (overrides: Partial<ServerConfig> = {}): ServerConfig => ({
  port: 0,
  host: "127.0.0.1",
  dataDir: "/nonexistent",
  databaseUrl: undefined,
  redisUrl: undefined,
  logLevel: "error",
  publicUrl: "http://127.0.0.1",
  maxBodyBytes: 64 * 1024,
  sweepIntervalMs: 60_000,
  verifyIntervalMs: 3_600_000,
  bootstrap: true,
  masterKey: TEST_MASTER_KEY,
  tokenTtlSeconds: 900,
  tokenAudience: "agentgov",
  checkpointIntervalMs: 3_600_000,
  // Counted and reported on every response, but out of the way of suites that are not about limits.
  rateLimits: { ...DEFAULT_RATE_LIMITS, plans: { free: 1e9, pro: 1e9, enterprise: 1e9 }, agent: 1e9, anonymous: 1e9 },
  streamLimits: DEFAULT_STREAM_LIMITS,
  // The trust worker appends trust events on its own schedule: suites that count events would race it.
  // Its own suite (trust.test.ts) turns it on.
  trustWorker: false,
  ...overrides,
})

/** A real server on loopback over this test file's own fresh database. */
export const startTestServer = async (
  overrides: Partial<ServerConfig> = {},
  options: Omit<StartOptions, "store" | "logger"> = {},
): Promise<TestServer> => {
  const store = await makeTestStore()
  const logs: Array<string> = []
  const server = await startServer(testConfig(overrides), {
    ...options,
    store: store.layer,
    // Everything down to debug goes to the suite's log file, scanned for secrets at the end (logScan.ts).
    logger: makeLogger("debug", (l) => {
      sinkLine(l)
      logs.push(l)
    }),
  })
  const boot = server.bootstrapped
  if (!boot) throw new Error("a fresh test database must bootstrap")
  const call = async <T = any>(method: string, path: string, options: CallOptions = {}): Promise<ApiResponse<T>> => {
    const headers: Record<string, string> = { ...options.headers }
    const key = options.key === undefined ? boot.apiKey : options.key
    if (key !== null) headers.authorization ??= `Bearer ${key}`
    let body: string | undefined
    if (options.rawBody !== undefined) body = options.rawBody
    else if (options.body !== undefined) body = JSON.stringify(options.body)
    if (body !== undefined) headers["content-type"] ??= "application/json"
    const res = await fetch(`${server.url}${path}`, { method, headers, body })
    const text = await res.text()
    let parsed: unknown = text
    try {
      parsed = JSON.parse(text)
    } catch {
      // not JSON (the reference page); keep the text
    }
    return { status: res.status, headers: res.headers, body: parsed as T }
  }
  const createKey = async (spec: Record<string, unknown>, as?: string) => {
    const res = await call("POST", "/api/v1/api-keys", { body: { name: "test key", ...spec }, key: as ?? boot.apiKey })
    if (res.status !== 201) throw new Error(`key creation failed: ${res.status} ${JSON.stringify(res.body)}`)
    return res.body.data.apiKey as string
  }
  const query = <A extends object>(f: (sql: SqlClient.SqlClient) => any) =>
    server.runtime.runPromise(SqlClient.SqlClient.use(f)) as Promise<ReadonlyArray<A>>
  return {
    url: server.url,
    logs,
    key: boot.apiKey,
    workspaceId: boot.workspaceId,
    server,
    store,
    call,
    createKey,
    query,
    chainLength: async (workspaceId = boot.workspaceId) =>
      (
        await query<{ n: number }>(
          (sql) => sql`SELECT coalesce(max(sequence), 0)::int AS n FROM events WHERE workspace_id = ${workspaceId}`,
        )
      )[0]!.n,
    close: async () => {
      await server.close()
      await store.cleanup()
      if (logs.length > 0 && process.env.AGENTGOV_TEST_LOGS) process.stderr.write(logs.join(""))
    },
  }
}
