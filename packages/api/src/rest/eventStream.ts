import type { IncomingMessage, ServerResponse } from "node:http"
import {
  type Actor,
  type CredentialEnd,
  CredentialWatch,
  compileFilters,
  EventFeed,
  matchesFilters,
  StreamSlots,
} from "@agentgov/domain"
import { Effect } from "effect"
import { ApiError } from "../ApiError.ts"
import type { Executor, Result, Runtime } from "../Executor.ts"
import { bearerOfRequest, findUnstorable, sendError, unknownQueryParameter } from "./http.ts"

export interface EventStreamOptions {
  /** Comment heartbeat interval; D9 wants at least one every 15 s. */
  readonly heartbeatMs?: number
  /** A client whose unsent backlog passes this is dropped rather than buffered without bound. */
  readonly maxBufferedBytes?: number
  /**
   * While it catches up (Last-Event-ID), a stream sends the next stored event only once its client has taken the
   * last; a client that takes nothing for this long is dropped (it resumes with Last-Event-ID). Default 30 s.
   */
  readonly stallMs?: number
}

/**
 * Retry-After on a refused stream: a hint, as a slot frees only when one of the credential's streams closes (or, for
 * the process's limit, anyone's).
 */
const STREAM_RETRY_AFTER_S = 10

/** What a stream says before it ends because its credential stopped. */
const endMessages: Record<CredentialEnd, string> = {
  revoked: "the credential's API key was revoked",
  expired: "the credential has expired",
  gone: "the credential's API key no longer exists",
  unverifiable: "the credential could not be checked again; reconnect",
  signed_out: "signed out, or the session was ended",
  not_member: "no longer a member of this workspace",
}

/**
 * GET /events/stream (D9): server-sent events, `id:` the event id and `data:`
 * `{"type","payload"}`. `Last-Event-ID` (header, or `lastEventId` query)
 * resumes after that event with no gap and no duplicate; filters `types`
 * (exact, `prefix.*`, `*`) and `agentId`; a comment heartbeat every 10 s.
 * The credential is held to the rule of every request for as long as the
 * stream lasts (CredentialWatch): once it is revoked or expires, the stream
 * sends `event: error` with the 401 envelope and ends. Open streams are
 * limited per key, per workspace and per process (StreamSlots): beyond, 429 RATE_LIMITED.
 */
/**
 * Whether the client hung up while the handler awaited (the feed, the Last-Event-ID, the slot): a stream set up for
 * it would hold its slot, subscription and timers for good, since its "close" has already fired.
 */
const hungUp = (req: IncomingMessage) => req.destroyed || req.socket.destroyed

