import { TreeBuilder } from "@agentgov/verifier"
import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest"
import type { Actor } from "../../src/auth/Actor.ts"
import { systemActor } from "../../src/auth/Actor.ts"
import { AuditLog, EventService, SCOPES, WorkspaceService } from "../../src/index.ts"
import { type DomainTestRuntime, makeDomainRuntime } from "../runtime.ts"

/**
 * A chain longer than two of verification's ranges (10,000 events: signed roots read and subtrees stored at once),
 * read 500 events a statement.
 */
const EVENTS = 21_000

let d: DomainTestRuntime
let workspaceId: string
let actor: Actor
let length: number

const sql = <A extends object>(query: (s: SqlClient.SqlClient) => Effect.Effect<ReadonlyArray<A>, unknown>) =>
  d.run(SqlClient.SqlClient.use((s) => query(s).pipe(Effect.orDie)))

const headSequence = async () => {
  const [head] = await sql<{ sequence: number }>(
    (s) => s`SELECT sequence::int FROM chain_heads WHERE workspace_id = ${workspaceId}`,
  )
  return head!.sequence
}

beforeAll(async () => {
  d = await makeDomainRuntime()
  const { workspace } = await d.run(WorkspaceService.use((w) => w.create(null, { name: `statements-${Date.now()}` })))
  workspaceId = workspace.id
  actor = systemActor(workspaceId, "live", new Set(SCOPES))
  for (let n = 0; n < EVENTS; n += 1_000)
    await d.run(
      AuditLog.use((a) =>
        a.append(
          actor,
          Array.from({ length: 1_000 }, (_, i) => ({ type: "custom.statements", data: { n: n + i } })),
        ),
      ),
    )
  length = await headSequence()
}, 120_000)
afterAll(async () => d?.dispose())

const verify = () => d.run(EventService.use((s) => s.verify(actor, "api")))

/** Changes event `sequence`'s data behind its chain hash; returns a function that puts it back. */
const tamper = async (sequence: number) => {
  const [row] = await sql<{ data: string }>(
    (s) => s`SELECT data::text AS data FROM events WHERE workspace_id = ${workspaceId} AND sequence = ${sequence}`,
  )
  await sql(
    (s) => s`UPDATE events SET data = '{"n":-1}' WHERE workspace_id = ${workspaceId} AND sequence = ${sequence}`,
  )
  // As text, then cast: a parameter PostgreSQL types json is serialised by the driver as a JSON string.
  return () =>
    sql(
      (s) =>
        s`UPDATE events SET data = ${row!.data}::text::json WHERE workspace_id = ${workspaceId} AND sequence = ${sequence}`,
    )
}

describe("verification of a chain longer than a statement and a range", () => {
  it("checks every event across the statements' and ranges' bounds", async () => {
    expect(length).toBeGreaterThan(EVENTS)
    expect(await verify()).toMatchObject({ valid: true, checked: length })
  })

  it("hashes at most 1,000 events between two turns of the event loop", async () => {
    // Counted, not timed: the events pushed into a Merkle tree between two turns (a turn lets every other request
    // in). A statement of 10,000 let PostgreSQL run so far ahead that the driver handed over 8,000 rows in one turn.
    const pushed = vi.spyOn(TreeBuilder.prototype, "pushEvent")
    let done = false
    let most = 0
    const turning = (async () => {
      let before = 0
      while (!done) {
        await new Promise((resolve) => setImmediate(resolve))
        most = Math.max(most, pushed.mock.calls.length - before)
        before = pushed.mock.calls.length
      }
    })()
    let calls = 0
    try {
      expect(await verify()).toMatchObject({ valid: true, checked: length })
    } finally {
      done = true
      await turning
      calls = pushed.mock.calls.length
      pushed.mockRestore()
    }
    // Every event went through the spied method, so the count covers all of them.
    expect(calls).toBe(length)
    expect(most).toBeGreaterThan(0)
    expect(most).toBeLessThanOrEqual(1_000)
  })

  it("names the first tampered event wherever it lies, and the ones after it do not change the answer", async () => {
    // In the second statement of the first range, at the first event of the second range, and in the third range.
    for (const sequence of [1_500, 10_001, 20_999]) {
      const restore = await tamper(sequence)
      // A second tampering further on: the first is the one named.
      const later = await tamper(sequence + 1)
      try {
        expect(await verify(), String(sequence)).toMatchObject({
          valid: false,
          checked: sequence - 1,
          firstBadSequence: sequence,
        })
      } finally {
        await later()
        await restore()
      }
    }
    // Each broken verification recorded an event (the alarm) after the tampered ones.
    expect(await verify()).toMatchObject({ valid: true, checked: await headSequence() })
  })
})
