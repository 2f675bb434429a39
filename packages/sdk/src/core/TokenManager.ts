/** The claims of an SDK token the SDK reads (D5); the service verifies the signature, not us. */
export interface TokenClaims {
  readonly iat?: number
  readonly exp?: number
  readonly workspaceId?: string
  readonly agentId?: string
  readonly scopes?: ReadonlyArray<string>
}

interface Held {
  readonly token: string
  readonly claims: TokenClaims
  /** Monotonic ms (performance.now) after which a background refresh starts. */
  readonly refreshAt: number
  /** Monotonic ms after which the token is never sent again. */
  readonly unusableAt: number
}

/** Reads a JWT's payload without verifying it (the service is the verifier). */
export const decodeClaims = (token: string): TokenClaims => {
  const part = token.split(".")[1]
  if (!part) return {}
  try {
    const base64 = part.replace(/-/g, "+").replace(/_/g, "/")
    const binary = atob(base64 + "=".repeat((4 - (base64.length % 4)) % 4))
    const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0))
    const claims: unknown = JSON.parse(new TextDecoder().decode(bytes))
    return typeof claims === "object" && claims !== null ? (claims as TokenClaims) : {}
  } catch {
    return {}
  }
}

const now = () => performance.now()

/** Sends one exchange (`POST /tokens`); `timeoutMs` undefined: the client's time-out. */
export type Exchange = (
  signal: AbortSignal,
  timeoutMs: number | undefined,
) => Promise<{ token: string; expiresAt: string }>

/**
 * Holds the SDK token exchanged for the API key (`POST /tokens`) and keeps it fresh.
 *
 * Times are measured on the monotonic clock from the moment the exchange was *sent*, using the
 * token's own lifetime (`exp − iat`, both the service's clock, less the second `iat` may have
 * been rounded down by), so neither clock skew nor a wall-clock jump can make the SDK send an
 * expired token:
 *
 * - from 75 % of the lifetime, the next call starts one refresh in the background and keeps
 *   using the current token (calls never wait for a refresh they do not need);
 * - from lifetime − min(30 s, 10 %), the token is not sent again: calls wait for the refresh;
 * - refreshes are single-flight: concurrent callers share one exchange;
 * - an exchange makes one attempt, within the time-out of the call that started it (its callers
 *   retry by their own rules), and `cancel()` aborts it: nothing of it outlives its callers.
 */
export class TokenManager {
  private held: Held | undefined
  private inflight: Promise<Held> | undefined
  /** Aborts the exchange in flight. */
  private controller: AbortController | undefined
  private readonly exchange: Exchange
  /** Agent runtimes using the tokens (retain/release). */
  private users = 0
  /** How many exchanges were sent (observability and tests). */
  exchanges = 0

  constructor(exchange: Exchange) {
    this.exchange = exchange
  }

  /** A runtime starts using the tokens. */
  retain(): void {
    this.users++
  }

  /** A runtime is done (shut down); when none is left, an exchange in flight is aborted. */
  release(): void {
    this.users = Math.max(0, this.users - 1)
    if (this.users === 0) this.cancel()
  }

  /** Aborts the exchange in flight, if any: its waiters reject, and the next call exchanges anew. */
  cancel(): void {
    this.controller?.abort()
    this.controller = undefined
    // At once, not when the aborted exchange settles: a call made meanwhile must not join it.
    this.inflight = undefined
  }

  /** The held token when it is safe to send now (starting a due background refresh), else undefined. */
  usable(): string | undefined {
    const held = this.held
    if (held === undefined) return undefined
    const t = now()
    if (t >= held.unusableAt) return undefined
    // Failures of a background refresh are not this call's: the next due call tries again.
    if (t >= held.refreshAt && this.inflight === undefined) this.refresh().catch(() => {})
    return held.token
  }

  /**
   * A token that is safe to send now. `timeoutMs`: the time-out of an exchange this call starts
   * (the caller's own per-attempt time-out); default the client's.
   */
  async get(signal?: AbortSignal, timeoutMs?: number): Promise<string> {
    const ready = this.usable()
    if (ready !== undefined) return ready
    const fresh = await (signal ? abortable(this.refresh(timeoutMs), signal) : this.refresh(timeoutMs))
    return fresh.token
  }

  /** The claims of the current token, exchanging one first if none is held. */
  async claims(signal?: AbortSignal): Promise<TokenClaims> {
    await this.get(signal)
    return this.held?.claims ?? {}
  }

  /** Forget `token` (the service refused it) so that the next call exchanges a new one. */
  invalidate(token: string): void {
    if (this.held?.token === token) this.held = undefined
  }

  private refresh(timeoutMs?: number): Promise<Held> {
    if (this.inflight) return this.inflight
    const sentAt = now()
    this.exchanges++
    const controller = new AbortController()
    this.controller = controller
    const run = this.exchange(controller.signal, timeoutMs)
      .then(({ token, expiresAt }) => {
        const claims = decodeClaims(token)
        // `iat` is whole seconds, rounded down: the token may have been issued up to a second
        // after it says, so count one second less of life than `exp − iat`.
        const lifetimeMs = Math.max(
          0,
          typeof claims.exp === "number" && typeof claims.iat === "number"
            ? (claims.exp - claims.iat - 1) * 1000
            : Date.parse(expiresAt) - Date.now(),
        )
        const margin = Math.min(30_000, lifetimeMs * 0.1)
        const held: Held = {
          token,
          claims,
          refreshAt: sentAt + lifetimeMs * 0.75,
          unusableAt: sentAt + lifetimeMs - margin,
        }
        this.held = held
        return held
      })
      .finally(() => {
        if (this.inflight === run) this.inflight = undefined
        if (this.controller === controller) this.controller = undefined
      })
    this.inflight = run
    return run
  }
}

/** `promise`, or the signal's reason once it aborts (the shared work itself goes on). */
const abortable = <A>(promise: Promise<A>, signal: AbortSignal): Promise<A> => {
  if (signal.aborted) return Promise.reject(signal.reason)
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason)
    signal.addEventListener("abort", onAbort, { once: true })
    promise.then(
      (v) => {
        signal.removeEventListener("abort", onAbort)
        resolve(v)
      },
      (e) => {
        signal.removeEventListener("abort", onAbort)
        reject(e)
      },
    )
  })
}
