import { randomBytes } from "node:crypto"
import { Database, PostgresClient } from "@agentgov/db"
import { makeTestStore, type TestStore } from "@agentgov/testing"
import { chainHashOfCanonical } from "@agentgov/verifier"
import { Effect, Layer, ManagedRuntime } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { TestClock } from "effect/testing"
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest"
import { ApiKeyRepo } from "../src/apikeys/ApiKeyRepo.ts"
import { chainBatchSql, EventRepo } from "../src/audit/EventRepo.ts"
import {
  type Actor,
  AgentService,
  AnnounceGap,
  ApiKeyService,
  type AuditEvent,
  AuditLog,
  Authenticator,
  type ChainHead,
  Counters,
  chainHash,
  DEFAULT_RATE_LIMITS,
  DomainLayer,
  type DomainServices,
  EVENTS_CHANNEL,
  EventAppender,
  EventFeed,
  FeedSweep,
  GENESIS_HASH,
  hashKey,
  Idempotency,
  MasterKey,
  mintKey,
  OAuthService,
  prepareAppend,
  RateLimitSettings,
  SCOPES,
  SdkTokens,
  TokenSettings,
  WebhookService,
  WorkspaceService,
} from "../src/index.ts"

type R = DomainServices | SqlClient.SqlClient | Database
type Runtime = ManagedRuntime.ManagedRuntime<R, never>

let store: TestStore
const masterKey = Layer.mergeAll(
  MasterKey.layer(randomBytes(32)),
  TokenSettings.layer({ issuer: "http://test", audience: "agentgov", ttlSeconds: 900 }),
  RateLimitSettings.layer(DEFAULT_RATE_LIMITS),
  Counters.memory,
)
let rt: Runtime

beforeAll(async () => {
  store = await makeTestStore()
  rt = ManagedRuntime.make(DomainLayer.pipe(Layer.provideMerge(Layer.merge(store.layer, masterKey))))
})

afterAll(async () => {
  await rt?.dispose()
  await store?.cleanup()
})

const run = <A, E>(effect: Effect.Effect<A, E, R>, runtime: Runtime = rt): Promise<A> => runtime.runPromise(effect)
const runFailure = <A, E>(effect: Effect.Effect<A, E, R>): Promise<E> => rt.runPromise(Effect.flip(effect))

/** Another server instance's domain on the same PostgreSQL database (dispose it), with `settings` if given. */
const secondInstance = (settings: Layer.Layer<never> = Layer.empty): Runtime =>
  ManagedRuntime.make(
    DomainLayer.pipe(
      Layer.provideMerge(Layer.mergeAll(PostgresClient.layer({ url: store.url!, max: 5 }), masterKey, settings)),
    ),
  )

/** Runs `effect` with effect's TestClock set to `ms` (the database clock is not involved). */
const atTime = <A, E, Rq>(ms: number, effect: Effect.Effect<A, E, Rq>) =>
  Effect.gen(function* () {
    yield* TestClock.setTime(ms)
    return yield* effect
  }).pipe(Effect.provide(TestClock.layer()))

const authenticate = (bearer: string) => Authenticator.use((a) => a.authenticate(bearer))

let wsCounter = 0
const newWorkspace = async (environment: "live" | "test" = "live", runtime: Runtime = rt, adminKey = false) => {
  const { workspace, apiKey } = await run(
    WorkspaceService.use((s) => s.create(null, { name: `w${++wsCounter}`, environment }, undefined, { adminKey })),
    runtime,
  )
  const actor = await run(authenticate(apiKey.apiKey), runtime)
  return { workspace, apiKey, actor }
}

interface EventRow {
  readonly sequence: number
  readonly id: string
  readonly type: string
  readonly agent_id: string | null
  readonly actor_type: string
  readonly actor_id: string | null
  readonly data: Record<string, unknown>
  readonly ts: Date
  readonly prev_hash: string
  readonly hash: string
}

const eventsOf = (workspaceId: string) =>
  run(
    Effect.flatMap(
      SqlClient.SqlClient,
      (sql) => sql<EventRow>`SELECT sequence, id, type, agent_id, actor_type, actor_id, data, ts, prev_hash, hash
        FROM events WHERE workspace_id = ${workspaceId} ORDER BY sequence`,
    ),
  )

const keyRow = async (id: string) =>
  (
    await run(
      Effect.flatMap(
        SqlClient.SqlClient,
        (sql) => sql<{
          status: string
          revoked_reason: string | null
          revoked_at: Date | null
          expires_at: Date | null
          rotated_to: string | null
          last_used_at: Date | null
          key_hash: string
          prefix: string
        }>`SELECT status, revoked_reason, revoked_at, expires_at, rotated_to, last_used_at, key_hash, prefix
          FROM api_keys WHERE id = ${id}`,
      ),
    )
  )[0]!

/**
 * Checks the D8 chain of a workspace: sequence 1..n without gaps or duplicates,
 * each prevHash the previous hash (64 zeros first), each hash recomputed from
 * the stored type, data and timestamp, and the chain head at the last event.
 */
const expectLinearChain = async (workspaceId: string) => {
  const rows = await eventsOf(workspaceId)
  expect(rows.length).toBeGreaterThan(0)
  let prev = GENESIS_HASH
  rows.forEach((row, i) => {
    expect(row.sequence, `sequence at index ${i}`).toBe(i + 1)
    expect(row.prev_hash, `prevHash of #${row.sequence}`).toBe(prev)
    const timestamp = row.ts.toISOString()
    expect(row.hash, `hash of #${row.sequence}`).toBe(chainHash(row.prev_hash, row.type, row.data, timestamp))
    expect(row.id).toMatch(/^evt_[0-9a-z]{26}$/)
    prev = row.hash
  })
  expect(new Set(rows.map((r) => r.id)).size).toBe(rows.length)
  expect(new Set(rows.map((r) => r.hash)).size).toBe(rows.length)
  const head = await run(
    Effect.flatMap(
      SqlClient.SqlClient,
      (sql) =>
        sql<{
          sequence: number
          hash: string
        }>`SELECT sequence, hash FROM chain_heads WHERE workspace_id = ${workspaceId}`,
    ),
  )
  expect(head).toEqual([{ sequence: rows.length, hash: prev }])
  return rows
}

