import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http"
import { Agent as HttpsAgent, request as httpsRequest } from "node:https"
import type { LookupFunction } from "node:net"
import { context, propagation, trace } from "@opentelemetry/api"
import { Context, Effect, Layer } from "effect"
import { checkUrlSyntax, type ResolvedAddress, resolveTarget } from "./targets.ts"
import { WebhookSettings } from "./WebhookSettings.ts"

/**
 * W3C `traceparent` (and `tracestate`) of the delivery's span, when tracing is on and one is active,
 * so the receiver's trace continues ours. Nothing (and no allocation) when tracing is off.
 */
const traceHeaders = (): Record<string, string> | undefined => {
  if (trace.getActiveSpan() === undefined) return undefined
  const carrier: Record<string, string> = {}
  propagation.inject(context.active(), carrier)
  return carrier
}

/** One POST of a delivery. */
export interface DeliveryRequest {
  readonly url: string
  /** The signature headers (`signatureHeaders`). */
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
  readonly timeoutMs: number
  /**
   * The workspace whose webhook it is: DNS turns are shared among workspaces by it (`limitLookups`). Required, so
   * that no sender can leave its lookups uncounted.
   */
  readonly workspaceId: string
}

/** What one attempt came to. */
export interface AttemptOutcome {
  /** The endpoint answered 2xx. */
  readonly success: boolean
  /** The status it answered; absent when it did not answer. */
  readonly statusCode?: number | undefined
  /** Epoch ms when the attempt started. */
  readonly startedAt: number
  /** Whole ms from start to the end of the answer (or the failure, or the time-out while the body was open). */
  readonly responseTimeMs: number
  /**
   * Why it failed, in words that tell nothing the endpoint said beyond its status: never the
   * body, a header, or which connection error it was (see `send`).
   */
  readonly error?: string | undefined
}

export const USER_AGENT = "agentgov-webhooks/1.0"

/** Bytes of an answer read (and discarded) to keep the connection reusable; a longer answer is cut off. */
const MAX_ANSWER_BYTES = 64 * 1024

class Timeout extends Error {}

/** The one report of an attempt that got no answer, whether the connection was refused, reset or timed out. */
export const connectionFailed = (timeoutMs: number) => `connection failed or no answer within ${timeoutMs} ms`

/** Connects to the addresses that were checked, whatever DNS answers now. */
const pinnedLookup =
  (pinned: ReadonlyArray<ResolvedAddress>): LookupFunction =>
  (_host, options, callback) => {
    const { all, family } = options as { all?: boolean; family?: number }
    if (all)
      (callback as (e: null, a: Array<{ address: string; family: number }>) => void)(
        null,
        pinned.map((a) => ({ address: a.address, family: a.family })),
      )
    else {
      const one = pinned.find((a) => !family || a.family === family) ?? pinned[0]!
      callback(null, one.address, one.family)
    }
  }

/**
 * Sends webhook deliveries: resolves the host, refuses addresses the target
 * policy forbids, connects to the checked address (no second DNS lookup),
 * does not follow redirects, and enforces the time-out over the whole
 * exchange, DNS included. The status line decides the outcome: after it, a
 * body that is cut off, reset, longer than 64 KiB or still open at the
 * time-out ends the attempt with that status (the connection is closed).
 * Keep-alive connections are pooled per host.
 *
 * What an attempt reports is the status code and nothing else the endpoint
 * sent (no body excerpt, no `Location`), and one message for every way a
 * connection can fail (refused, reset, timed out): the history and the test
 * result are read by the workspace, and an allowlisted internal endpoint must
 * not become a port scanner or a reader of the operator's services.
 */
export class WebhookClient extends Context.Service<
  WebhookClient,
  { readonly send: (request: DeliveryRequest) => Promise<AttemptOutcome> }
