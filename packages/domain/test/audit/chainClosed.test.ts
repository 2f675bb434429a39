import { Cause, Effect, Exit } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AuditLog, prepareAppend } from "../../src/audit/AuditLog.ts"
import { EventAppender } from "../../src/audit/EventAppender.ts"
import { ChainClosed } from "../../src/audit/EventErrors.ts"
import { systemActor } from "../../src/auth/Actor.ts"
import { WorkspaceService } from "../../src/workspaces/WorkspaceService.ts"
import { type DomainTestRuntime, makeDomainRuntime } from "../runtime.ts"

let d: DomainTestRuntime
beforeAll(async () => {
  d = await makeDomainRuntime()
})
afterAll(async () => d?.dispose())

/** A workspace created and then deleted, and the head its chain was left at (`workspace.deleted`). */
const deletedWorkspace = () =>
  Effect.gen(function* () {
    const workspaces = yield* WorkspaceService
    const admin = systemActor("ws_admin", "live", new Set(["workspaces:admin"] as const))
    const { workspace } = yield* workspaces.create(null, { name: `closed-${Math.random()}` })
    yield* workspaces.remove(admin, workspace.id)
    const sql = yield* SqlClient.SqlClient
    const [head] = yield* sql<{ sequence: number; hash: string }>`SELECT sequence::int, hash FROM chain_heads
      WHERE workspace_id = ${workspace.id}`
    return { id: workspace.id, head: head! }
  })

const typesOf = (id: string) =>
  SqlClient.SqlClient.use((sql) =>
    sql<{ type: string }>`SELECT type FROM events WHERE workspace_id = ${id} ORDER BY sequence`.pipe(
      Effect.map((rows) => rows.map((r) => r.type)),
    ),
  )

describe("a deleted workspace's chain", () => {
  it("takes no append after workspace.deleted, on any path, even one that predicts its head exactly", async () => {
    const { id, head } = await d.run(deletedWorkspace())
    const actor = systemActor(id, "live", new Set())
    const events = [{ type: "custom.late", data: {} }]
    // The one-statement path, with the true head: only the workspace's deletion can refuse it. In both shapes: the
    // head's webhook count not known (deliveries part in), and known to be none (part left out).
    for (const expected of [head, { ...head, webhooks: 0 }]) {
      const written = await d.run(
        AuditLog.use((audit) =>
          Effect.promise(() =>
            audit.appendAtNow(id, prepareAppend(id, [{ actor, events }], expected, Date.now()), expected),
          ),
        ),
      )
      expect(written).toBe(false)
    }
    // The locked path (any write in its own transaction), and the group commit that falls back to it.
    const locked = await d.rt.runPromiseExit(AuditLog.use((audit) => audit.append(actor, events)))
    const grouped = await d.rt.runPromiseExit(EventAppender.use((appender) => appender.append({ actor, events })))
    for (const exit of [locked, grouped]) {
      expect(Exit.isFailure(exit)).toBe(true)
      if (Exit.isFailure(exit)) expect(Cause.squash(exit.cause)).toBeInstanceOf(ChainClosed)
    }
    const types = await d.run(typesOf(id))
    expect(types.at(-1)).toBe("workspace.deleted")
    expect(types).not.toContain("custom.late")
  })
})