export const makeEventStreamHandler = (runtime: Runtime, executor: Executor, options: EventStreamOptions = {}) => {
  const heartbeatMs = options.heartbeatMs ?? 10_000
  const maxBuffered = options.maxBufferedBytes ?? 1024 * 1024
  const stallMs = options.stallMs ?? 30_000
  const open = new Set<() => void>()

  /**
   * `auth`: the request's credential, already authenticated and counted by the REST facade; `secret`: what
   * it was authenticated by (the bearer credential, or the session cookie's value), watched while it lasts.
   */
  const handler = async (
    req: IncomingMessage,
    res: ServerResponse,
    url: URL,
    requestId: string,
    auth: Result<Actor>,
    secret = bearerOfRequest(req) ?? "",
  ): Promise<void> => {
    if (!auth.ok) return sendError(res, auth.error, requestId, { "www-authenticate": 'Bearer realm="agentgov"' })
    const actor = auth.value
    const denied = executor.requireScope(actor, "events:read")
    if (denied) return sendError(res, denied, requestId)
    for (const name of url.searchParams.keys()) {
      if (!["types", "agentId", "lastEventId"].includes(name)) {
        return sendError(res, unknownQueryParameter(name), requestId)
      }
    }
    // As every other query (D2): a value PostgreSQL cannot take (NUL, an unpaired surrogate) is the caller's mistake.
    for (const [name, value] of url.searchParams) {
      const unstorable = findUnstorable(value)
      if (unstorable) {
        return sendError(
          res,
          new ApiError(400, "BAD_REQUEST", `${name}: ${unstorable.issue}`, { field: name, issue: unstorable.issue }),
          requestId,
        )
      }
    }
    const given = url.searchParams
      .getAll("types")
      .flatMap((t) => t.split(","))
      .filter((t) => t !== "")
    // Webhooks' rule (D9). A filter that can match nothing is a mistake to say, not a stream that stays silent.
    const compiled = compileFilters(given)
    if (!compiled.ok) {
      const { issue } = compiled
      return sendError(
        res,
        new ApiError(400, "BAD_REQUEST", `types: "${given[compiled.index]}": ${issue}`, { field: "types", issue }),
        requestId,
      )
    }
    const filters = given.length === 0 ? undefined : compiled.compiled
    const requestedAgent = url.searchParams.get("agentId") ?? undefined
    if (actor.agentId !== undefined && requestedAgent !== undefined && requestedAgent !== actor.agentId) {
      return sendError(
        res,
        new ApiError(403, "FORBIDDEN", "this credential is bound to another agent", {
          field: "agentId",
          issue: "outside this credential's agent",
        }),
        requestId,
      )
    }
    const agentId = actor.agentId ?? requestedAgent

    const { feed, watcher, slots } = await runtime.runPromise(
      Effect.all({ feed: EventFeed, watcher: CredentialWatch, slots: StreamSlots }),
    )
    const lastEventId =
      (req.headers["last-event-id"] as string | undefined) ?? url.searchParams.get("lastEventId") ?? undefined
    let afterSequence: number | undefined
    if (lastEventId !== undefined && lastEventId !== "") {
      afterSequence = await feed.sequenceOf(actor.workspaceId, lastEventId)
      if (afterSequence === undefined) {
        return sendError(
          res,
          new ApiError(400, "BAD_REQUEST", "Last-Event-ID names no event of this workspace", {
            field: "Last-Event-ID",
            issue: "unknown event",
          }),
          requestId,
        )
      }
    }

    const slot = await runtime.runPromise(slots.acquire(actor))
    if (slot.ok && hungUp(req)) return slot.release()
    if (!slot.ok) {
      const message =
        slot.per === "process"
          ? `this server already serves ${slot.limit} open event streams, its limit; retry after ${STREAM_RETRY_AFTER_S} s`
          : `${slot.per === "workspace" ? `this workspace (plan ${slot.plan})` : "this API key"} already has ` +
            `${slot.limit} open event streams, its limit; close one first`
      return sendError(
        res,
        new ApiError(429, "RATE_LIMITED", message, undefined, { "retry-after": String(STREAM_RETRY_AFTER_S) }),
        requestId,
      )
    }

    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-store",
      connection: "keep-alive",
      "x-accel-buffering": "no",
      "x-request-id": requestId,
    })
    let closed = false
    // `: connected` is written once the subscription is live: a client that sees it and then records an
    // event receives that event. Until then, as while the credential is checked, events wait.
    let live = false
    let unsubscribe: (() => void) | undefined
    const close = () => {
      if (closed) return
      closed = true
      open.delete(close)
      clearInterval(heartbeat)
      credential.stop()
      slot.release()
      unsubscribe?.()
      held.length = 0
      heldBytes = 0
      clearTimeout(stall)
      for (const resume of waiting.splice(0)) resume()
      res.end()
      // Its end queued behind what a client does not read never finishes, so no keep-alive time-out would come
      // either: the socket would stay for good, its slot already free for the next. It gets `stallMs` to take it.
      if (!res.writableFinished) {
        const giveUp = setTimeout(() => res.destroy(), stallMs)
        giveUp.unref()
        res.once("close", () => clearTimeout(giveUp))
      }
    }
    open.add(close)
    // A client that does not read is dropped, not buffered without bound; it resumes with Last-Event-ID.
    const drop = () => {
      close()
      res.destroy()
    }
    const write = (chunk: string) => {
      if (closed) return
      res.write(chunk)
      if (res.writableLength > maxBuffered) drop()
    }
    // Events that arrive while the credential is being checked again wait for its verdict.
    const held: Array<string> = []
    let heldBytes = 0
    /** Sends what waited, once the stream is live and its credential is not in question. */
    const sendHeld = () => {
      if (!live || credential.checking()) return
      heldBytes = 0
      for (const chunk of held.splice(0)) write(chunk)
      wake()
    }
    // Catching up, the feed asks before each stored event whether the client took the last one: stored events
    // are sent at the client's pace, not dropped with the client once more than `maxBuffered` of them outran it.
    const waiting: Array<() => void> = []
    let stall: NodeJS.Timeout | undefined
    const blocked = () => !closed && (!live || credential.checking() || res.writableNeedDrain)
    const wake = () => {
      if (blocked()) return
      clearTimeout(stall)
      stall = undefined
      for (const resume of waiting.splice(0)) resume()
    }
    const ready = () => {
      if (!blocked()) return undefined
      stall ??= setTimeout(drop, stallMs)
      return new Promise<void>((resume) => waiting.push(resume))
    }
    res.on("drain", wake)
    const credential = watcher.watch(actor, secret, {
      onEnd: (reason) => {
        const error = { code: "UNAUTHORIZED", message: endMessages[reason] }
        write(`event: error\ndata: ${JSON.stringify({ ok: false, error })}\n\n`)
        close()
      },
      onConfirmed: sendHeld,
    })
    const heartbeat = setInterval(() => write(": heartbeat\n\n"), heartbeatMs)
    req.on("close", close)
    // A client gone before the listener was on: its "close" has fired already, and would never come again.
    if (hungUp(req)) return close()

    unsubscribe = await feed.subscribe({
      workspaceId: actor.workspaceId,
      afterSequence,
      accept: (e) =>
        (filters === undefined || matchesFilters(filters, e.type)) && (agentId === undefined || e.agentId === agentId),
      onEvent: (e) => {
        const chunk = `id: ${e.id}\ndata: ${JSON.stringify({ type: e.type, payload: e })}\n\n`
        if (live && !credential.checking()) return write(chunk)
        held.push(chunk)
        heldBytes += chunk.length
        // As for a client that does not read: bounded, and it resumes with Last-Event-ID.
        if (heldBytes > maxBuffered) drop()
      },
      onError: () => close(),
      ready,
      narrow: filters === undefined && agentId === undefined ? undefined : { filters, agentId },
    })
    if (closed) return unsubscribe()
    write(": connected\n\n")
    live = true
    sendHeld()
  }

  /** Ends every open stream (shutdown): clients reconnect elsewhere with Last-Event-ID. */
  const closeAll = () => {
    for (const close of [...open]) close()
  }
  return Object.assign(handler, { closeAll })
}
