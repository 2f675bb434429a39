import { PostgresClient } from "@agentgov/db"
import { makeTestStore, pgConnect } from "@agentgov/testing"
import { describe, expect, it } from "vitest"
import { makeLogger } from "../src/logger.ts"
import { startServer } from "../src/server.ts"
import { testConfig } from "./helpers.ts"

/**
 * A lock held outside the service (an operator's `psql` left inside a transaction on a workspace's chain head):
 * requests that need it give up after the store's lock time-out with 503 STORE_UNAVAILABLE and Retry-After, and
 * change nothing, rather than wait as long as the lock stays (and, through the pool, hold everyone else's requests);
 * requests that do not need it are served meanwhile, and once it is released everything is served again.
 */
describe("a lock held outside the service", () => {
  it("is waited for up to the lock time-out, then answered 503 STORE_UNAVAILABLE, and nothing is written", async () => {
    const store = await makeTestStore()
    const server = await startServer(testConfig(), {
      store: PostgresClient.layer({ url: store.url, max: 4, lockTimeoutMs: 300 }),
      logger: makeLogger("error", () => {}),
    })
    const psql = pgConnect(store.url)
    try {
      const key = server.bootstrapped!.apiKey
      const call = async (method: string, path: string, body?: unknown) => {
        const res = await fetch(`${server.url}/api/v1${path}`, {
          method,
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        })
        return {
          status: res.status,
          retryAfter: res.headers.get("retry-after"),
          body: (await res.json()) as { data?: any; error?: { code: string } },
        }
      }
      const [head] = await psql<Array<{ workspace_id: string; sequence: number }>>`
        SELECT workspace_id, sequence::int FROM chain_heads`
      const { workspace_id: workspaceId, sequence: before } = head!
      const held = Promise.withResolvers<void>()
      const locked = Promise.withResolvers<void>()
      const holder = psql.begin(async (tx) => {
        await tx`SELECT 1 FROM chain_heads WHERE workspace_id = ${workspaceId} FOR UPDATE`
        locked.resolve()
        await held.promise
      })
      await locked.promise
      try {
        // Each of these needs the chain head: more of them than the pool has connections.
        const writes = await Promise.all([
          ...Array.from({ length: 6 }, (_, i) => call("POST", "/agents", { name: `blocked-${i}` })),
          call("POST", "/events/ingest", { events: [{ type: "blocked.event", data: {} }] }),
        ])
        for (const w of writes) {
          expect(w.status, JSON.stringify(w.body)).toBe(503)
          expect(w.retryAfter).toBe("1")
          expect(w.body.error?.code).toBe("STORE_UNAVAILABLE")
        }
        // A read does not need the lock: served meanwhile, the pool free again.
        const read = await call("GET", "/agents?limit=10")
        expect(read.status, JSON.stringify(read.body)).toBe(200)
      } finally {
        held.resolve()
        await holder
      }
      const after = await call("POST", "/agents", { name: "after-release" })
      expect(after.status, JSON.stringify(after.body)).toBe(201)
      const names = (await call("GET", "/agents?limit=100")).body.data.map((a: { name: string }) => a.name)
      expect(names).toEqual(["after-release"])
      const [moved] = await psql<Array<{ sequence: number }>>`SELECT sequence::int FROM chain_heads`
      expect(await psql`SELECT type FROM events WHERE workspace_id = ${workspaceId} AND sequence > ${before}`).toEqual([
        { type: "agent.registered" },
      ])
      expect(moved!.sequence).toBe(before + 1)
      const verified = await call("POST", "/events/verify")
      expect(verified.body.data.valid).toBe(true)
    } finally {
      await psql.end()
      await server.close()
      await store.cleanup()
    }
  })
})