describe("Authenticator", () => {
  it("turns a workspace key into an Actor with the key's scopes", async () => {
    const { workspace, apiKey, actor } = await newWorkspace("test")
    expect(apiKey.apiKey).toMatch(/^svc_ws_test_[0-9A-Za-z]{38}$/)
    expect(actor.workspaceId).toBe(workspace.id)
    expect(actor.environment).toBe("test")
    expect(actor.credential).toEqual({ type: "api_key", id: apiKey.id })
    expect(actor.keyType).toBe("workspace")
    expect(actor.agentId).toBeUndefined()
    // a tenant's first key: every scope but workspaces:admin (which administers all tenants)
    expect([...actor.scopes].sort()).toEqual(SCOPES.filter((s) => s !== "workspaces:admin").sort())
    // stored as a hash and a display prefix only; last use recorded
    const row = await keyRow(apiKey.id)
    expect(row.key_hash).toBe(hashKey(apiKey.apiKey))
    expect(row.prefix).toBe(apiKey.apiKey.slice("svc_ws_test_".length, "svc_ws_test_".length + 6))
    expect(row.last_used_at).toBeInstanceOf(Date)
  })

  it("binds an agent key to its agent", async () => {
    const { actor } = await newWorkspace()
    const agent = await run(AgentService.use((s) => s.register(actor, { name: "bound" })))
    const key = await run(
      ApiKeyService.use((s) =>
        s.create(actor, {
          name: "agent key",
          type: "agent",
          agentId: agent.id,
          scopes: ["agents:read", "policies:evaluate"],
        }),
      ),
    )
    expect(key.apiKey).toMatch(/^svc_ag_sk_live_/)
    const agentActor = await run(authenticate(key.apiKey))
    expect(agentActor.keyType).toBe("agent")
    expect(agentActor.agentId).toBe(agent.id)
    expect([...agentActor.scopes].sort()).toEqual(["agents:read", "guard:evaluate"])
  })

  it("refuses a bad checksum without touching the database", async () => {
    const { apiKey } = await newWorkspace()
    const last = apiKey.apiKey.at(-1)!
    const badChecksum = apiKey.apiKey.slice(0, -1) + (last === "a" ? "b" : "a")
    const calls: Array<string> = []
    const unexpected = (name: string) => () => Effect.die(new Error(`ApiKeyRepo.${name} must not be called`))
    const stubRepo = Layer.succeed(ApiKeyRepo)(
      ApiKeyRepo.of({
        insert: unexpected("insert"),
        find: unexpected("find"),
        findForUpdate: unexpected("findForUpdate"),
        findById: unexpected("findById"),
        findByHash: (hash) => {
          calls.push(hash)
          return Effect.succeed(undefined)
        },
        list: unexpected("list"),
        revoke: unexpected("revoke"),
        revokeAll: unexpected("revokeAll"),
        markRotated: unexpected("markRotated"),
        revokeExpired: unexpected("revokeExpired"),
        revokeOfMember: unexpected("revokeOfMember"),
        revokeOrphaned: unexpected("revokeOrphaned"),
        holdMembership: unexpected("holdMembership"),
        touch: unexpected("touch"),
      }),
    )
    const noTokens = Layer.succeed(SdkTokens)(
      SdkTokens.of({
        issue: () => Effect.die(new Error("unused")),
        verify: () => Effect.die(new Error("unused")),
        cached: () => undefined,
      }),
    )
    const noOAuth = Layer.succeed(OAuthService)(
      OAuthService.of({ authenticate: () => Effect.die(new Error("unused")) } as unknown as OAuthService["Service"]),
    )
    const isolated = Authenticator.layer.pipe(Layer.provide(Layer.mergeAll(stubRepo, noTokens, noOAuth)))
    const attempt = (bearer: string) =>
      Effect.runPromise(authenticate(bearer).pipe(Effect.flip, Effect.provide(isolated)))

    const e1 = await attempt(badChecksum)
    expect(e1._tag).toBe("Unauthenticated")
    expect(calls).toEqual([])
    const e2 = await attempt("svc_ws_live_tooShort")
    expect(e2._tag).toBe("Unauthenticated")
    const e3 = await attempt("not-a-key")
    expect(e3.message).toBe("unrecognised credential")
    expect(calls).toEqual([])
    // a well-formed key is looked up, by its hash: the stub does see database reads
    const wellFormed = mintKey("workspace", "live").key
    await attempt(wellFormed)
    expect(calls).toEqual([hashKey(wellFormed)])

    // and the real authenticator refuses the bad checksum too
    const real = await runFailure(authenticate(badChecksum))
    expect(real._tag).toBe("Unauthenticated")
    expect(real.message).toBe("invalid API key")
  })

  it("refuses a well-formed key it never minted", async () => {
    const e = await runFailure(authenticate(mintKey("workspace", "live").key))
    expect(e._tag).toBe("Unauthenticated")
    expect(e.message).toBe("invalid API key")
  })

  it("refuses a revoked key at once", async () => {
    const { actor } = await newWorkspace()
    const key = await run(
      ApiKeyService.use((s) => s.create(actor, { name: "k", type: "workspace", scopes: ["agents:read"] })),
    )
    const keyActor = await run(authenticate(key.apiKey))
    expect(keyActor.credential.id).toBe(key.id)
    const revoked = await run(ApiKeyService.use((s) => s.revoke(actor, key.id)))
    expect(revoked.status).toBe("revoked")
    expect(revoked.revokedReason).toBe("revoked")
    const e = await runFailure(authenticate(key.apiKey))
    expect(e._tag).toBe("Unauthenticated")
    expect(e.message).toBe("API key is revoked")
  })

  it("refuses an expired key from its expiry on, before any sweep", async () => {
    const { actor } = await newWorkspace()
    const expiresAt = Date.now() + 3_600_000
    const key = await run(
      ApiKeyService.use((s) =>
        s.create(actor, {
          name: "short-lived",
          type: "workspace",
          scopes: ["agents:read"],
          expiresAt: new Date(expiresAt).toISOString(),
        }),
      ),
    )
    expect(key.expiresAt).toBe(new Date(expiresAt).toISOString())
    expect((await run(atTime(expiresAt - 1, authenticate(key.apiKey)))).credential.id).toBe(key.id)
    for (const t of [expiresAt, expiresAt + 1, expiresAt + 86_400_000]) {
      const e = await run(atTime(t, authenticate(key.apiKey).pipe(Effect.flip)))
      expect(e.message, `at expiry + ${t - expiresAt} ms`).toBe("API key has expired")
    }
    // not yet swept: still active in the store
    expect((await keyRow(key.id)).status).toBe("active")
  })

  it("refuses to create a key that expires in the past", async () => {
    const { actor } = await newWorkspace()
    const e = await runFailure(
      ApiKeyService.use((s) =>
        s.create(actor, {
          name: "past",
          type: "workspace",
          scopes: ["agents:read"],
          expiresAt: new Date(Date.now() - 1_000).toISOString(),
        }),
      ),
    )
    expect(e._tag).toBe("InvalidInput")
  })

  it("refuses the keys of a deleted workspace", async () => {
    const admin = await newWorkspace("live", rt, true)
    const doomed = await newWorkspace()
    const extra = await run(
      ApiKeyService.use((s) => s.create(doomed.actor, { name: "extra", type: "workspace", scopes: ["agents:read"] })),
    )
    await run(authenticate(extra.apiKey))
    const removed = await run(WorkspaceService.use((s) => s.remove(admin.actor, doomed.workspace.id)))
    expect(removed.id).toBe(doomed.workspace.id)
    for (const key of [doomed.apiKey, extra]) {
      const e = await runFailure(authenticate(key.apiKey))
      expect(e._tag).toBe("Unauthenticated")
      const row = await keyRow(key.id)
      expect(row.status).toBe("revoked")
      expect(row.revoked_reason).toBe("workspace_deleted")
    }
    // the admin's own key still works
    expect((await run(authenticate(admin.apiKey.apiKey))).workspaceId).toBe(admin.workspace.id)
  })

  it("refuses an active key whose workspace is marked deleted", async () => {
    const { workspace, apiKey } = await newWorkspace()
    await run(
      Effect.flatMap(
        SqlClient.SqlClient,
        (sql) => sql`UPDATE workspaces SET deleted_at = now() WHERE id = ${workspace.id}`,
      ),
    )
    expect((await keyRow(apiKey.id)).status).toBe("active")
    const e = await runFailure(authenticate(apiKey.apiKey))
    expect(e._tag).toBe("Unauthenticated")
  })

  it("a credential cannot delete its own workspace", async () => {
    const { workspace, actor, apiKey } = await newWorkspace()
    const e = await runFailure(WorkspaceService.use((s) => s.remove(actor, workspace.id)))
    expect(e._tag).toBe("StateConflict")
    expect((await run(authenticate(apiKey.apiKey))).workspaceId).toBe(workspace.id)
  })

  it("keeps a rotated key working during the overlap only", async () => {
    const { actor } = await newWorkspace()
    const old = await run(
      ApiKeyService.use((s) =>
        s.create(actor, { name: "rotating", type: "workspace", scopes: ["agents:read", "events:read"] }),
      ),
    )
    const rotatedAt = Date.now()
    const next = await run(ApiKeyService.use((s) => s.rotate(actor, old.id, 600)))
    expect(next.id).not.toBe(old.id)
    expect(next.apiKey).not.toBe(old.apiKey)
    expect(next.scopes).toEqual(old.scopes)
    expect(next.type).toBe("workspace")
    expect(next.name).toBe(old.name)
    const oldRow = await keyRow(old.id)
    expect(oldRow.rotated_to).toBe(next.id)
    expect(oldRow.expires_at!.getTime()).toBeGreaterThanOrEqual(rotatedAt + 600_000)
    expect(oldRow.expires_at!.getTime()).toBeLessThanOrEqual(Date.now() + 600_000)
    // both work now
    expect((await run(authenticate(old.apiKey))).credential.id).toBe(old.id)
    expect((await run(authenticate(next.apiKey))).credential.id).toBe(next.id)
    // after the overlap only the new one
    const later = oldRow.expires_at!.getTime() + 1
    expect((await run(atTime(later, authenticate(old.apiKey).pipe(Effect.flip)))).message).toBe("API key has expired")
    expect((await run(atTime(later, authenticate(next.apiKey)))).credential.id).toBe(next.id)
    // rotating again is refused
    const again = await runFailure(ApiKeyService.use((s) => s.rotate(actor, old.id)))
    expect(again._tag).toBe("ApiKeyNotRotatable")
  })

  it("revokes the old key at once when rotated with overlap 0", async () => {
    const { workspace, actor } = await newWorkspace()
    const old = await run(
      ApiKeyService.use((s) => s.create(actor, { name: "now", type: "workspace", scopes: ["agents:read"] })),
    )
    const next = await run(ApiKeyService.use((s) => s.rotate(actor, old.id, 0)))
    expect((await runFailure(authenticate(old.apiKey))).message).toBe("API key is revoked")
    expect((await run(authenticate(next.apiKey))).credential.id).toBe(next.id)
    const row = await keyRow(old.id)
    expect(row).toMatchObject({ status: "revoked", revoked_reason: "rotated", rotated_to: next.id })
    const events = await eventsOf(workspace.id)
    const revokedEvents = events.filter((e) => e.type === "apikey.revoked")
    expect(revokedEvents.map((e) => e.data)).toEqual([expect.objectContaining({ keyId: old.id, reason: "rotated" })])
  })
})

