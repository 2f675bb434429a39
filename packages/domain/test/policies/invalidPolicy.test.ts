import { Effect, Logger } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Authenticator, PolicyService, PolicySets, WorkspaceService } from "../../src/index.ts"
import { type DomainTestRuntime, makeDomainRuntime } from "../runtime.ts"

/** A stored policy that no longer validates is logged once per version, not at every load of its workspace's set. */

let env: DomainTestRuntime
beforeAll(async () => {
  env = await makeDomainRuntime()
})
afterAll(async () => env?.dispose())

describe("a stored policy that no longer validates", () => {
  it("is logged once per version, however often its workspace's policies are loaded", async () => {
    const { workspace, apiKey } = await env.run(
      WorkspaceService.use((s) => s.create(null, { name: "invalid-log", environment: "live" })),
    )
    const actor = await env.run(Authenticator.use((a) => a.authenticate(apiKey.apiKey)))
    const p = await env.run(
      PolicyService.use((s) => s.create(actor, { name: "p", rules: [{ id: "r", effect: "deny", actions: ["a.b"] }] })),
    )
    const corrupt = (version: number) =>
      env.run(
        SqlClient.SqlClient.use(
          (sql) => sql`UPDATE policies SET version = ${version},
              document = jsonb_set(document, '{rules,0,when}', '{"op":"gone"}') WHERE id = ${p.id}`,
        ),
      )
    const warnings: Array<unknown> = []
    const capture = Logger.layer([
      Logger.make((o) => {
        if (o.logLevel === "Warn") warnings.push(o.message)
      }),
    ])
    const reload = () =>
      env.run(
        PolicySets.use((s) => Effect.andThen(s.forget(workspace.id), s.get(workspace.id))).pipe(
          Effect.provide(capture),
        ),
      )
    await corrupt(1)
    for (let i = 0; i < 3; i++) await reload()
    expect(warnings.length).toBe(1)
    expect(JSON.stringify(warnings[0])).toContain(p.id)
    // Another version of the same policy is another report.
    await corrupt(2)
    for (let i = 0; i < 3; i++) await reload()
    expect(warnings.length).toBe(2)
  })
})
