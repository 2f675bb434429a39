import { randomBytes } from "node:crypto"
import { makeTestStore, type TestStore } from "@agentgov/testing"
import { Effect, Layer, ManagedRuntime } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { matchesFilters } from "../../src/audit/eventFilters.ts"
import {
  AuditLog,
  Counters,
  compileFilters,
  DEFAULT_RATE_LIMITS,
  DomainLayer,
  MasterKey,
  RateLimitSettings,
  SCOPES,
  systemActor,
  TokenSettings,
  WebhookService,
  WorkspaceService,
} from "../../src/index.ts"

describe("compileFilters", () => {
  it("keeps the filters as given (de-duplicated) and compiles aliases and prefixes", () => {
    expect(compileFilters(["agent.*", "enforcement.issued", "custom.thing", "agent.*", "*"])).toEqual({
      ok: true,
      events: ["agent.*", "enforcement.issued", "custom.thing", "*"],
      compiled: { all: true, types: ["enforcement.created", "custom.thing"], prefixes: ["agent."] },
    })
  })

  it.each([
    [["Agent.registered"], 0],
    [["agent"], 0],
    [["ok.name", "agent*"], 1],
    [["ok.name", "*.registered"], 1],
    [["agent.*.x"], 0],
    [["agent..x"], 0],
    [[".*"], 0],
    [["agent.**"], 0],
  ])("refuses %j, naming index %i", (filters, index) => {
    expect(compileFilters(filters)).toEqual({ ok: false, index, issue: expect.any(String) })
  })
})

describe("the append statement matches as the filters say", () => {
  let store: TestStore
  let rt: ManagedRuntime.ManagedRuntime<any, never>
  beforeAll(async () => {
    store = await makeTestStore()
    const settings = Layer.mergeAll(
      MasterKey.layer(randomBytes(32)),
      TokenSettings.layer({ issuer: "http://test", audience: "agentgov", ttlSeconds: 900 }),
      RateLimitSettings.layer(DEFAULT_RATE_LIMITS),
      Counters.memory,
    )
    rt = ManagedRuntime.make(DomainLayer.pipe(Layer.provideMerge(Layer.merge(store.layer, settings))))
  })
  afterAll(async () => {
    await rt?.dispose()
    await store?.cleanup()
  })

  it("exact names, prefix.*, * and aliases: every webhook gets exactly the events its filters match", async () => {
    const filterSets = [
      ["*"],
      ["agent.*"],
      ["agent.registered"],
      ["enforcement.issued"],
      ["enforcement.*", "policy.denied"],
      ["custom.a.*"],
      ["custom.a"],
      ["trust.score.changed", "trust.*"],
    ]
    const types = [
      "agent.registered",
      "agent.updated",
      "agentx.registered",
      "enforcement.created",
      "policy.denied",
      "policy.evaluated",
      "custom.a",
      "custom.a.b",
      "custom.ab",
      "trust.score.changed",
    ]
    const matched = await rt.runPromise(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const admin = systemActor("ws_none", "live", new Set(SCOPES))
        const ws = yield* WorkspaceService.use((s) => s.create(admin, { name: "filters" }))
        const actor = systemActor(ws.workspace.id, "live", new Set(SCOPES))
        const hooks = []
        for (const events of filterSets) {
          const w = yield* WebhookService.use((s) => s.create(actor, { url: "http://93.184.216.34/", events }))
          hooks.push({ id: (w as { id: string }).id, events })
        }
        // Only these events' deliveries are judged: creating the webhooks recorded webhook.created too.
        const appended = yield* sql.withTransaction(
          AuditLog.use((a) =>
            a.append(
              actor,
              types.map((type) => ({ type, data: {} })),
            ),
          ),
        )
        const rows = yield* sql<{ webhook_id: string; event_type: string }>`SELECT webhook_id, event_type
            FROM webhook_deliveries
            WHERE workspace_id = ${ws.workspace.id} AND event_id IN ${sql.in(appended.map((e) => e.id))}`
        return hooks.map((h) => ({
          events: h.events,
          got: rows
            .filter((r) => r.webhook_id === h.id)
            .map((r) => r.event_type)
            .sort(),
        }))
      }).pipe(Effect.orDie),
    )
    for (const { events, got } of matched) {
      const compiled = compileFilters(events)
      if (!compiled.ok) throw new Error("bad test filters")
      expect(got, JSON.stringify(events)).toEqual(types.filter((t) => matchesFilters(compiled.compiled, t)).sort())
    }
    // Spot checks of the rule itself.
    expect(matched[1]!.got).toEqual(["agent.registered", "agent.updated"])
    expect(matched[3]!.got).toEqual(["enforcement.created"])
    expect(matched[5]!.got).toEqual(["custom.a.b"])
  })
})