describe("ApiKeyService.revokeExpired", () => {
  it("revokes expired keys as `expired` and overlapped rotated keys as `rotated`, with apikey.revoked events", async () => {
    const { workspace, actor } = await newWorkspace()
    const create = (name: string, expiresAt?: number) =>
      run(
        ApiKeyService.use((s) =>
          s.create(actor, {
            name,
            type: "workspace",
            scopes: ["agents:read"],
            ...(expiresAt === undefined ? {} : { expiresAt: new Date(expiresAt).toISOString() }),
          }),
        ),
      )
    const now = Date.now()
    const expiring = await create("expiring", now + 3_600_000)
    const rotated = await create("rotated")
    const replacement = await run(ApiKeyService.use((s) => s.rotate(actor, rotated.id, 60)))
    const forever = await create("forever")
    const later = await create("later", now + 10 * 3_600_000)

    // nothing of this workspace is due yet
    await run(ApiKeyService.use((s) => s.revokeExpired))
    for (const k of [expiring, rotated, replacement, forever, later]) expect((await keyRow(k.id)).status).toBe("active")

    const sweepAt = now + 2 * 3_600_000
    const due = await run(
      Effect.flatMap(
        SqlClient.SqlClient,
        (sql) => sql<{ n: number }>`SELECT count(*) AS n FROM api_keys
          WHERE status = 'active' AND expires_at <= ${new Date(sweepAt).toISOString()}::timestamptz`,
      ),
    )
    const before = (await eventsOf(workspace.id)).length
    const count = await run(
      atTime(
        sweepAt,
        ApiKeyService.use((s) => s.revokeExpired),
      ),
    )
    expect(count).toBe(due[0]!.n)
    expect(count).toBeGreaterThanOrEqual(2)

    const expiredRow = await keyRow(expiring.id)
    expect(expiredRow.status).toBe("revoked")
    expect(expiredRow.revoked_reason).toBe("expired")
    expect(expiredRow.revoked_at!.toISOString()).toBe(expiring.expiresAt)
    const rotatedRow = await keyRow(rotated.id)
    expect(rotatedRow.status).toBe("revoked")
    expect(rotatedRow.revoked_reason).toBe("rotated")
    for (const k of [replacement, forever, later]) expect((await keyRow(k.id)).status).toBe("active")

    const events = await expectLinearChain(workspace.id)
    const added = events.slice(before)
    expect(added.map((e) => e.type)).toEqual(["apikey.revoked", "apikey.revoked"])
    const byKey = new Map(added.map((e) => [e.data.keyId, e]))
    expect(byKey.get(expiring.id)?.data).toMatchObject({ keyId: expiring.id, reason: "expired", name: "expiring" })
    expect(byKey.get(rotated.id)?.data).toMatchObject({ keyId: rotated.id, reason: "rotated", name: "rotated" })
    for (const e of added) expect(e.actor_type).toBe("system")

    // the revoked keys are refused as revoked now, and a second sweep finds nothing
    expect((await runFailure(authenticate(expiring.apiKey))).message).toBe("API key is revoked")
    expect(
      await run(
        atTime(
          sweepAt,
          ApiKeyService.use((s) => s.revokeExpired),
        ),
      ),
    ).toBe(0)
    expect((await eventsOf(workspace.id)).length).toBe(events.length)
    const listed = await run(ApiKeyService.use((s) => s.get(actor, expiring.id)))
    expect(listed).toMatchObject({ status: "revoked", revokedReason: "expired" })
  })
})

