import { Database } from "@agentgov/db"
import { Context, Effect, Layer } from "effect"
import type { AuditEvent } from "./AuditEvent.ts"
import { EVENTS_CHANNEL } from "./AuditLog.ts"
import { EventRepo, toEvent } from "./EventRepo.ts"
import type { CompiledFilters } from "./eventFilters.ts"

const PAGE = 500

/**
 * Every live feed also looks for new events this often, announced or not. A notification can be missed without
 * the listening connection dropping (AuditLog.ts, ANNOUNCE_GAP_MS): an instance that stopped dead within the gap
 * of an append it had not yet announced to the others, or whose NOTIFY of its own failed. Such events reach
 * the streams within this. A look of the sweep's that fails closes no stream, unless SWEEP_FAILURES_TOLERATED
 * do in a row: the next one tries again.
 */
export const FEED_SWEEP_MS = 5_000

/** Failed looks of the sweep in a row that close a feed's streams: a failure that lasts is the subscribers'. */
const SWEEP_FAILURES_TOLERATED = 3

/** The sweep's period in force: FEED_SWEEP_MS, unless a test sets another. */
export const FeedSweep = Context.Reference<number>("@agentgov/domain/audit/FeedSweep", {
  defaultValue: () => FEED_SWEEP_MS,
})

export interface Subscription {
  readonly workspaceId: string
  /** Deliver only events after this sequence; undefined = from the current head (live only). */
  readonly afterSequence?: number | undefined
  readonly accept: (event: AuditEvent) => boolean
  /** Receives events in sequence order, each once. */
  readonly onEvent: (event: AuditEvent) => void
  readonly onError: (cause: unknown) => void
  /**
   * While catching up, asked after each event: a promise (the subscriber's sink is full) holds the next event back
   * until it settles, so a reader that keeps reading is not outrun by the store. Live events do not wait.
   */
  readonly ready?: () => Promise<void> | undefined
  /**
   * What `accept` takes, as the store can say it (`types` as compiled, an agent): catching up then reads only the
   * events that match, not every event since the resume point. `accept` is still asked.
   */
  readonly narrow?: { readonly filters?: CompiledFilters | undefined; readonly agentId?: string | undefined }
}

interface Subscriber {
  readonly sub: Subscription
  cursor: number
  catchingUp: boolean
  again: boolean
  closed: boolean
}

interface Feed {
  lastSeq: number
  pulling: boolean
  again: boolean
  /** Whether the running pull was asked for by more than the sweep: its failure is then the subscribers'. */
  reported: boolean
  /** The sweep's failed looks in a row (SWEEP_FAILURES_TOLERATED). */
  sweepFailures: number
  readonly subscribers: Set<Subscriber>
}

/**
 * Live fan-out of committed events to subscribers in this process. One LISTEN
 * per process hears every instance's commits; per workspace one query fetches
 * what is new and hands it to every subscriber. A subscriber that is behind
 * (it resumed from an older event, or saw a gap) catches up with its own
 * queries, so delivery is in order, without gaps and without duplicates.
 */
export class EventFeed extends Context.Service<
  EventFeed,
  {
    /** Starts delivering; resolves to the unsubscribe function. */
    readonly subscribe: (sub: Subscription) => Promise<() => void>
    /** The sequence of an event id in a workspace, for `Last-Event-ID`. */
    readonly sequenceOf: (workspaceId: string, eventId: string) => Promise<number | undefined>
  }
