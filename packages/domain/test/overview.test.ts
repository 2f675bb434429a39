import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AuditLog, Authenticator, OverviewService, WorkspaceService } from "../src/index.ts"
import { at, type DomainTestRuntime, makeDomainRuntime } from "./runtime.ts"

let env: DomainTestRuntime
beforeAll(async () => {
  env = await makeDomainRuntime()
})
afterAll(async () => env?.dispose())

const T = Date.parse("2031-06-01T08:10:00.000Z")

describe("OverviewService.get", () => {
  // The session's time zone is the server's `timezone` setting, which an operator's PostgreSQL may set to a zone
  // half an hour off UTC (India, Newfoundland): the hours must still be UTC hours.
  it.each(["Asia/Kolkata", "America/St_Johns", "UTC"])(
    "counts decisions in UTC hours whatever the session's time zone (%s)",
    async (zone) => {
      const { apiKey } = await env.run(
        WorkspaceService.use((s) => s.create(null, { name: `overview-${zone}`, environment: "live" })),
      )
      const actor = await env.run(Authenticator.use((a) => a.authenticate(apiKey.apiKey)))
      await env.run(
        at(
          T,
          AuditLog.use((log) =>
            log.append(actor, [
              { type: "policy.evaluated", data: { decision: "allow" } },
              { type: "policy.evaluated", data: { decision: "deny" } },
              { type: "policy.evaluated", data: { decision: "require_approval" } },
            ]),
          ),
        ),
      )
      const overview = await env.run(
        at(
          T + 60_000,
          Effect.gen(function* () {
            const sql = yield* SqlClient.SqlClient
            // One connection for the read, in the zone given.
            return yield* sql.withTransaction(
              Effect.gen(function* () {
                yield* sql`SELECT set_config('TimeZone', ${zone}, true)`
                return yield* OverviewService.use((o) => o.get(actor))
              }),
            )
          }),
        ),
      )
      const hours = overview.decisions.hours
      expect(hours).toHaveLength(24)
      expect(hours.at(-1)).toEqual({ hour: "2031-06-01T08:00:00.000Z", allowed: 1, denied: 2 })
      expect(hours.slice(0, -1).every((h) => h.allowed === 0 && h.denied === 0)).toBe(true)
    },
  )
})
