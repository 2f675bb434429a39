import { canonicalize } from "@agentgov/verifier"
import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { holdsUnstorableEscape } from "../../src/audit/AuditLog.ts"
import {
  type AuditEvent,
  AuditLog,
  EventAppender,
  prepareAppend,
  SCOPES,
  systemActor,
  WebhookService,
  WorkspaceService,
} from "../../src/index.ts"
import { type DomainTestRuntime, makeDomainRuntime } from "../runtime.ts"

let env: DomainTestRuntime
beforeAll(async () => {
  env = await makeDomainRuntime()
})
afterAll(async () => env?.dispose())

const newWorkspace = (name: string) =>
  env.run(
    Effect.gen(function* () {
      const admin = systemActor("ws_none", "live", new Set(SCOPES))
      const ws = yield* WorkspaceService.use((s) => s.create(admin, { name }))
      return systemActor(ws.workspace.id, "live", new Set(SCOPES))
    }),
  )

type Actor = Awaited<ReturnType<typeof newWorkspace>>

const addWebhook = (actor: Actor) =>
  env.run(WebhookService.use((s) => s.create(actor, { url: "http://93.184.216.34/", events: ["probe.*"] })))

const appendVia = (actor: Actor, type: string, n: number) =>
  env.run(
    EventAppender.use((a) => a.append({ actor, events: Array.from({ length: n }, (_, i) => ({ type, data: { i } })) })),
  ) as Promise<ReadonlyArray<AuditEvent>>

const stored = (workspaceId: string) =>
  env.run(
    SqlClient.SqlClient.use((sql) =>
      Effect.all({
        chain: sql<{
          sequence: number
          type: string
          prev_hash: string
          hash: string
        }>`SELECT sequence::int AS sequence,
            type, prev_hash, hash FROM events WHERE workspace_id = ${workspaceId} ORDER BY sequence`,
        deliveries: sql<{ event_type: string }>`SELECT event_type FROM webhook_deliveries
            WHERE workspace_id = ${workspaceId} ORDER BY event_sequence`,
      }),
    ),
  )

const expectLinear = (chain: ReadonlyArray<{ sequence: number; prev_hash: string; hash: string }>) =>
  chain.forEach((e, i) => {
    expect(e.sequence).toBe(i + 1)
    if (i > 0) expect(e.prev_hash).toBe(chain[i - 1]!.hash)
  })

const keysOf = (workspaceId: string) =>
  env.run(
    SqlClient.SqlClient.use((sql) =>
      sql<{ key: string }>`SELECT key FROM idempotency_keys WHERE workspace_id = ${workspaceId} ORDER BY key`.pipe(
        Effect.map((rows) => rows.map((r) => r.key)),
      ),
    ),
  )

const completed = (key: string) => ({
  key,
  operation: "probe.op",
  requestHash: `hash-of-${key}`,
  status: 201,
  body: "{}",
})

