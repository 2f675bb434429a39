import { AuditLog, connectionFailed, SCOPES, systemActor, WebhookService } from "@agentgov/domain"
import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { expectError, startTestServer, type TestServer, unique } from "./helpers.ts"
import {
  type Answer,
  eventually,
  type Received,
  type Receiver,
  signedWith,
  sleep,
  startReceiver,
} from "./webhooks-support.ts"

/**
 * The delivery engine end to end on a sped-up clock (AGENTGOV_WEBHOOK_TIME_SCALE): the retry
 * schedules A and B, time-outs, disabling after the last failure and on 410 Gone, pausing and
 * resuming, and redelivery. Timings are asserted as recorded values (nextRetryAt against
 * attemptedAt and responseTimeMs), never against the wall clock.
 */

interface Rig {
  t: TestServer
  r: Receiver
  answers: Map<string, (x: Received) => Answer>
}

const rig = (scale: number) => {
  const self = {} as Rig
  beforeAll(async () => {
    self.t = await startTestServer({ webhookTimeScale: scale, webhookAllowlist: ["127.0.0.1"] })
    self.r = await startReceiver()
    self.answers = new Map()
    self.r.answer = (x) => self.answers.get(new URL(x.url, "http://x").searchParams.get("w") ?? "")?.(x) ?? 200
  })
  afterAll(async () => {
    await self.t?.close()
    await self.r?.close()
  })
  return self
}

const helpers = (s: Rig) => {
  const at = (tag: string) => s.r.received.filter((x) => x.url === `/hook?w=${tag}`)
  const create = async (tag: string, body: Record<string, unknown>) => {
    const res = await s.t.call("POST", "/api/v1/webhooks", { body: { url: `${s.r.url}?w=${tag}`, ...body } })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    return res.body.data as { id: string; secret: string }
  }
  const ingest = async (type: string, data: Record<string, unknown> = {}) => {
    const res = await s.t.call("POST", "/api/v1/events/ingest", { body: { events: [{ type, data }] } })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    return res.body.data.events[0].id as string
  }
  const webhook = async (id: string, limit = 100) =>
    (await s.t.call("GET", `/api/v1/webhooks/${id}?includeDeliveries=true&limit=${limit}`)).body.data
  const disabled = (id: string, ms = 30_000) =>
    eventually(
      async () => {
        const w = await webhook(id)
        return w.enabled ? undefined : w
      },
      ms,
      `webhook ${id} to be disabled`,
    )
  /** Waits until `n` attempts are recorded; returns them oldest first. */
  const attempts = async (id: string, n: number, ms = 30_000) =>
    eventually(
      async () => {
        const w = await webhook(id)
        return w.deliveries.length >= n ? [...w.deliveries].reverse() : undefined
      },
      ms,
      `${n} recorded attempts`,
    )
  const deliveryRows = (webhookId: string) =>
    s.t.server.runtime.runPromise(
      SqlClient.SqlClient.use(
        (sql) =>
          sql<{ id: string; event_id: string; status: string; attempts: number; next_attempt_at: Date | null }>`
          SELECT id, event_id, status, attempts, next_attempt_at FROM webhook_deliveries WHERE webhook_id = ${webhookId}
          ORDER BY created_at`,
      ),
    )
  /** The spacing the schedule put after each failed attempt: nextRetryAt − (attemptedAt + responseTimeMs). */
  const spacing = (recorded: ReadonlyArray<any>) =>
    recorded
      .filter((a) => a.nextRetryAt !== undefined)
      .map((a) => Date.parse(a.nextRetryAt) - Date.parse(a.attemptedAt) - a.responseTimeMs)
  /** Each attempt started no earlier than the retry time its predecessor recorded. */
  const expectInOrder = (recorded: ReadonlyArray<any>) => {
    for (let i = 1; i < recorded.length; i++) {
      expect(recorded[i].attempt).toBe(recorded[i - 1].attempt + 1)
      expect(Date.parse(recorded[i].attemptedAt)).toBeGreaterThanOrEqual(Date.parse(recorded[i - 1].nextRetryAt))
    }
  }
  /** The `data` of every `webhook.disabled` event about this webhook (D8: the worker's change is recorded). */
  const disabledEvents = async (id: string) =>
    (await s.t.call("GET", "/api/v1/events?type=webhook.disabled&limit=100")).body.data
      .map((e: { data: { webhookId: string } }) => e.data)
      .filter((d: { webhookId: string }) => d.webhookId === id)
  return { at, create, ingest, webhook, disabled, disabledEvents, attempts, deliveryRows, spacing, expectInOrder }
}