describe("audit chain", () => {
  it("reads back the timestamps it hashed for verification, whatever the session's time zone", async () => {
    const { workspace, actor } = await newWorkspace()
    const stored = await run(
      AuditLog.use((a) =>
        a.append(actor, [
          { type: "tz.probe", data: { i: 1 } },
          { type: "tz.probe", data: { i: 2 } },
        ]),
      ),
    )
    const rowsIn = (zone: string) =>
      run(
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          const repo = yield* EventRepo
          return yield* sql.withTransaction(
            Effect.gen(function* () {
              // UTC+13:45 (+12:45 out of its summer), and a zone west of UTC: an offset left in would show.
              yield* sql.unsafe(`SET LOCAL TIME ZONE '${zone}'`)
              return yield* repo.chainBatch(workspace.id, 0, 100, "all")
            }),
          )
        }).pipe(Effect.provide(EventRepo.layer), Effect.orDie),
      )
    for (const zone of ["Pacific/Chatham", "America/St_Johns", "UTC"]) {
      const rows = await rowsIn(zone)
      const probes = rows.filter((r) => r.type === "tz.probe")
      expect(probes.map((r) => r.ts)).toEqual(stored.map((e) => e.timestamp))
      for (const r of rows) expect(r.ts).toBe(new Date(r.ts!).toISOString())
    }
  })

  it("has PostgreSQL check each chain hash over the very bytes this process hashes, and not one tampered with", async () => {
    const { workspace, actor } = await newWorkspace()
    // Text whose bytes differ from its characters: accents, an astral character, U+2028, escapes in the JSON.
    const awkward = ["é", "😀", "\u2028", 'a"b\\c', "line\nbreak\u0001"]
    await run(
      AuditLog.use((a) =>
        a.append(
          actor,
          awkward.map((text, i) => ({ type: "bytes.probe", data: { text, i } })),
        ),
      ),
    )
    const rows = () =>
      run(EventRepo.use((repo) => repo.chainBatch(workspace.id, 0, 100, "all")).pipe(Effect.provide(EventRepo.layer)))
    const before = await rows()
    expect(before.length).toBeGreaterThan(awkward.length)
    for (const r of before) {
      expect(r.hashed, `event ${r.sequence}`).toBe(true)
      expect(chainHashOfCanonical(r.prev_hash, r.type!, r.data!, r.ts!)).toBe(r.hash)
    }
    const victim = before.find((r) => r.type === "bytes.probe")!
    await run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* sql`UPDATE events SET data = ${'{"i":0,"text":"changed"}'}::json
          WHERE workspace_id = ${workspace.id} AND sequence = ${victim.sequence}`
      }).pipe(Effect.orDie),
    )
    const after = await rows()
    for (const r of after) expect(r.hashed, `event ${r.sequence}`).toBe(r.sequence !== victim.sequence)
    // What verification reads: the hashed fields only of the row this process must hash itself.
    const checked = await run(
      EventRepo.use((repo) => repo.chainBatch(workspace.id, 0, 100)).pipe(Effect.provide(EventRepo.layer)),
    )
    expect(checked.map((r) => r.hash)).toEqual(after.map((r) => r.hash))
    const changed = after.find((r) => r.sequence === victim.sequence)!
    expect(changed.data).not.toBe(victim.data)
    for (const r of checked)
      if (r.sequence === victim.sequence)
        expect([r.type, r.data, r.ts]).toEqual(["bytes.probe", changed.data, victim.ts])
      else expect([r.type, r.data, r.ts], `event ${r.sequence}`).toEqual([null, null, null])
  })

  it("has PostgreSQL hash each event of a verification page once, not at each use of the result", async () => {
    const { workspace } = await newWorkspace()
    interface PlanNode {
      readonly "Node Type": string
      readonly Output?: ReadonlyArray<string>
      readonly Plans?: ReadonlyArray<PlanNode>
    }
    const plan = await run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const rows = yield* sql.unsafe<{ "QUERY PLAN": unknown }>(
          `EXPLAIN (VERBOSE, FORMAT JSON) ${chainBatchSql("checked")}`,
          [workspace.id, 0, 10_000],
        )
        const json = rows[0]!["QUERY PLAN"]
        return (typeof json === "string" ? JSON.parse(json) : json)[0].Plan as PlanNode
      }).pipe(Effect.orDie),
    )
    // The nodes that compute `hashed` (a node names a child's result in parentheses, as a reference to it): pulled
    // up into the scan's select list, the scan computed it, SHA-256 and all, at each of its four uses.
    const computed = /(?:^|[^(])CASE WHEN \(getdatabaseencoding\(\)/g
    const computing: Array<{ node: string; times: number }> = []
    const walk = (n: PlanNode) => {
      const times = (n.Output ?? []).reduce((k, o) => k + (o.match(computed)?.length ?? 0), 0)
      if (times > 0) computing.push({ node: n["Node Type"], times })
      for (const c of n.Plans ?? []) walk(c)
    }
    walk(plan)
    expect(computing, JSON.stringify(plan)).toEqual([{ node: "Result", times: 1 }])
  })

  it("is linear after a series of operations, and failed or no-op operations record nothing", async () => {
    const { workspace, actor } = await newWorkspace()
    const agents = AgentService
    const a1 = await run(
      agents.use((s) => s.register(actor, { name: "alpha", labels: ["x"], metadata: { k: "ü", n: 1.5 } })),
    )
    await run(agents.use((s) => s.update(actor, a1.id, { description: "first agent" })))
    await run(agents.use((s) => s.createVersion(actor, a1.id, { version: "1.0.0" })))
    const agentKey = await run(
      ApiKeyService.use((s) => s.create(actor, { name: "ak", type: "agent", agentId: a1.id, scopes: ["agents:read"] })),
    )
    const wsKey = await run(
      ApiKeyService.use((s) =>
        s.create(actor, {
          name: "wk",
          type: "workspace",
          scopes: ["agents:read"],
          expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
        }),
      ),
    )
    const rotated = await run(ApiKeyService.use((s) => s.rotate(actor, wsKey.id, 0)))
    await run(ApiKeyService.use((s) => s.revoke(actor, rotated.id)))

    // failures and no-ops: none of them may leave an event
    expect((await runFailure(agents.use((s) => s.register(actor, { name: "alpha" }))))._tag).toBe("AgentNameTaken")
    expect((await runFailure(agents.use((s) => s.createVersion(actor, a1.id, { version: "1.0.0" }))))._tag).toBe(
      "AgentVersionExists",
    )
    await run(agents.use((s) => s.update(actor, a1.id, { description: "first agent" })))
    await run(ApiKeyService.use((s) => s.revoke(actor, rotated.id)))

    await run(agents.use((s) => s.deregister(actor, a1.id)))
    await run(agents.use((s) => s.deregister(actor, a1.id)))

    const rows = await expectLinearChain(workspace.id)
    expect(rows.map((r) => r.type)).toEqual([
      "workspace.created",
      "apikey.created",
      "agent.registered",
      "agent.updated",
      "agent.updated",
      "apikey.created",
      "apikey.created",
      "apikey.created",
      "apikey.rotated",
      "apikey.revoked",
      "apikey.revoked",
      "agent.deregistered",
      "apikey.revoked",
    ])
    expect(rows[2]!.agent_id).toBe(a1.id)
    expect(rows[2]!.data).toEqual({ agentId: a1.id, agentName: "alpha", trustScore: 400 })
    expect(rows[2]!.actor_type).toBe("api_key")
    expect(rows[2]!.actor_id).toBe(actor.credential.id)
    expect(rows[8]!.data).toEqual({ keyId: wsKey.id, newKeyId: rotated.id, overlapSeconds: 0 })
    expect(rows[12]!.data).toMatchObject({ keyId: agentKey.id, reason: "agent_deregistered" })
  })

  it("keeps each workspace's chain separate", async () => {
    const a = await newWorkspace()
    const b = await newWorkspace()
    await run(AgentService.use((s) => s.register(a.actor, { name: "same" })))
    await run(AgentService.use((s) => s.register(b.actor, { name: "same" })))
    await run(AgentService.use((s) => s.register(a.actor, { name: "other" })))
    const ra = await expectLinearChain(a.workspace.id)
    const rb = await expectLinearChain(b.workspace.id)
    expect(ra.map((r) => r.type)).toEqual([
      "workspace.created",
      "apikey.created",
      "agent.registered",
      "agent.registered",
    ])
    expect(rb.map((r) => r.type)).toEqual(["workspace.created", "apikey.created", "agent.registered"])
  })

  it("stays linear under 30 concurrent registrations", async () => {
    const { workspace, actor } = await newWorkspace()
    const registered = await run(
      Effect.all(
        Array.from({ length: 30 }, (_, i) => AgentService.use((s) => s.register(actor, { name: `agent-${i}` }))),
        { concurrency: "unbounded" },
      ),
    )
    expect(new Set(registered.map((a) => a.id)).size).toBe(30)
    const rows = await expectLinearChain(workspace.id)
    expect(rows).toHaveLength(32)
    const regs = rows.filter((r) => r.type === "agent.registered")
    expect(regs).toHaveLength(30)
    expect(new Set(regs.map((r) => r.agent_id))).toEqual(new Set(registered.map((a) => a.id)))
  })

  it("stays linear when concurrent writers race on several workspaces and the same name", async () => {
    const a = await newWorkspace()
    const b = await newWorkspace()
    const work = [
      ...Array.from({ length: 10 }, (_, i) => AgentService.use((s) => s.register(a.actor, { name: `a-${i}` }))),
      ...Array.from({ length: 10 }, (_, i) => AgentService.use((s) => s.register(b.actor, { name: `b-${i}` }))),
      // ten writers want the same name: one wins, the rest fail and leave nothing behind
      ...Array.from({ length: 10 }, () => AgentService.use((s) => s.register(a.actor, { name: "contested" }))),
    ]
    const results = await run(
      Effect.all(
        work.map((w) => Effect.result(w)),
        { concurrency: "unbounded" },
      ),
    )
    const failures = results.filter((r) => r._tag === "Failure")
    expect(failures).toHaveLength(9)
    for (const f of failures) expect(f.failure._tag).toBe("AgentNameTaken")
    const ra = await expectLinearChain(a.workspace.id)
    const rb = await expectLinearChain(b.workspace.id)
    expect(ra.filter((r) => r.type === "agent.registered")).toHaveLength(11)
    expect(rb.filter((r) => r.type === "agent.registered")).toHaveLength(10)
    expect(ra.filter((r) => r.data.agentName === "contested")).toHaveLength(1)
  })

  it("stays linear when two instances write to one PostgreSQL workspace at once", async () => {
    const second = secondInstance()
    try {
      const { workspace, actor } = await newWorkspace()
      const burst = (runtime: Runtime, tag: string) =>
        run(
          Effect.all(
            Array.from({ length: 15 }, (_, i) => AgentService.use((s) => s.register(actor, { name: `${tag}-${i}` }))),
            { concurrency: "unbounded" },
          ),
          runtime,
        )
      const [x, y] = await Promise.all([burst(rt, "x"), burst(second, "y")])
      expect(x.length + y.length).toBe(30)
      const rows = await expectLinearChain(workspace.id)
      expect(rows.filter((r) => r.type === "agent.registered")).toHaveLength(30)
    } finally {
      await second.dispose()
    }
  })

  it("records sweeper events in the right chain when several workspaces expire at once", async () => {
    const a = await newWorkspace()
    const b = await newWorkspace("test")
    const soon = Date.now() + 60_000
    for (const w of [a, b]) {
      for (const name of ["k1", "k2"]) {
        await run(
          ApiKeyService.use((s) =>
            s.create(w.actor, {
              name,
              type: "workspace",
              scopes: ["agents:read"],
              expiresAt: new Date(soon).toISOString(),
            }),
          ),
        )
      }
    }
    await run(
      atTime(
        soon + 1,
        ApiKeyService.use((s) => s.revokeExpired),
      ),
    )
    for (const w of [a, b]) {
      const rows = await expectLinearChain(w.workspace.id)
      const revoked = rows.filter((r) => r.type === "apikey.revoked")
      expect(revoked.map((r) => r.data.reason)).toEqual(["expired", "expired"])
      expect(revoked.map((r) => r.data.name).sort()).toEqual(["k1", "k2"])
    }
  })
})

