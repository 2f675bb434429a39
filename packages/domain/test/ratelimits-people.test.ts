import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Actor, RateLimiter, SCOPES, WorkspaceService } from "../src/index.ts"
import { type DomainTestRuntime, makeDomainRuntime } from "./runtime.ts"

/**
 * Whose requests draw on the workspace's limit (D10): every key, SDK token and app does; a person signed in to the
 * dashboard has a limit of their own, so that an agent flooding the API cannot keep the people from stopping it.
 */

let t: DomainTestRuntime
beforeAll(async () => {
  t = await makeDomainRuntime()
}, 60_000)
afterAll(() => t?.dispose())

const actor = (workspaceId: string, type: Actor["credential"]["type"], id: string): Actor =>
  ({
    workspaceId,
    environment: "live",
    credential: { type, id },
    keyType: "workspace",
    scopes: new Set(SCOPES),
    ...(type === "user" ? { userId: `usr_${id}` } : {}),
  }) as Actor

describe("the workspace's limit", () => {
  it("is used up by its keys, not by the people in its dashboard, who keep a limit of their own", async () => {
    const { workspace } = await t.run(WorkspaceService.use((s) => s.create(null, { name: "flooded", plan: "free" })))
    const check = (a: Actor) => t.run(RateLimiter.use((r) => r.check(a)))
    const agentKey = actor(workspace.id, "api_key", "key_flooding_agent")
    let admitted = 0
    for (let i = 0; i < 150; i++) if ((await check(agentKey))?.admitted) admitted++
    expect(admitted).toBe(100)
    // Another key of the workspace is refused: the workspace's 100 a minute are spent.
    expect((await check(actor(workspace.id, "api_key", "key_other")))?.admitted).toBe(false)
    // A person signed in to the dashboard is not: the suspend goes through.
    expect((await check(actor(workspace.id, "user", "session_owner")))?.admitted).toBe(true)
    // Their own limit is the plan's, like a key's.
    const person = actor(workspace.id, "user", "session_busy")
    let theirs = 0
    for (let i = 0; i < 120; i++) if ((await check(person))?.admitted) theirs++
    expect(theirs).toBe(100)
  })
})