describe("schedule A (exponential), clock 50× fast", () => {
  const s = rig(0.02)
  const h = helpers(s)

  it("five attempts spaced 1, 2, 4, 8 s (scaled), then the webhook is disabled; re-enabled, it delivers again", async () => {
    const w = await h.create("a", { events: ["sched.a"] })
    s.answers.set("a", () => 500)
    const eventId = await h.ingest("sched.a", { n: 1 })
    const off = await h.disabled(w.id)
    expect(off.disabledReason).toBe("all_attempts_failed")
    expect(off.disabledAt).toEqual(expect.any(String))
    expect(off.stats).toEqual({ total: 5, successful: 0, failed: 5, successRate: 0 })

    const recorded = [...off.deliveries].reverse()
    expect(recorded.map((a: any) => a.attempt)).toEqual([1, 2, 3, 4, 5])
    expect(
      recorded.every((a: any) => a.status === "failed" && a.statusCode === 500 && a.eventId === eventId),
      JSON.stringify(recorded),
    ).toBe(true)
    expect(new Set(recorded.map((a: any) => a.id)).size).toBe(1)
    expect(h.spacing(recorded)).toEqual([20, 40, 80, 160])
    expect(recorded[4].nextRetryAt).toBeUndefined()
    h.expectInOrder(recorded)
    // D8: the worker's change is recorded, naming the delivery that caused it.
    expect(await h.disabledEvents(w.id)).toEqual([
      { webhookId: w.id, reason: "all_attempts_failed", deliveryId: recorded[0].id, eventId },
    ])

    // The receiver saw the same five, each signed, numbered in metadata, under one delivery id.
    const seen = h.at("a")
    expect(seen.map((x) => x.body.metadata.attempt)).toEqual([1, 2, 3, 4, 5])
    expect(new Set(seen.map((x) => x.headers["x-svc-webhook-id"]))).toEqual(new Set([recorded[0].id]))
    expect(seen.every((x) => signedWith(x, w.secret))).toBe(true)
    // Finished: no further attempt is due.
    expect(await h.deliveryRows(w.id)).toEqual([
      expect.objectContaining({ status: "failed", attempts: 5, next_attempt_at: null }),
    ])

    // Events recorded while disabled get no delivery at all.
    const missed = await h.ingest("sched.a", { n: 2 })
    expect((await h.deliveryRows(w.id)).map((d) => d.event_id)).toEqual([eventId])

    s.answers.set("a", () => 200)
    const on = await s.t.call("PATCH", `/api/v1/webhooks/${w.id}`, { body: { enabled: true } })
    expect(on.body.data).toMatchObject({ enabled: true, disabledReason: null, disabledAt: null })
    const later = await h.ingest("sched.a", { n: 3 })
    await s.r.waitFor(() => h.at("a").some((x) => x.body.id === later), 10_000, "the delivery after re-enabling")
    const after = await eventually(async () => {
      const x = await h.webhook(w.id)
      return x.stats.successful === 1 ? x : undefined
    })
    expect(after.deliveries[0]).toMatchObject({ eventId: later, status: "success", statusCode: 200, attempt: 1 })
    expect(after.stats).toEqual({ total: 6, successful: 1, failed: 5, successRate: 1 / 6 })
    expect(h.at("a").some((x) => x.body.id === missed)).toBe(false)
  })

  it("an endpoint that never answers fails each attempt at the (scaled) time-out", async () => {
    const w = await h.create("hang", { events: ["sched.hang"] })
    s.answers.set("hang", () => "hang")
    await h.ingest("sched.hang")
    const off = await h.disabled(w.id)
    expect(off.disabledReason).toBe("all_attempts_failed")
    const recorded = [...off.deliveries].reverse()
    expect(recorded).toHaveLength(5)
    for (const a of recorded) {
      expect(a.status).toBe("failed")
      expect("statusCode" in a).toBe(false)
      // 10 s × 0.02 is 200 ms; scaled time-outs never go below 1 s (a loaded machine answers late).
      expect(a.error).toBe(connectionFailed(1000))
      expect(a.responseTimeMs).toBeGreaterThanOrEqual(999)
    }
    expect(h.spacing(recorded)).toEqual([20, 40, 80, 160])
    expect(h.at("hang")).toHaveLength(5)
  })

  it("410 Gone disables the webhook at once: one attempt, no retry, no more deliveries", async () => {
    const w = await h.create("gone", { events: ["sched.gone"] })
    s.answers.set("gone", () => 410)
    await h.ingest("sched.gone")
    const off = await h.disabled(w.id)
    expect(off.disabledReason).toBe("endpoint_gone")
    expect(off.deliveries).toHaveLength(1)
    expect(off.deliveries[0]).toMatchObject({ attempt: 1, status: "failed", statusCode: 410 })
    expect(off.deliveries[0].nextRetryAt).toBeUndefined()
    expect(await h.deliveryRows(w.id)).toEqual([expect.objectContaining({ status: "failed", next_attempt_at: null })])
    expect(await h.disabledEvents(w.id)).toEqual([
      {
        webhookId: w.id,
        reason: "endpoint_gone",
        deliveryId: off.deliveries[0].id,
        eventId: off.deliveries[0].eventId,
      },
    ])
    await h.ingest("sched.gone")
    expect(await h.deliveryRows(w.id)).toHaveLength(1)
    expect(h.at("gone")).toHaveLength(1)
  })

  it("disabling pauses a pending retry; enabling resumes it", async () => {
    // Extended: the first retry waits 30 s × 0.02 = 600 ms, time enough to disable the webhook first on a quiet
    // machine. On a loaded one the PATCH may land after the retry went: the receiver fails every attempt until the
    // webhook is enabled again, so the retry then waiting is paused all the same (the next wait 2.4 s, then 12 s).
    const w = await h.create("pause", { events: ["sched.pause"], retryPolicy: "extended" })
    let resumed = false
    s.answers.set("pause", () => (resumed ? 200 : 500))
    await h.ingest("sched.pause")
    await s.r.waitFor(() => h.at("pause").length === 1, 10_000, "the first attempt")
    const off = await s.t.call("PATCH", `/api/v1/webhooks/${w.id}`, { body: { enabled: false } })
    expect(off.body.data.enabled).toBe(false)
    // Paused, with every attempt the receiver saw recorded.
    const [row] = await eventually(async () => {
      const rows = await h.deliveryRows(w.id)
      const r = rows[0]
      return r?.status === "paused" && r.attempts >= 1 && r.attempts === h.at("pause").length ? rows : undefined
    })
    const sent = row!.attempts as number
    // Past the time the retry was due (and at least 1.2 s): paused, it was not sent.
    const dueIn = (row!.next_attempt_at?.getTime() ?? Date.now()) - Date.now()
    await sleep(Math.max(1_200, dueIn + 500))
    expect(h.at("pause")).toHaveLength(sent)
    resumed = true
    await s.t.call("PATCH", `/api/v1/webhooks/${w.id}`, { body: { enabled: true } })
    await s.r.waitFor(() => h.at("pause").length === sent + 1, 10_000, "the resumed attempt")
    expect(h.at("pause")[sent]!.body.metadata.attempt).toBe(sent + 1)
    const recorded = await h.attempts(w.id, sent + 1)
    expect(recorded.map((a: any) => [a.attempt, a.status])).toEqual([
      ...Array.from({ length: sent }, (_, i) => [i + 1, "failed"]),
      [sent + 1, "success"],
    ])
  })

  it("a deleted workspace's deliveries get no retry, its last event one attempt, and nothing is disabled", async () => {
    const made = await s.t.call("POST", "/api/v1/workspaces", { body: { name: unique("webhooks-gone") } })
    expect(made.status, JSON.stringify(made.body)).toBe(201)
    const key = made.body.data.apiKey.apiKey as string
    const res = await s.t.call("POST", "/api/v1/webhooks", {
      key,
      body: { url: `${s.r.url}?w=wsgone`, events: ["sched.wsgone", "workspace.deleted"], retryPolicy: "extended" },
    })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    const webhookId = res.body.data.id as string
    // The first attempt hangs to its 1 s time-out and its retry follows 600 ms later: the workspace goes meanwhile.
    s.answers.set("wsgone", (x) => (x.body.type === "sched.wsgone" ? "hang" : 500))
    const ingested = await s.t.call("POST", "/api/v1/events/ingest", {
      key,
      body: { events: [{ type: "sched.wsgone", data: {} }] },
    })
    expect(ingested.status, JSON.stringify(ingested.body)).toBe(201)
    await s.r.waitFor(() => h.at("wsgone").length === 1, 10_000, "the first attempt")
    const gone = await s.t.call("DELETE", `/api/v1/workspaces/${made.body.data.workspace.id}`)
    expect(gone.status, JSON.stringify(gone.body)).toBe(200)
    const rows = await eventually(async () => {
      const all = await h.deliveryRows(webhookId)
      return all.length === 2 && all.every((r) => r.status === "failed") ? all : undefined
    })
    expect(rows.map((r) => [r.attempts, r.next_attempt_at])).toEqual([
      [2, null],
      [1, null],
    ])
    const recorded = await s.t.query<{
      event_type: string
      attempt: number
      status_code: number | null
      error: string
    }>(
      (sql) =>
        sql`SELECT event_type, attempt, status_code, error FROM webhook_attempts WHERE webhook_id = ${webhookId}
          ORDER BY event_type DESC, attempt`,
    )
    expect(recorded).toEqual([
      { event_type: "workspace.deleted", attempt: 1, status_code: 500, error: "HTTP 500" },
      { event_type: "sched.wsgone", attempt: 1, status_code: null, error: connectionFailed(1000) },
      { event_type: "sched.wsgone", attempt: 2, status_code: null, error: "not sent: the workspace was deleted" },
    ])
    expect(h.at("wsgone").map((x) => x.body.type)).toEqual(["sched.wsgone", "workspace.deleted"])
    const [webhookRow] = await s.t.query<{ enabled: boolean }>(
      (sql) => sql`SELECT enabled FROM webhooks WHERE id = ${webhookId}`,
    )
    expect(webhookRow!.enabled).toBe(true)
  })

  it("redeliver re-sends failed deliveries in a new round, numbering on; refuses what it cannot do", async () => {
    const w = await h.create("redo", { events: ["sched.redo"] })
    s.answers.set("redo", () => 500)
    const first = await h.ingest("sched.redo", { n: 1 })
    await h.disabled(w.id)
    const [failed] = await h.deliveryRows(w.id)
    expect(failed!.status).toBe("failed")

    const path = `/api/v1/webhooks/${w.id}/redeliver`
    expectError(await s.t.call("POST", path, { body: { deliveryIds: [failed!.id] } }), 409, "WEBHOOK_DISABLED")
    s.answers.set("redo", () => 200)
    await s.t.call("PATCH", `/api/v1/webhooks/${w.id}`, { body: { enabled: true } })
    expectError(await s.t.call("POST", path, { body: {} }), 422, "VALIDATION_ERROR", "deliveryIds")
    expectError(
      await s.t.call("POST", path, { body: { since: "2030-01-01T00:00:00Z", until: "2029-01-01T00:00:00Z" } }),
      422,
      "VALIDATION_ERROR",
      "until",
    )
    expectError(
      await s.t.call("POST", path, { body: { deliveryIds: [failed!.id, "dlv_nope"] } }),
      422,
      "VALIDATION_ERROR",
      "deliveryIds[1]",
    )
    expectError(await s.t.call("POST", path, { body: { since: "yesterday" } }), 422, "VALIDATION_ERROR", "since")
    expect((await h.deliveryRows(w.id))[0]!.status).toBe("failed")

    const res = await s.t.call("POST", path, { body: { deliveryIds: [failed!.id] } })
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    expect(res.body.data).toEqual({
      queued: [{ id: failed!.id, eventId: first, eventType: "sched.redo", attempt: 6 }],
      skipped: [],
      hasMore: false,
    })
    await s.r.waitFor(() => h.at("redo").length === 6, 10_000, "the redelivery")
    const resent = h.at("redo")[5]!
    expect(resent.headers["x-svc-webhook-id"]).toBe(failed!.id)
    expect(resent.body).toMatchObject({ id: first, metadata: { attempt: 6, deliveryId: failed!.id } })
    const recorded = await h.attempts(w.id, 6)
    expect(recorded.at(-1)).toMatchObject({ attempt: 6, status: "success", statusCode: 200 })

    // Not failed any more: named again, it is skipped.
    const again = await s.t.call("POST", path, { body: { deliveryIds: [failed!.id] } })
    expect(again.body.data).toEqual({ queued: [], skipped: [{ id: failed!.id, status: "success" }], hasMore: false })
    // D8: the one call that queued something recorded it; the refused ones and the one that queued nothing did not.
    const redelivered = (await s.t.call("GET", "/api/v1/events?type=webhook.redelivered&limit=100")).body.data
      .map((e: { data: { webhookId: string } }) => e.data)
      .filter((d: { webhookId: string }) => d.webhookId === w.id)
    expect(redelivered).toEqual([{ webhookId: w.id, queued: 1 }])

    // By time: every failed delivery of events in the window, oldest first.
    const since = new Date().toISOString()
    s.answers.set("redo", () => 500)
    const a = await h.ingest("sched.redo", { n: 2 })
    await h.disabled(w.id)
    const b = await h.ingest("sched.redo", { n: 3 })
    expect((await h.deliveryRows(w.id)).map((d) => d.event_id)).toEqual([first, a])
    s.answers.set("redo", () => 200)
    await s.t.call("PATCH", `/api/v1/webhooks/${w.id}`, { body: { enabled: true } })
    const byTime = await s.t.call("POST", path, { body: { since } })
    expect(byTime.body.data.queued.map((q: any) => [q.eventId, q.attempt])).toEqual([[a, 6]])
    expect(byTime.body.data.hasMore).toBe(false)
    await s.r.waitFor(() => h.at("redo").some((x) => x.body.id === a && x.body.metadata.attempt === 6))
    expect(h.at("redo").some((x) => x.body.id === b)).toBe(false)
  })
})