describe("group-commit appender", () => {
  const appendVia = (runtime: Runtime, actor: Actor, type: string, n = 1) =>
    run(
      EventAppender.use((a) =>
        a.append({ actor, events: Array.from({ length: n }, (_, i) => ({ type, data: { i } })) }),
      ),
      runtime,
    ) as Promise<ReadonlyArray<AuditEvent>>

  /** One event of `type` prepared after `after`. */
  const probeBatch = (workspaceId: string, actor: Actor, type: string, after: { sequence: number; hash: string }) =>
    prepareAppend(workspaceId, [{ actor, events: [{ type, data: {} }] }], after, Date.now())

  it("appendAt writes nothing when the head is not the one the batch was hashed after", async () => {
    const { workspace, actor } = await newWorkspace()
    const before = await eventsOf(workspace.id)
    const stale = { sequence: 1, hash: before[0]!.hash }
    const prepared = probeBatch(workspace.id, actor, "probe.event", stale)
    expect(await run(AuditLog.use((a) => Effect.promise(() => a.appendAtNow(workspace.id, prepared, stale))))).toBe(
      false,
    )
    expect(await eventsOf(workspace.id)).toEqual(before)
    const last = before.at(-1)!
    const current = { sequence: last.sequence, hash: last.hash }
    const next = probeBatch(workspace.id, actor, "probe.event", current)
    expect(await run(AuditLog.use((a) => Effect.promise(() => a.appendAtNow(workspace.id, next, current))))).toEqual({
      ...next.head,
      webhooks: 0,
    })
    const rows = await expectLinearChain(workspace.id)
    expect(rows.at(-1)!.id).toBe(next.stored[0]![0]!.id)
  })

  it("recovers when the head moves behind its back, and answers each append with its own events", async () => {
    const { workspace, actor } = await newWorkspace()
    const first = await appendVia(rt, actor, "probe.first", 3)
    // A write the appender does not see: its remembered head is now stale.
    await run(
      Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql.withTransaction(AuditLog.use((a) => a.append(actor, [{ type: "probe.aside", data: {} }]))),
      ),
    )
    const later = await run(
      Effect.all(
        Array.from({ length: 12 }, (_, i) =>
          EventAppender.use((a) => a.append({ actor, events: [{ type: "probe.later", data: { i } }] })),
        ),
        { concurrency: "unbounded" },
      ),
    )
    const rows = await expectLinearChain(workspace.id)
    expect(rows.map((r) => r.type).slice(-16)).toEqual([
      ...Array(3).fill("probe.first"),
      "probe.aside",
      ...Array(12).fill("probe.later"),
    ])
    const byId = new Map(rows.map((r) => [r.id, r]))
    for (const [i, events] of [first, ...later].entries()) {
      expect(Array.isArray(events), `append ${i}`).toBe(true)
      for (const e of events as ReadonlyArray<AuditEvent>) {
        expect(byId.get(e.id)?.sequence).toBe(e.sequence)
        expect(byId.get(e.id)?.hash).toBe(e.hash)
      }
    }
  })

  const keysOf = (workspaceId: string) =>
    run(
      Effect.flatMap(
        SqlClient.SqlClient,
        (sql) => sql<{ key: string; status_code: number; response_body: string }>`SELECT key, status_code, response_body
          FROM idempotency_keys WHERE workspace_id = ${workspaceId} ORDER BY key`,
      ),
    )
  const headOf = async (workspaceId: string) => {
    const rows = await eventsOf(workspaceId)
    const last = rows.at(-1)!
    return { sequence: last.sequence, hash: last.hash }
  }
  const completed = (key: string, body = `{"key":"${key}"}`) => ({
    key,
    operation: "probe.op",
    requestHash: `hash-of-${key}`,
    status: 201,
    body,
  })

  it("appendAt claims the keys with their responses in the statement that appends", async () => {
    const { workspace, actor } = await newWorkspace()
    const head = await headOf(workspace.id)
    const prepared = probeBatch(workspace.id, actor, "probe.keyed", head)
    const keys = [completed("k-b"), completed("k-a")]
    expect(
      await run(AuditLog.use((a) => Effect.promise(() => a.appendAtNow(workspace.id, prepared, head, keys)))),
    ).toEqual({ ...prepared.head, webhooks: 0 })
    expect((await expectLinearChain(workspace.id)).at(-1)!.id).toBe(prepared.stored[0]![0]!.id)
    expect(await keysOf(workspace.id)).toEqual([
      { key: "k-a", status_code: 201, response_body: '{"key":"k-a"}' },
      { key: "k-b", status_code: 201, response_body: '{"key":"k-b"}' },
    ])
  })

  it.each([
    ["one of its keys is already taken", "taken"],
    ["the head moved", "stale"],
  ])("appendAt with keys writes nothing, claims included, when %s", async (_, why) => {
    const { workspace, actor } = await newWorkspace()
    const head = await headOf(workspace.id)
    const taken = probeBatch(workspace.id, actor, "probe.first", head)
    expect(
      await run(
        AuditLog.use((a) => Effect.promise(() => a.appendAtNow(workspace.id, taken, head, [completed("k-taken")]))),
      ),
    ).toEqual({ ...taken.head, webhooks: 0 })
    const before = await eventsOf(workspace.id)
    const after = why === "stale" ? head : taken.head
    const prepared = probeBatch(workspace.id, actor, "probe.second", after)
    const keys = why === "taken" ? [completed("k-new"), completed("k-taken", "other")] : [completed("k-new")]
    expect(
      await run(AuditLog.use((a) => Effect.promise(() => a.appendAtNow(workspace.id, prepared, after, keys)))),
    ).toBe(false)
    expect(await eventsOf(workspace.id)).toEqual(before)
    expect((await keysOf(workspace.id)).map((k) => k.key)).toEqual(["k-taken"])
  })

  // The append statement's shapes (AuditLog.appendStatement): without the deliveries part while the head counts no
  // enabled webhook, without the claim when the batch carries no keys.
  const addWebhook = (actor: Actor) =>
    run(WebhookService.use((s) => s.create(actor, { url: "http://93.184.216.34/", events: ["probe.*"] })))
  const deliveryTypesOf = (workspaceId: string) =>
    run(
      Effect.flatMap(
        SqlClient.SqlClient,
        (sql) => sql<{ event_type: string }>`SELECT event_type FROM webhook_deliveries
          WHERE workspace_id = ${workspaceId} ORDER BY event_sequence`,
      ),
    ).then((rows) => rows.map((r) => r.event_type))

  it("queues deliveries for a webhook enabled after the group commit last saw the workspace without one", async () => {
    const { workspace, actor } = await newWorkspace()
    // The first append learns that the head counts no webhook; the second is written without the deliveries part.
    await appendVia(rt, actor, "probe.before", 2)
    await appendVia(rt, actor, "probe.before", 2)
    await addWebhook(actor)
    expect(await appendVia(rt, actor, "probe.after", 3)).toHaveLength(3)
    await appendVia(rt, actor, "probe.later", 1)
    await expectLinearChain(workspace.id)
    expect(await deliveryTypesOf(workspace.id)).toEqual([...Array(3).fill("probe.after"), "probe.later"])
  })

  it("appendAt writes nothing from a head that counts no webhook once one is enabled; the full shape then queues", async () => {
    const { workspace, actor } = await newWorkspace()
    await appendVia(rt, actor, "probe.first", 1)
    await addWebhook(actor)
    // The head after the webhook's own event, as a writer that last saw it before the webhook would predict it.
    const head = await headOf(workspace.id)
    const prepared = probeBatch(workspace.id, actor, "probe.next", head)
    const write = (expected: ChainHead) =>
      run(AuditLog.use((a) => Effect.promise(() => a.appendAtNow(workspace.id, prepared, expected))))
    expect(await write({ ...head, webhooks: 0 })).toBe(false)
    expect(await headOf(workspace.id)).toEqual(head)
    expect(await write(head)).toEqual({ ...prepared.head, webhooks: 1 })
    expect((await expectLinearChain(workspace.id)).at(-1)!.id).toBe(prepared.stored[0]![0]!.id)
    expect(await deliveryTypesOf(workspace.id)).toEqual(["probe.next"])
  })

  it("appendAt claims keys without the deliveries part, and claims nothing when a webhook makes it write nothing", async () => {
    const { workspace, actor } = await newWorkspace()
    const write = async (key: string) => {
      const head: ChainHead = { ...(await headOf(workspace.id)), webhooks: 0 }
      const prepared = probeBatch(workspace.id, actor, "probe.keyed", head)
      const written = await run(
        AuditLog.use((a) => Effect.promise(() => a.appendAtNow(workspace.id, prepared, head, [completed(key)]))),
      )
      return { written, prepared, head }
    }
    const lean = await write("k-lean")
    expect(lean.written).toEqual({ ...lean.prepared.head, webhooks: 0 })
    expect((await keysOf(workspace.id)).map((k) => k.key)).toEqual(["k-lean"])
    await addWebhook(actor)
    const refused = await write("k-refused")
    expect(refused.written).toBe(false)
    expect((await keysOf(workspace.id)).map((k) => k.key)).toEqual(["k-lean"])
    expect(await headOf(workspace.id)).toEqual({ sequence: refused.head.sequence, hash: refused.head.hash })
  })

  it("fails the one append whose data holds an escape PostgreSQL's json readers refuse; those beside it are stored", async () => {
    const { workspace, actor } = await newWorkspace()
    const exits = await run(
      Effect.all(
        [{ n: 0 }, { s: "a\u0000b" }, { n: 2 }].map((data) =>
          Effect.exit(EventAppender.use((a) => a.append({ actor, events: [{ type: "probe.batch", data }] }))),
        ),
        { concurrency: "unbounded" },
      ),
    )
    expect(exits.map((e) => e._tag)).toEqual(["Success", "Failure", "Success"])
    const rows = await expectLinearChain(workspace.id)
    expect(rows.filter((r) => r.type === "probe.batch")).toHaveLength(2)
  })

  it("answers each keyed append of a batch: stored, replayed, or refused for another request", async () => {
    const { workspace, actor } = await newWorkspace()
    const keyed = (key: string, requestHash: string, i: number) =>
      EventAppender.use((a) =>
        a.append({
          actor,
          events: [{ type: "probe.keyed", data: { i } }],
          idempotency: {
            key,
            operation: "probe.op",
            requestHash,
            render: (stored) => ({ status: 201, body: JSON.stringify((stored as ReadonlyArray<AuditEvent>)[0]!.id) }),
          },
        }),
      ).pipe(Effect.result)
    const first = await run(keyed("k-0", "h-0", 0))
    expect(first._tag).toBe("Success")
    const firstId = (first as { success: ReadonlyArray<AuditEvent> }).success[0]!.id
    // One batch: fresh keys, the retry of k-0, and k-0 again with another request.
    const outcomes = await run(
      Effect.all([keyed("k-1", "h-1", 1), keyed("k-0", "h-0", 0), keyed("k-2", "h-2", 2), keyed("k-0", "h-other", 9)], {
        concurrency: "unbounded",
      }),
    )
    const [one, replay, two, reused] = outcomes
    expect(replay).toMatchObject({ _tag: "Success", success: { status: 201, body: JSON.stringify(firstId) } })
    expect(reused).toMatchObject({ _tag: "Failure", failure: { _tag: "IdempotencyKeyReused", key: "k-0" } })
    const rows = await expectLinearChain(workspace.id)
    const keyedRows = rows.filter((r) => r.type === "probe.keyed")
    expect(keyedRows.map((r) => (r.data as { i: number }).i).sort()).toEqual([0, 1, 2])
    const stored = await keysOf(workspace.id)
    for (const [key, outcome] of [
      ["k-1", one],
      ["k-2", two],
    ] as const) {
      const events = (outcome as { success: ReadonlyArray<AuditEvent> }).success
      expect(keyedRows.some((r) => r.id === events[0]!.id)).toBe(true)
      expect(stored.find((k) => k.key === key)?.response_body).toBe(JSON.stringify(events[0]!.id))
    }
  })

  /**
   * An appender whose first fast statement fails: `after` when it committed and only its answer was lost,
   * `before` when it wrote nothing; with `unreadable`, the read that tells the two apart fails too.
   */
  const lossyAppender = async (when: "before" | "after", unreadable = false) => {
    const lost = () => Effect.die(new Error("connection lost"))
    const auditLog = Layer.effect(
      AuditLog,
      Effect.gen(function* () {
        const real = yield* AuditLog
        let failures = 1
        return AuditLog.of({
          ...real,
          appendAtNow: async (workspaceId, prepared, expected, keys) => {
            if (failures-- <= 0) return real.appendAtNow(workspaceId, prepared, expected, keys)
            if (when === "after") await real.appendAtNow(workspaceId, prepared, expected, keys)
            throw new Error("connection lost")
          },
        })
      }),
    ).pipe(Layer.provide(AuditLog.layer))
    const events = Layer.effect(
      EventRepo,
      Effect.gen(function* () {
        const real = yield* EventRepo
        return EventRepo.of({ ...real, holds: unreadable ? () => lost() : real.holds })
      }),
    ).pipe(Layer.provide(EventRepo.layer))
    // This test file's own connection pool.
    const sql = Layer.merge(
      Layer.succeed(SqlClient.SqlClient, await run(SqlClient.SqlClient.use(Effect.succeed))),
      Layer.succeed(Database, await run(Database.use(Effect.succeed))),
    )
    return ManagedRuntime.make(
      EventAppender.layer.pipe(Layer.provide(Layer.mergeAll(auditLog, events, Idempotency.layer)), Layer.provide(sql)),
    )
  }

  it.each([
    ["its answer was lost after it committed", "after"],
    ["it failed before writing", "before"],
  ] as const)("answers a batch whose fast statement failed once, when %s, and writes it once", async (_, when) => {
    const { workspace, actor } = await newWorkspace()
    const lossy = await lossyAppender(when)
    try {
      const append = (i: number) =>
        lossy.runPromise(EventAppender.use((a) => a.append({ actor, events: [{ type: "probe.lossy", data: { i } }] })))
      // The first append's batch meets the failing statement; the second goes through.
      const answered = [await append(0), await append(1)] as Array<ReadonlyArray<AuditEvent>>
      const rows = await expectLinearChain(workspace.id)
      const lossyRows = rows.filter((r) => r.type === "probe.lossy")
      expect(lossyRows.map((r) => (r.data as { i: number }).i)).toEqual([0, 1])
      expect(lossyRows.map((r) => r.id)).toEqual(answered.map((events) => events[0]!.id))
    } finally {
      await lossy.dispose()
    }
  })

  it("answers with the failure, and writes nothing twice, when whether a failed batch was written cannot be read", async () => {
    const { workspace, actor } = await newWorkspace()
    const lossy = await lossyAppender("after", true)
    try {
      const append = (i: number) =>
        lossy.runPromiseExit(
          EventAppender.use((a) => a.append({ actor, events: [{ type: "probe.lossy", data: { i } }] })),
        )
      const lossyRows = async () =>
        (await expectLinearChain(workspace.id))
          .filter((r) => r.type === "probe.lossy")
          .map((r) => (r.data as { i: number }).i)
      expect((await append(0))._tag).toBe("Failure")
      // Written (its answer alone was lost), and not again.
      expect(await lossyRows()).toEqual([0])
      expect((await append(1))._tag).toBe("Success")
      expect(await lossyRows()).toEqual([0, 1])
    } finally {
      await lossy.dispose()
    }
  })

  it("keeps one linear chain when two instances' appenders race on one PostgreSQL workspace", async () => {
    const second = secondInstance()
    try {
      const { workspace, actor } = await newWorkspace()
      const burst = (runtime: Runtime, tag: string) =>
        Promise.all(Array.from({ length: 40 }, (_, i) => appendVia(runtime, actor, `probe.${tag}`, 1 + (i % 3))))
      const [x, y] = await Promise.all([burst(rt, "x"), burst(second, "y")])
      const rows = await expectLinearChain(workspace.id)
      const answered = [...x, ...y].flat()
      expect(answered).toHaveLength(2 * (14 * 1 + 13 * 2 + 13 * 3))
      const stored = new Map(rows.map((r) => [r.id, r.sequence]))
      for (const e of answered) expect(stored.get(e.id)).toBe(e.sequence)
    } finally {
      await second.dispose()
    }
  })
  /** Payloads of `agentgov_events` about `workspaceId` that `runtime`'s Database hears, until `stop`. */
  const hear = async (runtime: Runtime, workspaceId: string) => {
    const heard: Array<string> = []
    const stop = await run(
      Database.use((db) =>
        Effect.promise(() =>
          db.listen(EVENTS_CHANNEL, (payload) => {
            if (payload.startsWith(`${workspaceId}:`)) heard.push(payload)
          }),
        ),
      ),
      runtime,
    )
    return { heard, stop }
  }
  const waitLong = { timeout: 10_000, interval: 5 }

  it("announces a burst of direct appends to other instances once, then the last of it; its own listeners hear each", async () => {
    // A gap no test outlasts: after the burst's first append, only the announcement owed at disposal goes out.
    const writer = secondInstance(Layer.succeed(AnnounceGap, 3_600_000))
    let disposed = false
    let elsewhere: Awaited<ReturnType<typeof hear>> | undefined
    try {
      const { workspace, actor } = await newWorkspace("live", writer)
      const ws = workspace.id
      elsewhere = await hear(rt, ws)
      const here = await hear(writer, ws)
      const appended: Array<AuditEvent> = []
      for (let i = 0; i < 5; i++) appended.push(...(await appendVia(writer, actor, "probe.burst")))
      const announcements = appended.map((e) => `${ws}:${e.sequence}`)
      // Notifications arrive in commit order: once this one is heard, every earlier one has been.
      await run(
        Database.use((db) => Effect.promise(() => db.notify(EVENTS_CHANNEL, `${ws}:marker`))),
        writer,
      )
      const heard = elsewhere.heard
      await vi.waitFor(() => expect(heard).toContain(`${ws}:marker`), waitLong)
      const burstHeard = () => heard.filter((p) => announcements.includes(p))
      expect(burstHeard()).toEqual([announcements[0]])
      await vi.waitFor(() => expect(here.heard).toEqual(expect.arrayContaining(announcements)), waitLong)
      await here.stop()
      await writer.dispose()
      disposed = true
      await vi.waitFor(() => expect(burstHeard()).toEqual([announcements[0], announcements.at(-1)]), waitLong)
    } finally {
      if (!disposed) await writer.dispose()
      await elsewhere?.stop()
    }
  })

  it("delivers to another instance's live stream the events its writer never announced, within the feed's sweep", async () => {
    // The writer announces the first append only, as one that stopped dead within the gap would have.
    const writer = secondInstance(Layer.succeed(AnnounceGap, 3_600_000))
    const reader = secondInstance(Layer.succeed(FeedSweep, 50))
    try {
      const { workspace, actor } = await newWorkspace("live", writer)
      const got: Array<number> = []
      const errors: Array<unknown> = []
      const unsubscribe = await run(
        EventFeed.use((f) =>
          Effect.promise(() =>
            f.subscribe({
              workspaceId: workspace.id,
              accept: () => true,
              onEvent: (e) => got.push(e.sequence),
              onError: (cause) => errors.push(cause),
            }),
          ),
        ),
        reader,
      )
      // The first append carries the announcement: wait until the reader has heard it and the stream has the
      // event, so that no pull it causes can find what follows, which only the sweep can.
      const announced = await hear(reader, workspace.id)
      const first = await appendVia(writer, actor, "probe.unannounced")
      await vi.waitFor(() => expect(announced.heard).toEqual([`${workspace.id}:${first.at(-1)!.sequence}`]), waitLong)
      await vi.waitFor(() => expect(got).toEqual(first.map((e) => e.sequence)), waitLong)
      const rest: Array<AuditEvent> = []
      for (let i = 0; i < 3; i++) rest.push(...(await appendVia(writer, actor, "probe.unannounced")))
      await vi.waitFor(() => expect(got).toEqual([...first, ...rest].map((e) => e.sequence)), waitLong)
      expect(errors).toEqual([])
      unsubscribe()
    } finally {
      await reader.dispose()
      await writer.dispose()
    }
  })

  it("announces the last of a run of direct appends to other instances a gap after it, with no append after it", async () => {
    const { workspace, actor } = await newWorkspace()
    const elsewhere = await hear(rt, workspace.id)
    // A gap longer than the run: only the first append carries the announcement, the last comes by the timer.
    const second = secondInstance(Layer.succeed(AnnounceGap, 5_000))
    try {
      const appended: Array<AuditEvent> = []
      for (let i = 0; i < 5; i++) appended.push(...(await appendVia(second, actor, "probe.run")))
      const announcements = appended.map((e) => `${workspace.id}:${e.sequence}`)
      await vi.waitFor(() => expect(elsewhere.heard).toContain(announcements.at(-1)), { timeout: 15_000, interval: 10 })
      expect(elsewhere.heard.filter((p) => announcements.includes(p))).toEqual([announcements[0], announcements.at(-1)])
    } finally {
      await second.dispose()
      await elsewhere.stop()
    }
  })
})

