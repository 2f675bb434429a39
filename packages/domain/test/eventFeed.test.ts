import { Effect, Layer, ManagedRuntime } from "effect"
import { describe, expect, it, vi } from "vitest"
import type { AuditEvent } from "../src/audit/AuditEvent.ts"
import { EVENTS_CHANNEL } from "../src/audit/AuditLog.ts"
import { EventFeed, FeedSweep } from "../src/audit/EventFeed.ts"
import { type EventQuery, EventRepo, type EventRow, toEvent } from "../src/audit/EventRepo.ts"
import { compileFilters, matchesFilters } from "../src/audit/eventFilters.ts"
import { storelessDatabase } from "./runtime.ts"

const WS = "ws_1"

const row = (sequence: number, type = "test.tick"): EventRow => ({
  workspace_id: WS,
  sequence,
  id: `evt_${sequence}`,
  type,
  agent_id: null,
  actor_type: "system",
  actor_id: null,
  data: {},
  ts: new Date(0),
  occurred_at: null,
  prev_hash: "0".repeat(64),
  hash: "0".repeat(64),
})

/**
 * The feed over a store whose page reads take their snapshot when issued (as a statement does when it runs) and
 * answer only when the test says so, and an events channel the test announces on: every step is the test's.
 */
const setup = async () => {
  const committed: Array<EventRow> = []
  const reads: Array<{ after: number; answer: () => void }> = []
  /** Rows handed out, by every read: what the store sent over the wire. */
  let rowsRead = 0
  let announce: (payload: string) => void = () => {}
  const repo = Layer.succeed(EventRepo)(
    EventRepo.of({
      batch: (_ws: string, after: number, limit: number) =>
        Effect.promise(() => {
          const snapshot = committed.filter((r) => r.sequence > after).slice(0, limit)
          rowsRead += snapshot.length
          return new Promise<ReadonlyArray<EventRow>>((resolve) =>
            reads.push({ after, answer: () => resolve(snapshot) }),
          )
        }),
      // As the SQL does: the filters, the agent and the sequence range, newest first.
      list: (_ws: string, q: EventQuery) =>
        Effect.sync(() => {
          const rows = committed
            .filter(
              (r) =>
                (q.filters === undefined || matchesFilters(q.filters, r.type)) &&
                (q.agentId === undefined || r.agent_id === q.agentId) &&
                (q.fromSequence === undefined || r.sequence >= q.fromSequence) &&
                (q.toSequence === undefined || r.sequence <= q.toSequence),
            )
            .reverse()
            .slice(0, q.limit)
          rowsRead += rows.length
          return rows.map(toEvent)
        }),
      head: () => Effect.succeed(committed.length === 0 ? undefined : { sequence: committed.length, hash: "" }),
      find: () => Effect.succeed(undefined as AuditEvent | undefined),
    } as unknown as EventRepo["Service"]),
  )
  const db = storelessDatabase(async (channel, onMessage) => {
    expect(channel).toBe(EVENTS_CHANNEL)
    announce = onMessage
    return async () => {}
  })
  const feed = await Effect.runPromise(
    Effect.scoped(
      EventFeed.useSync((f) => f).pipe(Effect.provide(EventFeed.layer.pipe(Layer.provide(Layer.mergeAll(repo, db))))),
    ),
  )
  const settle = () => new Promise((r) => setImmediate(r))
  return {
    feed,
    commit: (n: number, type?: string) => {
      for (let i = 0; i < n; i++) committed.push(row(committed.length + 1, type))
    },
    rowsRead: () => rowsRead,
    /** Deletes a stored event (a tampered store: the chain's verification reports it). */
    remove: (sequence: number) => {
      committed.splice(
        committed.findIndex((r) => r.sequence === sequence),
        1,
      )
    },
    announce: () => announce(`${WS}:${committed.length}`),
    reads,
    /** Answers the pending read that asked for events after `after`. */
    answer: async (after: number) => {
      const i = reads.findIndex((r) => r.after === after)
      expect(i, `a read after ${after} is pending`).toBeGreaterThanOrEqual(0)
      reads.splice(i, 1)[0]!.answer()
      await settle()
    },
    settle,
  }
}

