import { AgentGovError } from "../errors.ts"
import type { StreamEvent } from "../types.ts"
import type { HttpClient } from "./HttpClient.ts"
import { backoffMs, isTransient, sleep } from "./retry.ts"

/** One dispatched server-sent event. */
export interface SseMessage {
  /** The last event id seen on the stream (it persists across messages, per the standard). */
  readonly id: string | undefined
  readonly event: string
  readonly data: string
}

/**
 * An incremental parser of `text/event-stream` (WHATWG HTML, "server-sent events"): lines end
 * with CRLF, LF or CR (also split across chunks), `:` starts a comment, a blank line dispatches,
 * `data` lines are joined with LF, `id` persists, a value loses one leading space.
 */
export class SseParser {
  private buffer = ""
  private pendingCR = false
  private data: Array<string> = []
  private eventType = ""
  private lastId: string | undefined

  /** Feeds decoded text; returns the messages it completed. */
  feed(chunk: string): Array<SseMessage> {
    const out: Array<SseMessage> = []
    let text = chunk
    if (this.pendingCR && text.startsWith("\n")) text = text.slice(1)
    this.pendingCR = false
    const buf = this.buffer + text
    let start = 0
    for (let i = 0; i < buf.length; i++) {
      const c = buf.charCodeAt(i)
      if (c !== 10 && c !== 13) continue
      this.line(buf.slice(start, i), out)
      if (c === 13) {
        if (i + 1 < buf.length) {
          if (buf.charCodeAt(i + 1) === 10) i++
        } else {
          this.pendingCR = true
        }
      }
      start = i + 1
    }
    this.buffer = buf.slice(start)
    return out
  }

  private line(line: string, out: Array<SseMessage>): void {
    if (line === "") {
      if (this.data.length > 0) {
        out.push({ id: this.lastId, event: this.eventType || "message", data: this.data.join("\n") })
      }
      this.data = []
      this.eventType = ""
      return
    }
    if (line.charCodeAt(0) === 58) return // ":" comment (heartbeats)
    const colon = line.indexOf(":")
    const field = colon === -1 ? line : line.slice(0, colon)
    let value = colon === -1 ? "" : line.slice(colon + 1)
    if (value.startsWith(" ")) value = value.slice(1)
    if (field === "data") this.data.push(value)
    else if (field === "event") this.eventType = value
    else if (field === "id" && !value.includes("\0")) this.lastId = value
  }
}

/**
 * Options of `events.stream()`.
 *
 * @example
 * ```ts
 * import type { EventStreamParams } from "@agentgov/sdk"
 *
 * const controller = new AbortController()
 * const params: EventStreamParams = { types: ["approval.*"], signal: controller.signal }
 * ```
 */
export interface EventStreamParams {
  /** Event names, exact, `prefix.*` or `*`; all when omitted. */
  readonly types?: ReadonlyArray<string> | string
  readonly agentId?: string
  /** Resume after this event (the `id` of a message you saw): nothing in between is lost. */
  readonly lastEventId?: string
  /** Ends the stream: iteration finishes normally. */
  readonly signal?: AbortSignal
  /** Reconnect with `Last-Event-ID` when the connection drops or the service is briefly down. Default true. */
  readonly reconnect?: boolean
  /** With no byte for this long (the service sends a heartbeat every 10 s), reconnect. Default 45,000 ms. */
  readonly idleTimeoutMs?: number
}

const RECONNECT_INITIAL_MS = 500
const RECONNECT_MAX_MS = 15_000

/** Reads one connection's messages; rejects when the body fails, resolves when it ends. */
async function* readMessages(
  response: Response,
  connection: AbortController,
  idleTimeoutMs: number,
): AsyncGenerator<SseMessage, void, undefined> {
  if (!response.body) return
  const reader = response.body.getReader()
  const decoder = new TextDecoder()
  const parser = new SseParser()
  let idle = setTimeout(() => connection.abort(), idleTimeoutMs)
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) return
      clearTimeout(idle)
      idle = setTimeout(() => connection.abort(), idleTimeoutMs)
      for (const message of parser.feed(decoder.decode(value, { stream: true }))) yield message
    }
  } finally {
    clearTimeout(idle)
    reader.cancel().catch(() => {})
  }
}

/**
 * `GET /events/stream` (D9) as an async iterator of events, reconnecting with `Last-Event-ID`
 * (so no event is lost or repeated) after a dropped connection, a silent one, or a transient
 * failure, and (with an SDK token) after the service ended the stream because the token expired.
 * Errors the request itself causes (401, 403, 400) end the iteration with an {@link AgentGovError}.
 */
