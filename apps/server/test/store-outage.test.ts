import { PostgresClient } from "@agentgov/db"
import { cuttableProxy, makeTestStore } from "@agentgov/testing"
import { describe, expect, it } from "vitest"
import { makeLogger } from "../src/logger.ts"
import { startServer } from "../src/server.ts"
import { testConfig } from "./helpers.ts"

/**
 * The database out of reach (down, restarting, a network cut): requests that need it are answered 503
 * STORE_UNAVAILABLE with Retry-After, which clients retry, rather than a 500; once it is back, the server serves
 * again without a restart. A TCP proxy in front of the run's PostgreSQL is cut and restored.
 */
describe.runIf(process.env.DATABASE_URL)("the database out of reach", () => {
  it("answers 503 STORE_UNAVAILABLE with Retry-After while it is, and serves again once it is back", async () => {
    const store = await makeTestStore()
    const proxy = await cuttableProxy(store.url)
    const server = await startServer(testConfig(), {
      store: PostgresClient.layer({ url: proxy.url, max: 3 }),
      logger: makeLogger("error", () => {}),
    })
    try {
      const key = server.bootstrapped!.apiKey
      const list = () =>
        fetch(`${server.url}/api/v1/agents?limit=1`, { headers: { authorization: `Bearer ${key}` } }).then(
          async (res) => ({
            status: res.status,
            retryAfter: res.headers.get("retry-after"),
            body: (await res.json()) as { error?: { code: string } },
          }),
        )
      expect((await list()).status).toBe(200)

      await proxy.cut()
      const during = await list()
      expect(during.status, JSON.stringify(during.body)).toBe(503)
      expect(during.retryAfter).toBe("1")
      expect(during.body.error?.code).toBe("STORE_UNAVAILABLE")

      await proxy.restore()
      let after = during
      for (let i = 0; i < 100 && after.status !== 200; i++) {
        await new Promise((r) => setTimeout(r, 100))
        after = await list()
      }
      expect(after.status, JSON.stringify(after.body)).toBe(200)
    } finally {
      await server.close()
      await proxy.close()
      await store.cleanup()
    }
  })
})