describe("EventFeed", () => {
  it("delivers an event the live fetch read while the subscriber was catching up (resumed stream)", async () => {
    const f = await setup()
    f.commit(3)
    const got: Array<number> = []
    await f.feed.subscribe({
      workspaceId: WS,
      afterSequence: 1,
      accept: () => true,
      onEvent: (e) => got.push(e.sequence),
      onError: (cause) => {
        throw cause
      },
    })
    // The catch-up's read (after 1) ran before event 4 committed; the live fetch (after 3) after it.
    f.commit(1)
    f.announce()
    await f.answer(3)
    await f.answer(1)
    // Nothing else is recorded in the workspace: event 4 must not wait for a next event to come.
    for (let i = 0; i < 5 && f.reads.length > 0; i++) await f.answer(f.reads[0]!.after)
    expect(got).toEqual([2, 3, 4])
  })

  it("delivers each event once, in order, to a live subscriber and a resumed one", async () => {
    const f = await setup()
    f.commit(2)
    const live: Array<number> = []
    const resumed: Array<number> = []
    const sub = (afterSequence: number | undefined, into: Array<number>) =>
      f.feed.subscribe({
        workspaceId: WS,
        afterSequence,
        accept: () => true,
        onEvent: (e) => into.push(e.sequence),
        onError: (cause) => {
          throw cause
        },
      })
    await sub(undefined, live)
    await f.answer(2)
    await sub(0, resumed)
    f.commit(2)
    f.announce()
    for (let i = 0; i < 10 && f.reads.length > 0; i++) await f.answer(f.reads[0]!.after)
    expect(live).toEqual([3, 4])
    expect(resumed).toEqual([1, 2, 3, 4])
  })

  it("catching up with filters, reads only the events that match, then goes on live", async () => {
    const f = await setup()
    f.commit(1, "keep.one")
    f.commit(1200, "noise.tick")
    f.commit(1, "keep.two")
    f.commit(700, "noise.tick")
    const compiled = compileFilters(["keep.*"])
    if (!compiled.ok) throw new Error("filters")
    const got: Array<string> = []
    await f.feed.subscribe({
      workspaceId: WS,
      afterSequence: 0,
      accept: (e) => matchesFilters(compiled.compiled, e.type),
      onEvent: (e) => got.push(`${e.sequence}:${e.type}`),
      onError: (cause) => {
        throw cause
      },
      narrow: { filters: compiled.compiled },
    })
    for (let i = 0; i < 20; i++) await f.settle()
    expect(got).toEqual(["1:keep.one", "1202:keep.two"])
    // Not the 1,902 events since the resume point: those two only.
    expect(f.rowsRead()).toBe(2)
    f.commit(1, "noise.tick")
    f.commit(1, "keep.three")
    f.announce()
    for (let i = 0; i < 5 && f.reads.length > 0; i++) await f.answer(f.reads[0]!.after)
    expect(got).toEqual(["1:keep.one", "1202:keep.two", "1904:keep.three"])
  })

  it("steps over an event missing from the store instead of reading for it without end", async () => {
    const f = await setup()
    f.commit(5)
    f.remove(3)
    const got: Array<number> = []
    await f.feed.subscribe({
      workspaceId: WS,
      afterSequence: 1,
      accept: () => true,
      onEvent: (e) => got.push(e.sequence),
      onError: (cause) => {
        throw cause
      },
    })
    for (let i = 0; i < 20 && f.reads.length > 0; i++) await f.answer(f.reads[0]!.after)
    expect(f.reads, "no read left pending: the catch-up ended").toHaveLength(0)
    expect(got).toEqual([2, 4, 5])
  })
  /** A feed over a store that fails `failures` reads from when `fail()` is called, with a sweep every 20 ms. */
  const sweptFeed = async (failures: number) => {
    const committed: Array<EventRow> = []
    let failing = 0
    let failedLooks = 0
    const repo = Layer.succeed(EventRepo)(
      EventRepo.of({
        batch: (_ws: string, after: number, limit: number) =>
          Effect.suspend(() => {
            if (failing > 0) {
              failing -= 1
              failedLooks += 1
              return Effect.die(new Error("the store did not answer"))
            }
            return Effect.succeed(committed.filter((r) => r.sequence > after).slice(0, limit))
          }),
        head: () => Effect.succeed(committed.length === 0 ? undefined : { sequence: committed.length, hash: "" }),
      } as unknown as EventRepo["Service"]),
    )
    // Nothing is ever announced: only the sweep can find an event.
    const runtime = ManagedRuntime.make(
      EventFeed.layer.pipe(Layer.provide(Layer.mergeAll(repo, storelessDatabase(), Layer.succeed(FeedSweep, 20)))),
    )
    const feed = await runtime.runPromise(EventFeed.useSync((f) => f))
    const got: Array<number> = []
    const errors: Array<unknown> = []
    await feed.subscribe({
      workspaceId: WS,
      accept: () => true,
      onEvent: (e) => got.push(e.sequence),
      onError: (cause) => errors.push(cause),
    })
    return {
      got,
      errors,
      failedLooks: () => failedLooks,
      commit: () => committed.push(row(committed.length + 1)),
      fail: () => {
        failing = failures
      },
      dispose: () => runtime.dispose(),
    }
  }

  it("finds unannounced events by its sweep, and failed looks of the sweep's close no stream", async () => {
    const f = await sweptFeed(2)
    try {
      f.fail()
      f.commit()
      await vi.waitFor(() => expect(f.got).toEqual([1]), { timeout: 5_000, interval: 10 })
      expect(f.failedLooks()).toBe(2)
      expect(f.errors).toEqual([])
    } finally {
      await f.dispose()
    }
  })

  it("closes its streams when the sweep's looks keep failing", async () => {
    const f = await sweptFeed(1_000)
    try {
      f.fail()
      f.commit()
      await vi.waitFor(() => expect(f.errors).toHaveLength(1), { timeout: 5_000, interval: 10 })
      expect(f.failedLooks()).toBeGreaterThanOrEqual(3)
      expect(f.got).toEqual([])
    } finally {
      await f.dispose()
    }
  })
})