describe("input the store cannot hold", () => {
  // PostgreSQL text and jsonb cannot store U+0000, and jsonb refuses lone UTF-16 surrogates (I-JSON and
  // RFC 8785 exclude them too). A client can send either in valid JSON ("\u0000", "\ud800"); the domain
  // must refuse them as invalid input (422), not let the INSERT fail as a defect (500 INTERNAL_ERROR).
  const cases: ReadonlyArray<[string, { name: string; metadata?: Record<string, unknown> }, string]> = [
    ["U+0000 in the name", { name: "nul\u0000name" }, "name"],
    ["U+0000 in a metadata value", { name: "nul-meta-value", metadata: { note: "a\u0000b" } }, "metadata.note"],
    ["U+0000 in a metadata key", { name: "nul-meta-key", metadata: { "k\u0000": 1 } }, "metadata.k\u0000"],
    ["a lone surrogate in the name", { name: "lone\ud800" }, "name"],
    ["a lone surrogate in metadata", { name: "lone-meta", metadata: { note: "x\udc00" } }, "metadata.note"],
  ]
  for (const [what, input, field] of cases) {
    it(`refuses ${what} as InvalidInput, leaving nothing behind`, async () => {
      const { workspace, actor } = await newWorkspace()
      const error = await runFailure(AgentService.use((s) => s.register(actor, input))).catch((defect) => ({
        _tag: "Defect",
        defect: String(defect).split("\n")[0],
      }))
      expect(error).toMatchObject({ _tag: "InvalidInput", field })
      expect((await eventsOf(workspace.id)).map((e) => e.type)).toEqual(["workspace.created", "apikey.created"])
    })
  }
})
