import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Authenticator, PolicyService, WorkspaceService } from "../../src/index.ts"
import { type DomainTestRuntime, makeDomainRuntime } from "../runtime.ts"

/**
 * A rule's action pattern the guard can never be asked about (an invisible character, a decomposed accent: the
 * guard refuses such an action) is refused when the policy is saved: the rule would read as the named action and
 * never apply.
 */

let env: DomainTestRuntime
beforeAll(async () => {
  env = await makeDomainRuntime()
})
afterAll(async () => env?.dispose())

const actorOf = async (name: string) => {
  const { apiKey } = await env.run(WorkspaceService.use((s) => s.create(null, { name, environment: "live" })))
  return env.run(Authenticator.use((a) => a.authenticate(apiKey.apiKey)))
}

const deny = (actions: ReadonlyArray<string>) => ({
  name: "deny",
  rules: [{ id: "r", effect: "deny", actions: ["tool.read", ...actions] }],
})

describe("action patterns no guard call can match", () => {
  it("are refused at create, naming the pattern", async () => {
    const actor = await actorOf("unmatchable-create")
    for (const pattern of ["files.dele\u200bte", "caf\u0065\u0301.order", "\ufeffpay.*", "pay\u202e.*"]) {
      const e = await env.failure(PolicyService.use((s) => s.create(actor, deny([pattern]))))
      expect(e._tag).toBe("PolicyInvalid")
      expect((e as { field: string }).field).toBe("rules[0].actions[1]")
    }
    // NFC, any script, is fine.
    const ok = await env.run(PolicyService.use((s) => s.create(actor, deny(["caf\u00e9.order", "写.文件"]))))
    expect(ok.version).toBe(1)
  })

  it("are refused when an update brings them, not when they were already there", async () => {
    const actor = await actorOf("unmatchable-update")
    const p = await env.run(PolicyService.use((s) => s.create(actor, deny([]))))
    const e = await env.failure(
      PolicyService.use((s) =>
        s.update(actor, p.id, { rules: [{ id: "r", effect: "deny", actions: ["caf\u0065\u0301.order"] }] }),
      ),
    )
    expect(e._tag).toBe("PolicyInvalid")
    expect((e as { field: string }).field).toBe("rules[0].actions[0]")
    // Saved before this check: an unrelated change (disabling it) still saves.
    await env.run(
      SqlClient.SqlClient.use(
        (sql) =>
          sql`UPDATE policies SET document = jsonb_set(document, '{rules,0,actions}', ${JSON.stringify([
            "caf\u0065\u0301.order",
          ])}::text::jsonb) WHERE id = ${p.id}`,
      ),
    )
    const disabled = await env.run(PolicyService.use((s) => s.update(actor, p.id, { enabled: false })))
    expect(disabled.enabled).toBe(false)
    expect(disabled.rules[0]!.actions).toEqual(["caf\u0065\u0301.order"])
  })
})