export async function* streamEvents(
  http: HttpClient,
  params: EventStreamParams,
  auth: "key" | "token",
): AsyncGenerator<StreamEvent, void, undefined> {
  const outer = params.signal
  const reconnect = params.reconnect ?? true
  const idleTimeoutMs = params.idleTimeoutMs ?? 45_000
  const types = params.types === undefined ? undefined : ([] as Array<string>).concat(params.types)
  let lastEventId = params.lastEventId
  let failures = 0
  /** Streams ended in a row by their SDK token's end, with no event between: from the second, backoff. */
  let tokenEnds = 0
  while (!outer?.aborted) {
    const connection = new AbortController()
    const used: { token?: string } = {}
    /** This connection's SDK token ended (it expired): resume with a fresh one. */
    let renew = false
    const onAbort = () => connection.abort(outer!.reason)
    outer?.addEventListener("abort", onAbort, { once: true })
    try {
      let response: Response
      try {
        response = await http.stream(
          { path: "/events/stream", query: { types, agentId: params.agentId }, auth },
          lastEventId === undefined ? {} : { "last-event-id": lastEventId },
          connection.signal,
          used,
        )
      } catch (error) {
        if (outer?.aborted) return
        if (!reconnect || !isTransient(error)) throw error
        failures++
        // A Retry-After of 0 (or a date already past, a skewed clock) is no wait: back off instead, or a
        // service answering it every time is reconnected to as fast as it answers.
        const wait = error.retryAfter !== undefined && error.retryAfter > 0 ? error.retryAfter * 1000 : undefined
        await sleep(wait ?? backoffMs(failures, RECONNECT_INITIAL_MS, RECONNECT_MAX_MS), outer).catch(() => {})
        continue
      }
      // Not reset on connecting: a stream answered and ended at once, again and again (a proxy's empty
      // 200), backs off as a refused one does. An event, or a connection that lasted, resets it.
      const connectedAt = performance.now()
      try {
        for await (const message of readMessages(response, connection, idleTimeoutMs)) {
          let parsed: { type?: unknown; payload?: unknown; error?: { code?: unknown; message?: unknown } }
          try {
            parsed = JSON.parse(message.data)
          } catch {
            throw new AgentGovError({
              status: response.status,
              code: "INVALID_RESPONSE",
              message: `a stream message is not JSON: ${message.data.slice(0, 200)}`,
            })
          }
          // The service ends a stream whose credential stopped (revoked, expired) with `event: error`
          // and the 401 envelope: final with an API key, as the same refusal of a request would be.
          if (message.event === "error") {
            // An SDK token ends its stream when it expires (15 min by default), long before an approval is
            // decided: drop that token and resume where the stream was with a fresh one. A revoked key is
            // refused when the stream connects again, which is final.
            if (auth === "token" && reconnect && used.token !== undefined) {
              http.tokens.invalidate(used.token)
              renew = true
              break
            }
            throw new AgentGovError({
              status: 401,
              code: typeof parsed.error?.code === "string" ? parsed.error.code : "UNAUTHORIZED",
              message:
                typeof parsed.error?.message === "string" ? parsed.error.message : "the service ended the stream",
            })
          }
          if (message.id !== undefined) lastEventId = message.id
          tokenEnds = 0
          failures = 0
          yield {
            id: message.id ?? "",
            type: String(parsed.type),
            payload: parsed.payload as StreamEvent["payload"],
          }
        }
      } catch (error) {
        if (outer?.aborted) return
        if (error instanceof AgentGovError) throw error
        if (!reconnect) {
          throw new AgentGovError({ status: 0, code: "NETWORK_ERROR", message: "the event stream broke", cause: error })
        }
      }
      if (!reconnect || outer?.aborted) return
      if (renew) {
        // At once the first time; should fresh tokens keep being ended with no event between, back off.
        if (++tokenEnds > 1) {
          await sleep(backoffMs(tokenEnds - 1, RECONNECT_INITIAL_MS, RECONNECT_MAX_MS), outer).catch(() => {})
        }
        continue
      }
      // The service closed the stream (a restart, a slow-reader cut-off): resume where we were.
      if (performance.now() - connectedAt >= RECONNECT_MAX_MS) failures = 0
      failures++
      await sleep(backoffMs(failures, RECONNECT_INITIAL_MS, RECONNECT_MAX_MS), outer).catch(() => {})
    } finally {
      outer?.removeEventListener("abort", onAbort)
      connection.abort()
    }
  }
}