>()("@agentgov/domain/webhooks/WebhookClient") {
  static readonly layer = Layer.effect(
    WebhookClient,
    Effect.gen(function* () {
      const settings = yield* WebhookSettings
      // Idle pooled sockets close after 4 s, before the common 5 s server keep-alive, so a reused socket is rarely stale.
      const agents = yield* Effect.acquireRelease(
        Effect.sync(() => ({
          http: new HttpAgent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 64, timeout: 4_000 }),
          https: new HttpsAgent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 64, timeout: 4_000 }),
        })),
        (a) =>
          Effect.sync(() => {
            a.http.destroy()
            a.https.destroy()
          }),
      )

      /**
       * One POST. Resolves when the answer's body has ended (or was cut off at `MAX_ANSWER_BYTES`, or its
       * connection closed or reset after the status line); rejects only when no status arrived. `answered` holds
       * the status as soon as the headers are in, so a time-out during the body still knows it.
       */
      const exchange = (
        url: URL,
        pinned: ReadonlyArray<ResolvedAddress>,
        request: DeliveryRequest,
        signal: AbortSignal,
        answered: { status?: number },
      ) =>
        new Promise<number>((resolve, reject) => {
          const body = Buffer.from(request.body, "utf8")
          const https = url.protocol === "https:"
          const req = (https ? httpsRequest : httpRequest)(url, {
            method: "POST",
            agent: https ? agents.https : agents.http,
            lookup: pinnedLookup(pinned),
            signal,
            headers: {
              "content-type": "application/json",
              "content-length": String(body.length),
              "user-agent": USER_AGENT,
              ...request.headers,
              ...traceHeaders(),
            },
          })
          // After the status line an error (a reset mid-body) ends the answer, as a close does: the status decides.
          req.on("error", (e) => (answered.status === undefined ? reject(e) : resolve(answered.status)))
          req.on("response", (res: IncomingMessage) => {
            const status = res.statusCode ?? 0
            answered.status = status
            let read = 0
            res.on("data", (chunk: Buffer) => {
              read += chunk.length
              if (read > MAX_ANSWER_BYTES) res.destroy()
            })
            const done = () => resolve(status)
            res.on("end", done)
            res.on("close", done)
            res.on("error", done)
          })
          req.end(body)
        })

      const send = async (request: DeliveryRequest): Promise<AttemptOutcome> => {
        const startedAt = Date.now()
        const t0 = performance.now()
        const finish = (outcome: Omit<AttemptOutcome, "startedAt" | "responseTimeMs">): AttemptOutcome => ({
          ...outcome,
          startedAt,
          responseTimeMs: Math.round(performance.now() - t0),
        })
        const aborter = new AbortController()
        let timer: NodeJS.Timeout | undefined
        const timedOut = new Promise<never>((_, reject) => {
          timer = setTimeout(() => {
            aborter.abort(new Timeout())
            reject(new Timeout())
          }, request.timeoutMs)
        })
        timedOut.catch(() => {})
        const answered: { status?: number } = {}
        const byStatus = (code: number) => {
          if (code >= 200 && code < 300) return finish({ success: true, statusCode: code })
          const redirect = code >= 300 && code < 400 ? ": redirect not followed" : ""
          return finish({ success: false, statusCode: code, error: `HTTP ${code}${redirect}` })
        }
        try {
          const syntax = checkUrlSyntax(request.url)
          if ("issue" in syntax) return finish({ success: false, error: `refused: ${syntax.issue}` })
          const target = await Promise.race([
            resolveTarget(settings.targets, syntax.url, settings.resolver, request.workspaceId),
            timedOut,
          ])
          if (!target.ok)
            return finish({ success: false, error: target.unresolved ? target.issue : `refused: ${target.issue}` })
          return byStatus(
            await Promise.race([exchange(syntax.url, target.pinned, request, aborter.signal, answered), timedOut]),
          )
        } catch {
          // The time-out ran out during the body (the abort closed the connection): the status that came decides.
          if (answered.status !== undefined) return byStatus(answered.status)
          return finish({ success: false, error: connectionFailed(request.timeoutMs) })
        } finally {
          clearTimeout(timer)
        }
      }

      return WebhookClient.of({ send })
    }),
  )
}