describe("the append statement's shapes", () => {
  it("queues deliveries for a webhook enabled after the group commit last saw the workspace without one", async () => {
    const actor = await newWorkspace("shapes-late-webhook")
    // The first append learns that the head counts no webhook; the second is written without the deliveries part.
    await appendVia(actor, "probe.before", 2)
    await appendVia(actor, "probe.before", 2)
    await addWebhook(actor)
    const after = await appendVia(actor, "probe.after", 3)
    expect(after).toHaveLength(3)
    await appendVia(actor, "probe.later", 1)
    const { chain, deliveries } = await stored(actor.workspaceId)
    expectLinear(chain)
    expect(deliveries.map((d) => d.event_type)).toEqual([...Array(3).fill("probe.after"), "probe.later"])
  })

  it("writes nothing from a head that counts no webhook once one is enabled, and the full shape then queues", async () => {
    const actor = await newWorkspace("shapes-direct")
    const workspaceId = actor.workspaceId
    await appendVia(actor, "probe.first", 1)
    await addWebhook(actor)
    // The head after the webhook's own event, as a writer that last saw it before the webhook would predict it.
    const last = (await stored(workspaceId)).chain.at(-1)!
    const head = { sequence: last.sequence, hash: last.hash }
    const prepared = prepareAppend(
      workspaceId,
      [{ actor, events: [{ type: "probe.next", data: {} }] }],
      head,
      Date.now(),
    )
    const write = (expected: typeof head & { webhooks?: number }) =>
      env.run(AuditLog.use((a) => Effect.promise(() => a.appendAtNow(workspaceId, prepared, expected))))
    expect(await write({ ...head, webhooks: 0 })).toBe(false)
    expect((await stored(workspaceId)).chain.at(-1)!.sequence).toBe(head.sequence)
    expect(await write(head)).toEqual({ ...prepared.head, webhooks: 1 })
    const { chain, deliveries } = await stored(workspaceId)
    expectLinear(chain)
    expect(chain.at(-1)!.hash).toBe(prepared.head.hash)
    expect(deliveries.map((d) => d.event_type)).toEqual(["probe.next"])
  })

  it("claims keys in the shape without deliveries, and claims nothing when a webhook makes it write nothing", async () => {
    const actor = await newWorkspace("shapes-keys")
    const workspaceId = actor.workspaceId
    const headNow = async () => {
      const last = (await stored(workspaceId)).chain.at(-1)!
      return { sequence: last.sequence, hash: last.hash, webhooks: 0 }
    }
    const prepare = (after: { sequence: number; hash: string }) =>
      prepareAppend(workspaceId, [{ actor, events: [{ type: "probe.keyed", data: {} }] }], after, Date.now())
    const write = (prepared: ReturnType<typeof prepare>, expected: { sequence: number; hash: string }, key: string) =>
      env.run(
        AuditLog.use((a) => Effect.promise(() => a.appendAtNow(workspaceId, prepared, expected, [completed(key)]))),
      )
    const first = await headNow()
    const lean = prepare(first)
    expect(await write(lean, first, "k-lean")).toEqual({ ...lean.head, webhooks: 0 })
    expect(await keysOf(workspaceId)).toEqual(["k-lean"])
    await addWebhook(actor)
    const second = await headNow()
    const refused = prepare(second)
    expect(await write(refused, second, "k-refused")).toBe(false)
    expect(await keysOf(workspaceId)).toEqual(["k-lean"])
    expect((await stored(workspaceId)).chain.at(-1)!.sequence).toBe(second.sequence)
  })
})

describe("escapes PostgreSQL's json readers refuse", () => {
  it("are found in canonical text, and only where they are escapes", () => {
    for (const text of ['{"s":"\\u0000"}', '["a\\ud800"]', '{"\\udfff":1}', '"\\\\\\u0000"', "\\u0000"])
      expect(holdsUnstorableEscape(text), text).toBe(true)
    // An escaped backslash before "u0000" is text; an astral character is raw in canonical JSON; other escapes pass.
    for (const text of ['{"s":"\\\\u0000"}', '{"s":"\\\\ud800"}', '{"s":"😀"}', '{"s":"\\u0001\\n"}', "{}"])
      expect(holdsUnstorableEscape(text), text).toBe(false)
    // What canonicalize writes, after runs of 0 to 4 backslashes: a NUL or a lone surrogate is an escape, the
    // characters "u0000" are text.
    for (let k = 0; k <= 4; k++) {
      const run = "\\".repeat(k)
      for (const bad of [`${run}\u0000`, `${run}${String.fromCharCode(0xdc00)}x`])
        expect(holdsUnstorableEscape(canonicalize({ s: bad })), JSON.stringify(bad)).toBe(true)
      for (const fine of [`${run}u0000`, `${run}ud800`, `${run}😀`])
        expect(holdsUnstorableEscape(canonicalize({ [fine]: fine })), JSON.stringify(fine)).toBe(false)
    }
  })

  it("are refused by prepareAppend", () => {
    const head = { sequence: 1, hash: "0".repeat(64) }
    const actor = systemActor("ws_any", "live", new Set(SCOPES))
    for (const data of [{ s: "a\u0000b" }, { [String.fromCharCode(0xd800)]: 1 }])
      expect(() => prepareAppend("ws_any", [{ actor, events: [{ type: "probe.bad", data }] }], head, 0)).toThrow(
        /cannot keep/,
      )
    expect(() =>
      prepareAppend("ws_any", [{ actor, events: [{ type: "probe.ok", data: { s: "\\u0000 as text" } }] }], head, 0),
    ).not.toThrow()
  })

  it("fail the one append that holds one; the appends made beside it are stored", async () => {
    const actor = await newWorkspace("shapes-unstorable")
    const exits = await env.run(
      Effect.all(
        [{ n: 0 }, { s: "a\u0000b" }, { n: 2 }].map((data) =>
          Effect.exit(EventAppender.use((a) => a.append({ actor, events: [{ type: "probe.batch", data }] }))),
        ),
        { concurrency: "unbounded" },
      ),
    )
    expect(exits.map((e) => e._tag)).toEqual(["Success", "Failure", "Success"])
    const { chain } = await stored(actor.workspaceId)
    expectLinear(chain)
    expect(chain.filter((e) => e.type === "probe.batch")).toHaveLength(2)
  })
})
