import { hash } from "node:crypto"
import { GENESIS_HASH } from "@agentgov/verifier"
import type postgres from "postgres"
import { type Measured, measure } from "./report.ts"
import type { BenchServer } from "./server.ts"

/** Baseline page size. */
const PAGE = 5_000

export interface VerifyRun extends Measured {
  readonly checked: number
  readonly eventsPerSecond: number
}

/** One `POST /events/verify`: the server recomputes the whole chain. */
export const runVerify = async (server: BenchServer): Promise<VerifyRun> => {
  let checked = 0
  const measured = await measure(server, async () => {
    const res = await server.call("POST", "/api/v1/events/verify", {})
    if (res.status !== 200 || res.body.data?.valid !== true)
      throw new Error(`verify answered ${res.status}: ${JSON.stringify(res.body)}`)
    checked = res.body.data.checked
  })
  return { ...measured, checked, eventsPerSecond: checked / (measured.ms / 1000) }
}

/**
 * The baseline, a floor: the same rows read and hashed by a plain script with
 * no service around it. Keyset pages of 5,000 rows over postgres.js, the data
 * as the text PostgreSQL returns (not parsed, not re-canonicalised), and one
 * SHA-256 over prevHash ‖ type ‖ data ‖ timestamp per event. Only the links
 * are checked: with a jsonb column the returned text is not the hashed JCS.
 */
export const runVerifyBaseline = async (
  sql: postgres.Sql,
  server: BenchServer,
  workspaceId: string,
): Promise<VerifyRun> => {
  let checked = 0
  const measured = await measure(server, async () => {
    let prevHash = GENESIS_HASH
    for (;;) {
      const rows = await sql`SELECT sequence, type, data::text AS data, ts, prev_hash, hash FROM events
          WHERE workspace_id = ${workspaceId} AND sequence > ${checked} ORDER BY sequence LIMIT ${PAGE}`
      for (const r of rows) {
        if (r.sequence !== checked + 1 || r.prev_hash !== prevHash) throw new Error(`chain broken at ${r.sequence}`)
        hash("sha256", r.prev_hash + r.type + r.data + r.ts.toISOString(), "hex")
        prevHash = r.hash
        checked = r.sequence
      }
      if (rows.length < PAGE) break
    }
  })
  return { ...measured, checked, eventsPerSecond: checked / (measured.ms / 1000) }
}
