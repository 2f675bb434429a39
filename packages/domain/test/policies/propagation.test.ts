import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  AgentService,
  Authenticator,
  type GuardResult,
  GuardService,
  PolicyService,
  WorkspaceService,
} from "../../src/index.ts"
import { type DomainTestRuntime, makeDomainRuntime } from "../runtime.ts"

/**
 * The instance that writes a change applies it to its own next guard call
 * without waiting for its notification: here the notifications never arrive
 * (the LISTEN connection behind), so only the writer's own step can do it.
 * Other instances rely on the notification (the HTTP tests with two servers).
 */

let env: DomainTestRuntime
beforeAll(async () => {
  env = await makeDomainRuntime({ notifications: false })
})
afterAll(async () => env?.dispose())

const setup = async () => {
  const { apiKey, workspace } = await env.run(
    WorkspaceService.use((s) => s.create(null, { name: `propagation-${Date.now()}`, environment: "live" })),
  )
  const actor = await env.run(Authenticator.use((a) => a.authenticate(apiKey.apiKey)))
  const agentId = (await env.run(AgentService.use((s) => s.register(actor, { name: "worker" })))).id
  const decide = async (action: string) =>
    ((await env.run(GuardService.use((s) => s.evaluate(actor, { agentId, action })))) as GuardResult).decision
  return { actor, workspaceId: workspace.id, decide }
}

describe("a change reaches the writing instance's next guard call with no notification", () => {
  it("a workspace's guardDefault", async () => {
    const { actor, workspaceId, decide } = await setup()
    expect(await decide("nothing.matches")).toBe("allow")
    await env.run(WorkspaceService.use((s) => s.update(actor, workspaceId, { guardDefault: "deny" })))
    expect(await decide("nothing.matches")).toBe("deny")
  })

  it("a policy created, updated and deleted", async () => {
    const { actor, decide } = await setup()
    expect(await decide("files.delete")).toBe("allow")
    const policy = await env.run(
      PolicyService.use((s) =>
        s.create(actor, { name: "p", rules: [{ id: "r", effect: "deny", actions: ["files.*"] }] }),
      ),
    )
    expect(await decide("files.delete")).toBe("deny")
    await env.run(
      PolicyService.use((s) => s.update(actor, policy.id, { rules: [{ id: "r", effect: "allow", actions: ["x.*"] }] })),
    )
    expect(await decide("files.delete")).toBe("allow")
    await env.run(
      PolicyService.use((s) =>
        s.update(actor, policy.id, { rules: [{ id: "r", effect: "deny", actions: ["files.*"] }] }),
      ),
    )
    expect(await decide("files.delete")).toBe("deny")
    await env.run(PolicyService.use((s) => s.remove(actor, policy.id)))
    expect(await decide("files.delete")).toBe("allow")
  })
})
