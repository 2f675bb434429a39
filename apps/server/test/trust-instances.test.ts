import { randomBytes } from "node:crypto"
import { makeTestStore } from "@agentgov/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type ChildServer, kill9, spawnServer, stopChildren } from "./childServer.ts"
import { call, eventually } from "./webhooks-support.ts"

/**
 * The trust worker as real server processes on one PostgreSQL database: two instances announce
 * every change once; an instance killed with -9 before its pass committed loses nothing, and
 * the next instance announces what it left, once.
 */

const MASTER_KEY = randomBytes(32).toString("hex")

/** The trust and badge events of the workspace, by agent. */
const trustEvents = async (server: ChildServer, key: string) => {
  const res = await call(server.url, key, "GET", "/api/v1/events?type=trust.*,badge.*&limit=100")
  expect(res.status, JSON.stringify(res.body)).toBe(200)
  const byAgent = new Map<string, Array<string>>()
  for (const e of res.body.data as Array<{ agentId: string; type: string }>)
    byAgent.set(e.agentId, [...(byAgent.get(e.agentId) ?? []), e.type].sort())
  return byAgent
}

const ANNOUNCED = ["badge.earned", "trust.score.adjusted", "trust.score.changed", "trust.tier.upgraded"]

describe.runIf(process.env.DATABASE_URL)("trust workers in several processes on one PostgreSQL database", () => {
  let store: Awaited<ReturnType<typeof makeTestStore>>
  let env: Record<string, string>
  /** The bootstrap key, printed by the first process on the empty database. */
  let key: string
  beforeAll(async () => {
    store = await makeTestStore()
    env = { DATABASE_URL: store.url!, AGENTGOV_MASTER_KEY: MASTER_KEY, AGENTGOV_TRUST_WORKER: "true" }
  })
  afterAll(async () => {
    await stopChildren()
    await store?.cleanup()
  })

  it("two instances: every agent's crossing is announced once", async () => {
    const servers = await Promise.all([spawnServer(env), spawnServer(env)])
    key = await Promise.any(servers.map((s) => s.waitForKey()))
    const agents = await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        const server = servers[i % 2]!
        const agent = await call(server.url, key, "POST", "/api/v1/agents", { name: `multi-${i}` })
        expect(agent.status).toBe(201)
        const adjusted = await call(server.url, key, "POST", `/api/v1/trust/score/${agent.body.data.id}/adjustments`, {
          delta: 150,
          reason: "vetted",
        })
        expect(adjusted.status).toBe(201)
        return agent.body.data.id as string
      }),
    )
    const seen = await eventually(async () => {
      const byAgent = await trustEvents(servers[0]!, key)
      return agents.every((a) => (byAgent.get(a)?.length ?? 0) >= ANNOUNCED.length) ? byAgent : undefined
    }, 30_000)
    // A little longer: a second announcement, if one were coming, would have landed.
    await new Promise((r) => setTimeout(r, 1_500))
    const settled = await trustEvents(servers[1]!, key)
    for (const a of agents) expect(settled.get(a), a).toEqual(ANNOUNCED)
    expect(seen.size).toBeGreaterThanOrEqual(agents.length)
    await stopChildren()
  }, 120_000)

  it("an instance killed with -9 loses nothing: the next one announces what it had not, once", async () => {
    const first = await spawnServer(env)
    const apiKey = key
    const agent = await call(first.url, apiKey, "POST", "/api/v1/agents", { name: "crash" })
    await call(first.url, apiKey, "POST", `/api/v1/trust/score/${agent.body.data.id}/adjustments`, {
      delta: 150,
      reason: "vetted",
    })
    // Before its gathered pass (500 ms) runs.
    await kill9(first)
    const second = await spawnServer(env)
    await eventually(async () => {
      const byAgent = await trustEvents(second, apiKey)
      return (byAgent.get(agent.body.data.id)?.length ?? 0) >= ANNOUNCED.length ? true : undefined
    }, 30_000)
    await new Promise((r) => setTimeout(r, 1_500))
    expect((await trustEvents(second, apiKey)).get(agent.body.data.id)).toEqual(ANNOUNCED)
  }, 120_000)
})