describe("schedule B (extended), clock 10,000× fast", () => {
  const s = rig(0.0001)
  const h = helpers(s)

  it("eight attempts spaced 30 s, 2 min, 10 min, 30 min, 2 h, 8 h, 24 h (scaled), then the webhook is disabled", async () => {
    const w = await h.create("b", { events: ["sched.b"], retryPolicy: "extended" })
    s.answers.set("b", () => 503)
    await h.ingest("sched.b")
    const off = await h.disabled(w.id, 60_000)
    expect(off.disabledReason).toBe("all_attempts_failed")
    const recorded = [...off.deliveries].reverse()
    expect(recorded.map((a: any) => a.attempt)).toEqual([1, 2, 3, 4, 5, 6, 7, 8])
    expect(recorded.every((a: any) => a.status === "failed" && a.statusCode === 503)).toBe(true)
    expect(h.spacing(recorded)).toEqual([3, 12, 60, 180, 720, 2880, 8640])
    expect(recorded[7].nextRetryAt).toBeUndefined()
    h.expectInOrder(recorded)
    expect(h.at("b").map((x) => x.body.metadata.attempt)).toEqual([1, 2, 3, 4, 5, 6, 7, 8])
    expect(off.stats).toEqual({ total: 8, successful: 0, failed: 8, successRate: 0 })
  }, 90_000)
})