>()("@agentgov/domain/audit/EventFeed") {
  static readonly layer = Layer.effect(
    EventFeed,
    Effect.gen(function* () {
      const db = yield* Database
      const repo = yield* EventRepo
      const feeds = new Map<string, Feed>()
      const fetchAfter = (workspaceId: string, after: number) =>
        Effect.runPromise(repo.batch(workspaceId, after, PAGE)).then((rows) => rows.map(toEvent))
      const headOf = async (workspaceId: string) => (await Effect.runPromise(repo.head(workspaceId)))?.sequence ?? 0

      const deliver = (s: Subscriber, events: ReadonlyArray<AuditEvent>) => {
        for (const e of events) {
          if (s.closed) return
          if (e.sequence <= s.cursor) continue
          if (e.sequence > s.cursor + 1) return void catchUp(s)
          s.cursor = e.sequence
          try {
            if (s.sub.accept(e)) s.sub.onEvent(e)
          } catch (cause) {
            s.closed = true
            s.sub.onError(cause)
          }
        }
      }

      const catchUp = (s: Subscriber) => {
        if (s.catchingUp) {
          s.again = true
          return
        }
        s.catchingUp = true
        void (async () => {
          try {
            for (;;) {
              s.again = false
              const { narrow } = s.sub
              let rows: ReadonlyArray<AuditEvent>
              let upTo = 0
              let more: boolean
              if (narrow === undefined) {
                rows = await fetchAfter(s.sub.workspaceId, s.cursor)
                more = rows.length === PAGE
              } else {
                // The next PAGE sequences up to the committed head, of which only the matching events are read.
                const head = await headOf(s.sub.workspaceId)
                upTo = Math.min(head, s.cursor + PAGE)
                rows =
                  upTo <= s.cursor
                    ? []
                    : [
                        ...(await Effect.runPromise(
                          repo.list(s.sub.workspaceId, {
                            filters: narrow.filters,
                            agentId: narrow.agentId,
                            fromSequence: s.cursor + 1,
                            toSequence: upTo,
                            limit: PAGE,
                          }),
                        )),
                      ].reverse()
                more = upTo < head
              }
              for (const e of rows) {
                // What a catch-up reads is what the store holds up to there (appends commit in sequence order). Read
                // narrowed, the events between did not match: passed, as if delivered and not accepted. Read whole, a
                // sequence missing is missing from the store (tampered with: verification reports it); waiting for it
                // would read again at once, for ever.
                if (e.sequence > s.cursor + 1) s.cursor = e.sequence - 1
                deliver(s, [e])
                if (s.closed) break
                const wait = s.sub.ready?.()
                if (wait !== undefined) await wait
                if (s.closed) break
              }
              if (s.closed) break
              if (narrow !== undefined && s.cursor < upTo) s.cursor = upTo
              if (!more && !s.again) break
            }
          } catch (cause) {
            s.closed = true
            s.sub.onError(cause)
          } finally {
            s.catchingUp = false
          }
        })()
      }

      /**
       * Fetches what is new for a workspace's feed. `swept`: asked by the sweep alone, whose failure closes no stream
       * until it lasts; asked by a notification or a subscriber too, it does, as always.
       */
      const pull = (workspaceId: string, swept = false) => {
        const feed = feeds.get(workspaceId)
        if (!feed) return
        if (feed.pulling) {
          feed.again = true
          if (!swept) feed.reported = true
          return
        }
        feed.pulling = true
        feed.reported = !swept
        void (async () => {
          try {
            for (;;) {
              feed.again = false
              const rows = await fetchAfter(workspaceId, feed.lastSeq)
              if (rows.length > 0) feed.lastSeq = rows.at(-1)!.sequence
              for (const s of feed.subscribers) {
                if (!s.catchingUp) deliver(s, rows)
                // Its catch-up's read may predate these rows: it reads once more rather than stop short of them
                // (they would wait for the workspace's next event).
                else if (rows.length > 0) s.again = true
              }
              if (rows.length < PAGE && !feed.again) break
            }
            feed.sweepFailures = 0
          } catch (cause) {
            if (!feed.reported) feed.sweepFailures += 1
            if (feed.reported || feed.sweepFailures >= SWEEP_FAILURES_TOLERATED) {
              feed.sweepFailures = 0
              for (const s of feed.subscribers) s.sub.onError(cause)
            }
          } finally {
            feed.pulling = false
          }
        })()
      }

      const unlisten = yield* Effect.acquireRelease(
        Effect.promise(() =>
          db.listen(
            EVENTS_CHANNEL,
            (payload) => {
              const workspaceId = payload.slice(0, payload.lastIndexOf(":"))
              if (feeds.has(workspaceId)) pull(workspaceId)
            },
            // Appends may have been announced while the connection was down: every feed looks.
            () => {
              for (const workspaceId of feeds.keys()) pull(workspaceId)
            },
          ),
        ),
        (stop) => Effect.promise(() => stop()),
      )
      void unlisten
      const sweepMs = yield* FeedSweep
      yield* Effect.acquireRelease(
        Effect.sync(() => {
          const timer = setInterval(() => {
            for (const workspaceId of feeds.keys()) pull(workspaceId, true)
          }, sweepMs)
          timer.unref()
          return timer
        }),
        (timer) => Effect.sync(() => clearInterval(timer)),
      )

      const subscribe = async (sub: Subscription) => {
        const head = await headOf(sub.workspaceId)
        let feed = feeds.get(sub.workspaceId)
        if (!feed) {
          feed = {
            lastSeq: head,
            pulling: false,
            again: false,
            reported: false,
            sweepFailures: 0,
            subscribers: new Set(),
          }
          feeds.set(sub.workspaceId, feed)
        }
        const s: Subscriber = { sub, cursor: sub.afterSequence ?? head, catchingUp: false, again: false, closed: false }
        feed.subscribers.add(s)
        // Resumed from the past, or events committed since the head was read: fetch them.
        if (s.cursor < Math.max(feed.lastSeq, head)) catchUp(s)
        else pull(sub.workspaceId)
        return () => {
          s.closed = true
          feed.subscribers.delete(s)
          if (feed.subscribers.size === 0) feeds.delete(sub.workspaceId)
        }
      }

      const sequenceOf = async (workspaceId: string, eventId: string) =>
        (await Effect.runPromise(repo.find(workspaceId, eventId)))?.sequence

      return EventFeed.of({ subscribe, sequenceOf })
    }),
  )
}
