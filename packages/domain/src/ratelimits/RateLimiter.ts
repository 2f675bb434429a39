import { isIP } from "node:net"
import { Clock, Context, Effect, Layer } from "effect"
import type { Actor } from "../auth/Actor.ts"
import { ipv6Bytes } from "../shared/ipAddress.ts"
import type { Plan } from "../workspaces/Workspace.ts"
import { WorkspaceRepo } from "../workspaces/WorkspaceRepo.ts"
import { Counters, type Counts, type LimitKey } from "./Counters.ts"
import { remaining, resetAtMs, waitMs, windowPosition } from "./slidingWindow.ts"

/** The operator's limits (D10 defaults: free 100, pro 1,000, enterprise 10,000, agent 1,000 per minute). */
export interface RateLimitConfig {
  readonly enabled: boolean
  readonly windowMs: number
  readonly plans: Readonly<Record<Plan, number>>
  /** Every credential of one agent together. */
  readonly agent: number
  /** Requests without a usable credential, per client address (401s and public endpoints). */
  readonly anonymous: number
}

export const DEFAULT_RATE_LIMITS: RateLimitConfig = {
  enabled: true,
  windowMs: 60_000,
  plans: { free: 100, pro: 1_000, enterprise: 10_000 },
  agent: 1_000,
  anonymous: 600,
}

export class RateLimitSettings extends Context.Service<RateLimitSettings, RateLimitConfig>()(
  "@agentgov/domain/ratelimits/RateLimitSettings",
) {
  static readonly layer = (config: RateLimitConfig) => Layer.succeed(RateLimitSettings, RateLimitSettings.of(config))
}

/** What the transport puts in X-RateLimit-* (the most restrictive limit) and, on refusal, Retry-After. */
export interface RateLimitVerdict {
  readonly admitted: boolean
  readonly limit: number
  readonly remaining: number
  /** Unix seconds. */
  readonly reset: number
  /** Whole seconds; set when refused. */
  readonly retryAfter?: number
}

const PLAN_TTL_MS = 10_000

/**
 * The bucket of the anonymous limit a client address draws on: an IPv4 address itself (also when it comes as
 * IPv4-mapped IPv6, `::ffff:a.b.c.d`, from a dual-stack socket), an IPv6 address by its /64. One host is given a
 * whole /64 (RFC 6177) and may send from any of its 2^64 addresses: a bucket per address would be no limit at all.
 */
export const addressBucket = (address: string): string => {
  if (isIP(address) !== 6) return address
  const bytes = ipv6Bytes(address)
  if (bytes.readUInt32BE(0) === 0 && bytes.readUInt32BE(4) === 0 && bytes.readUInt32BE(8) === 0xffff)
    return `${bytes[12]}.${bytes[13]}.${bytes[14]}.${bytes[15]}`
  return `${bytes.toString("hex", 0, 8)}::/64`
}

/**
 * Decision D10: sliding-window counters per API key (an SDK token counts
 * against the key it was exchanged for), per workspace by plan and per agent,
 * checked together in one atomic step of the Counters store.
 */
export class RateLimiter extends Context.Service<
  RateLimiter,
  {
    /** undefined when rate limiting is off. */
    readonly check: (actor: Actor) => Effect.Effect<RateLimitVerdict | undefined>
    readonly checkAnonymous: (address: string) => Effect.Effect<RateLimitVerdict | undefined>
    /**
     * The hot path, outside any fiber: the verdict (synchronous with
     * in-process counters, a promise with Redis) when the workspace's plan is
     * cached, "off" when rate limiting is off, else undefined (then `check` decides).
     */
    readonly checkNow: (actor: Actor, nowMs: number) => RateLimitVerdict | Promise<RateLimitVerdict> | "off" | undefined
    /** The hot path of `checkAnonymous`, outside any fiber: as `checkNow`, for a client address. */
    readonly checkAnonymousNow: (address: string, nowMs: number) => RateLimitVerdict | Promise<RateLimitVerdict> | "off"
  }