describe("roles", () => {
  it("a worker-only process serves health checks, not the API, and delivers what any instance queued", async () => {
    const t = await startTestServer({ roles: ["worker"], webhookAllowlist: ["127.0.0.1"] })
    const r = await startReceiver()
    try {
      expect((await t.call("GET", "/healthz", { key: null })).status).toBe(200)
      expectError(await t.call("GET", "/api/v1/webhooks"), 404, "NOT_FOUND")
      const actor = systemActor(t.workspaceId, "live", new Set(SCOPES))
      await t.server.runtime.runPromise(
        Effect.gen(function* () {
          yield* WebhookService.use((s) => s.create(actor, { url: r.url, events: ["roles.*"] }))
          const sql = yield* SqlClient.SqlClient
          yield* sql.withTransaction(AuditLog.use((a) => a.append(actor, [{ type: "roles.event", data: {} }])))
        }).pipe(Effect.orDie),
      )
      await r.waitFor((all) => all.some((x) => x.body.type === "roles.event"), 10_000, "the delivery")
    } finally {
      await t.close()
      await r.close()
    }
  })

  it("an api-only process queues deliveries but sends none", async () => {
    const t = await startTestServer({ roles: ["api"], webhookAllowlist: ["127.0.0.1"] })
    const r = await startReceiver()
    try {
      const w = await t.call("POST", "/api/v1/webhooks", { body: { url: r.url, events: ["roles.*"] } })
      expect(w.status).toBe(201)
      await t.call("POST", "/api/v1/events/ingest", { body: { events: [{ type: "roles.api", data: {} }] } })
      await sleep(1_000)
      const rows = await t.server.runtime.runPromise(
        SqlClient.SqlClient.use(
          (sql) => sql<{ status: string; attempts: number }>`SELECT status, attempts FROM webhook_deliveries`,
        ),
      )
      expect(rows).toEqual([{ status: "pending", attempts: 0 }])
      expect(r.received).toEqual([])
    } finally {
      await t.close()
      await r.close()
    }
  })
})