>()("@agentgov/domain/ratelimits/RateLimiter") {
  static readonly layer = Layer.effect(
    RateLimiter,
    Effect.gen(function* () {
      const config = yield* RateLimitSettings
      const counters = yield* Counters
      const workspaces = yield* WorkspaceRepo
      const { windowMs } = config

      // A plan change reaches every instance within PLAN_TTL_MS; the hot path reads no row.
      const plans = new Map<string, { plan: Plan; until: number }>()
      const planOf = (workspaceId: string, now: number) => {
        const cached = plans.get(workspaceId)
        if (cached && cached.until > now) return Effect.succeed(cached.plan)
        return workspaces.find(workspaceId).pipe(
          Effect.map((w) => {
            const plan = w?.plan ?? "free"
            if (plans.size > 100_000) plans.clear()
            plans.set(workspaceId, { plan, until: now + PLAN_TTL_MS })
            return plan
          }),
        )
      }

      const verdict = (
        limits: ReadonlyArray<LimitKey>,
        admitted: boolean,
        counts: ReadonlyArray<Counts>,
        now: number,
      ) => {
        const position = windowPosition(now, windowMs)
        if (admitted) {
          let best = -1
          let bestRemaining = Number.POSITIVE_INFINITY
          for (let i = 0; i < limits.length; i++) {
            const { previous, current } = counts[i]!
            const left = remaining(limits[i]!.limit, previous, current, position.elapsed, windowMs)
            if (left < bestRemaining || (left === bestRemaining && limits[i]!.limit < limits[best]!.limit)) {
              best = i
              bestRemaining = left
            }
          }
          const c = counts[best]!
          return {
            admitted,
            limit: limits[best]!.limit,
            remaining: bestRemaining,
            reset: Math.ceil(resetAtMs(c.previous, c.current, position, windowMs, now) / 1000),
          }
        }
        // Refused: the limit that frees up last decides when to come back.
        let worst = 0
        let wait = -1
        for (let i = 0; i < limits.length; i++) {
          const { previous, current } = counts[i]!
          const w = waitMs(limits[i]!.limit, previous, current, position.elapsed, windowMs)
          if (w > wait) {
            wait = w
            worst = i
          }
        }
        const c = counts[worst]!
        return {
          admitted,
          limit: limits[worst]!.limit,
          remaining: 0,
          reset: Math.ceil(resetAtMs(c.previous, c.current, position, windowMs, now) / 1000),
          retryAfter: Math.max(1, Math.ceil(wait / 1000)),
        }
      }

      const run = (group: string, limits: ReadonlyArray<LimitKey>) =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          const { admitted, counts } = yield* counters.hit(group, limits, now, windowMs)
          return verdict(limits, admitted, counts, now)
        })

      /**
       * A person signed in to the dashboard (a session) has a limit of their own and does not draw on the
       * workspace's: otherwise an agent flooding the API would keep the people from stopping it (the suspend was
       * refused with the agents' 429 in the outside review). Keys, tokens and apps share the workspace's.
       */
      const limitsOf = (actor: Actor, plan: Plan) => {
        const perPlan = config.plans[plan]
        const limits: Array<LimitKey> = [{ key: `key:${actor.credential.id}`, limit: perPlan }]
        if (actor.credential.type !== "user") limits.push({ key: "ws", limit: perPlan })
        if (actor.agentId) limits.push({ key: `agent:${actor.agentId}`, limit: config.agent })
        return limits
      }
      const hitNow = counters.hitNow
      const anonymousLimits: ReadonlyArray<LimitKey> = [{ key: "anonymous", limit: config.anonymous }]

      return RateLimiter.of({
        check: (actor) =>
          config.enabled
            ? Effect.gen(function* () {
                const now = yield* Clock.currentTimeMillis
                return yield* run(actor.workspaceId, limitsOf(actor, yield* planOf(actor.workspaceId, now)))
              })
            : Effect.succeed(undefined),
        checkNow: (actor, now) => {
          if (!config.enabled) return "off"
          const plan = plans.get(actor.workspaceId)
          if (!plan || plan.until <= now) return undefined
          const limits = limitsOf(actor, plan.plan)
          const hit = hitNow(actor.workspaceId, limits, now, windowMs)
          return hit instanceof Promise
            ? hit.then(({ admitted, counts }) => verdict(limits, admitted, counts, now))
            : verdict(limits, hit.admitted, hit.counts, now)
        },
        checkAnonymous: (address) =>
          config.enabled ? run(`ip:${addressBucket(address)}`, anonymousLimits) : Effect.succeed(undefined),
        checkAnonymousNow: (address, now) => {
          if (!config.enabled) return "off"
          const hit = hitNow(`ip:${addressBucket(address)}`, anonymousLimits, now, windowMs)
          return hit instanceof Promise
            ? hit.then(({ admitted, counts }) => verdict(anonymousLimits, admitted, counts, now))
            : verdict(anonymousLimits, hit.admitted, hit.counts, now)
        },
      })
    }),
  )
}
