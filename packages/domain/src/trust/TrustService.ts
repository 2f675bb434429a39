import { Database } from "@agentgov/db"
import { BADGE_TYP, checkBadge, parseBadge } from "@agentgov/verifier"
import { Clock, Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import type { Agent } from "../agents/Agent.ts"
import { AgentDeregistered, AgentNotFound } from "../agents/AgentErrors.ts"
import { AGENTS_CHANNEL, AgentRepo } from "../agents/AgentRepo.ts"
import { AuditLog } from "../audit/AuditLog.ts"
import type { Actor } from "../auth/Actor.ts"
import { TokenSettings } from "../auth/SdkTokens.ts"
import { ComplianceRepo } from "../compliance/ComplianceRepo.ts"
import type { Framework } from "../compliance/controls/Control.ts"
import { signCompact } from "../keys/jws.ts"
import { SigningKeys } from "../keys/SigningKeys.ts"
import { InvalidInput, PermissionDenied } from "../shared/errors.ts"
import { newId } from "../shared/ids.ts"
import { isoOf } from "../shared/time.ts"
import { transactional } from "../shared/transaction.ts"
import { BADGE_TIERS, type BadgeTier, badgeOf, tierOf } from "./Tier.ts"
import type { Adjustment, Badge, BadgeVerification, CreateAdjustment, Reputation, TrustScore } from "./Trust.ts"
import { BadgeNotFound } from "./TrustErrors.ts"
import { type Component, computeScore, type Evidence, emptyEvidence } from "./TrustModel.ts"
import { factsOf, MODEL_VERSION } from "./TrustRecompute.ts"

/** D13: badges expire within 24 h. */
export const BADGE_LIFETIME_MS = 24 * 3_600_000
/** A badge is handed out again (same bytes, same ETag) for this long, then signed afresh. */
const REISSUE_AFTER_MS = 3_600_000
/** The longest an agent's badge state is trusted without a notification (a safety net for a missed one). */
const STATE_MAX_AGE_MS = 30_000
const CACHE_LIMIT = 50_000

interface BadgeState {
  readonly agentId: string
  readonly name: string
  readonly tier: BadgeTier | undefined
  readonly score: number
  readonly certifications: ReadonlyArray<Framework>
  /**
   * When the first of the named frameworks stops being certified (epoch ms; its latest certification in force
   * ends): a badge naming them expires by then, so that checked offline it never names a certification past its end.
   */
  readonly certifiedUntil: number | undefined
}

interface CachedBadge {
  readonly state: BadgeState
  readonly badge: Badge | undefined
  readonly issuedMs: number
  readonly checkedMs: number
}

const HISTORY_DEFAULT = 200

/**
 * Trust scores, reputation, adjustments and badges (D12, D13). Reads never recompute from the
 * history: scores are kept current by TrustRecompute (the trust worker). Badges are public: they
 * are looked up by agent id alone and say nothing beyond the agent's name, tier and score.
 */
export class TrustService extends Context.Service<
  TrustService,
  {
    readonly score: (actor: Actor, agentId: string) => Effect.Effect<TrustScore, AgentNotFound | PermissionDenied>
    readonly reputation: (
      actor: Actor,
      agentId: string,
      limit?: number,
    ) => Effect.Effect<Reputation, AgentNotFound | PermissionDenied>
    readonly adjust: (
      actor: Actor,
      agentId: string,
      input: CreateAdjustment,
    ) => Effect.Effect<Adjustment, AgentNotFound | AgentDeregistered | PermissionDenied | InvalidInput>
    /** The agent's current badge (public). */
    readonly badge: (agentId: string) => Effect.Effect<Badge, BadgeNotFound>
    /**
     * The hot path of `badge`, outside any fiber: the badge `badge` would answer at `nowMs` when its cache can tell
     * without a read (`null`: the agent holds none), else undefined (then `badge` decides).
     */
    readonly cachedBadge: (agentId: string, nowMs: number) => Badge | null | undefined
    /** Checks the agent's current badge (public). */
    readonly verifyCurrent: (agentId: string) => Effect.Effect<BadgeVerification>
    /** Checks a badge a stranger presents: its JSON (text or object), its SVG or its JWS (public). */
    readonly verify: (
      agentId: string,
      presented: string | Readonly<Record<string, unknown>>,
    ) => Effect.Effect<BadgeVerification>
  }
>()("@agentgov/domain/trust/TrustService") {
  static readonly layer = Layer.effect(
    TrustService,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const db = yield* Database
      const agents = yield* AgentRepo
      const certifications = yield* ComplianceRepo
      const audit = yield* AuditLog
      const keys = yield* SigningKeys
      const settings = yield* TokenSettings
      const tx = transactional(sql)

      const load = (actor: Actor, id: string) =>
        Effect.gen(function* () {
          if (actor.agentId !== undefined && actor.agentId !== id)
            return yield* new PermissionDenied({ message: "this credential is bound to another agent" })
          const agent = yield* agents.find(actor.workspaceId, id, isoOf(yield* Clock.currentTimeMillis))
          if (!agent) return yield* new AgentNotFound({ agentId: id })
          return agent
        })

      const stored = (agent: Agent) =>
        sql<{
          evidence: Evidence
          score: number
          components: ReadonlyArray<Component>
          computed_at: Date
        }>`SELECT evidence, score, components, computed_at FROM trust_scores
            WHERE workspace_id = ${agent.workspaceId} AND agent_id = ${agent.id}`.pipe(
          Effect.map((rows) => rows[0]),
          Effect.orDie,
        )

      const score = Effect.fn("TrustService.score")(function* (actor: Actor, agentId: string) {
        const agent = yield* load(actor, agentId)
        const row = yield* stored(agent)
        if (row !== undefined)
          return {
            agentId,
            score: row.score,
            tier: tierOf(row.score),
            components: row.components,
            computedAt: row.computed_at.toISOString(),
            policyVersion: MODEL_VERSION,
          } satisfies TrustScore
        // Not read by the worker yet (it was registered a moment ago): the score of no evidence, as the worker will find it.
        const now = yield* Clock.currentTimeMillis
        const facts = (yield* factsOf(sql, agent.workspaceId, [agent.id], now)).get(agent.id)
        const fresh = computeScore(emptyEvidence(Date.parse(agent.createdAt)), facts!, now)
        return {
          agentId,
          score: fresh.score,
          tier: fresh.tier,
          components: fresh.components,
          computedAt: isoOf(now),
          policyVersion: MODEL_VERSION,
        } satisfies TrustScore
      })

      const reputation = Effect.fn("TrustService.reputation")(function* (
        actor: Actor,
        agentId: string,
        limit = HISTORY_DEFAULT,
      ) {
        const agent = yield* load(actor, agentId)
        const row = yield* stored(agent)
        const history = yield* sql<{ at: Date; score: number; tier: string }>`SELECT at, score, tier FROM trust_history
            WHERE agent_id = ${agent.id} AND workspace_id = ${agent.workspaceId}
            ORDER BY at DESC LIMIT ${limit}`.pipe(Effect.orDie)
        const current = row?.score ?? agent.trustScore
        return {
          agentId,
          score: current,
          tier: tierOf(current),
          counts: { ...row?.evidence.totals },
          history: history.map((h) => ({ at: h.at.toISOString(), score: h.score, tier: tierOf(h.score) })).reverse(),
        } satisfies Reputation
      })

      const adjust = Effect.fn("TrustService.adjust")(function* (
        actor: Actor,
        agentId: string,
        input: CreateAdjustment,
      ) {
        return yield* tx(
          Effect.gen(function* () {
            const agent = yield* load(actor, agentId)
            if (agent.status === "deregistered") return yield* new AgentDeregistered({ agentId })
            if (input.delta === 0) return yield* new InvalidInput({ field: "delta", message: "must not be 0" })
            const now = yield* Clock.currentTimeMillis
            const adjustment: Adjustment = {
              id: newId("adj", now),
              agentId,
              delta: input.delta,
              reason: input.reason,
              createdAt: isoOf(now),
            }
            yield* sql`INSERT INTO trust_adjustments (id, workspace_id, agent_id, delta, reason, created_by, created_at)
                VALUES (${adjustment.id}, ${actor.workspaceId}, ${agentId}, ${input.delta}, ${input.reason},
                        ${actor.credential.id}, ${adjustment.createdAt}::timestamptz)`
            // The worker reads it from the trail as evidence, like every other.
            yield* audit.append(actor, [
              {
                type: "trust.score.adjusted",
                agentId,
                data: {
                  adjustmentId: adjustment.id,
                  agentId,
                  agentName: agent.name,
                  delta: input.delta,
                  reason: input.reason,
                },
              },
            ])
            return adjustment
          }),
        )
      })

      // ---- badges -------------------------------------------------------------------------------

      const cache = new Map<string, CachedBadge>()
      /**
       * A change to the agent's row (or a lost notification) makes its entry be read again before it answers, but
       * keeps the badge issued: the agent's state is compared, and an unchanged one is answered with the same bytes
       * and ETag. Dropping the entry instead would sign a new badge on every notification, late ones included,
       * and a client's `If-None-Match` would miss for a badge that had not changed.
       */
      const recheck = (id: string) => {
        const hit = cache.get(id)
        if (hit !== undefined) cache.set(id, { ...hit, checkedMs: Number.NEGATIVE_INFINITY })
      }
      const recheckAll = () => {
        for (const id of cache.keys()) recheck(id)
      }
      agents.onUpdate(recheck)
      yield* Effect.acquireRelease(
        Effect.promise(() => db.listen(AGENTS_CHANNEL, recheck, recheckAll)),
        (unlisten) => Effect.promise(() => unlisten().catch(() => {})),
      )

      /** The badge the agent holds now, from its row alone (the score the guard sees, its status as of now). */
      const stateOf = (agentId: string) =>
        Effect.gen(function* () {
          const rows = yield* sql<{ workspace_id: string }>`SELECT workspace_id FROM agents WHERE id = ${agentId}`.pipe(
            Effect.orDie,
          )
          const workspaceId = rows[0]?.workspace_id
          if (workspaceId === undefined) return undefined
          const at = isoOf(yield* Clock.currentTimeMillis)
          const agent = yield* agents.find(workspaceId, agentId, at)
          if (!agent) return undefined
          const tier = badgeOf(tierOf(agent.trustScore), agent.status)
          const certified = tier === undefined ? [] : yield* certifications.activeFrameworks(workspaceId, agentId, at)
          return {
            agentId,
            name: agent.name,
            tier,
            score: agent.trustScore,
            certifications: certified.map((c) => c.framework),
            certifiedUntil: certified.length === 0 ? undefined : Math.min(...certified.map((c) => c.until)),
          } satisfies BadgeState
        })

      const sameState = (a: BadgeState, b: BadgeState) =>
        a.name === b.name &&
        a.tier === b.tier &&
        a.score === b.score &&
        a.certifications.join() === b.certifications.join() &&
        a.certifiedUntil === b.certifiedUntil

      const issue = (state: BadgeState & { tier: BadgeTier }, now: number) =>
        Effect.gen(function* () {
          const key = yield* keys.current
          const issuedAt = isoOf(now)
          const expiresMs = Math.min(now + BADGE_LIFETIME_MS, state.certifiedUntil ?? Number.POSITIVE_INFINITY)
          const expiresAt = isoOf(expiresMs)
          const fields = {
            agentId: state.agentId,
            agentName: state.name,
            tier: state.tier,
            score: state.score,
            issuedAt,
            expiresAt,
            issuer: settings.issuer,
            certifications: state.certifications,
          }
          const signature = signCompact(
            { alg: "EdDSA", typ: BADGE_TYP, kid: key.kid },
            {
              ...fields,
              iss: settings.issuer,
              sub: state.agentId,
              iat: Math.floor(now / 1000),
              exp: Math.floor(expiresMs / 1000),
            },
            key.privateKey,
          )
          return { ...fields, signature } satisfies Badge
        })

      /** Whether the cached badge has expired (one capped at a certification's end can, within REISSUE_AFTER_MS). */
      const expiredAt = (hit: CachedBadge, now: number) =>
        hit.badge !== undefined && Date.parse(hit.badge.expiresAt) <= now

      /** The cache's entry for the agent while it may answer at `now` without a read. */
      const freshHit = (agentId: string, now: number) => {
        const hit = cache.get(agentId)
        return hit &&
          now - hit.checkedMs < STATE_MAX_AGE_MS &&
          now - hit.issuedMs < REISSUE_AFTER_MS &&
          !expiredAt(hit, now)
          ? hit
          : undefined
      }

      const cachedBadge = (agentId: string, now: number) => {
        const hit = freshHit(agentId, now)
        return hit === undefined ? undefined : (hit.badge ?? null)
      }

      /**
       * The current badge (or undefined), from the cache while nothing changed. `reread`: the agent's state is read
       * now whatever the cache holds (a check of what a badge claims must not answer from a state that a change's
       * notification, still on its way, is about to drop); an unchanged state keeps the badge issued.
       */
      const current = (agentId: string, reread = false) =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          const fresh = reread ? undefined : freshHit(agentId, now)
          if (fresh) return fresh.badge
          const hit = cache.get(agentId)
          const state = yield* stateOf(agentId)
          if (state === undefined) {
            cache.delete(agentId)
            return undefined
          }
          let badge: Badge | undefined
          let issuedMs = now
          if (hit && sameState(hit.state, state) && now - hit.issuedMs < REISSUE_AFTER_MS && !expiredAt(hit, now)) {
            badge = hit.badge
            issuedMs = hit.issuedMs
          } else if (state.tier !== undefined) badge = yield* issue({ ...state, tier: state.tier }, now)
          if (cache.size >= CACHE_LIMIT) cache.clear()
          cache.set(agentId, { state, badge, issuedMs, checkedMs: now })
          return badge
        })

      const badge = Effect.fn("TrustService.badge")(function* (agentId: string) {
        const found = yield* current(agentId)
        if (found === undefined) return yield* new BadgeNotFound({ agentId })
        return found
      })

      const refused = (
        agentId: string,
        reason: NonNullable<BadgeVerification["reason"]>,
        claims?: Readonly<Record<string, unknown>>,
      ): BadgeVerification => ({
        valid: false,
        reason,
        agentId,
        tier: BADGE_TIERS.includes(claims?.tier as BadgeTier) ? (claims?.tier as BadgeTier) : null,
        score: typeof claims?.score === "number" && Number.isInteger(claims.score) ? claims.score : null,
        issuedAt: typeof claims?.issuedAt === "string" ? claims.issuedAt : null,
        expiresAt: typeof claims?.expiresAt === "string" ? claims.expiresAt : null,
        current: false,
      })

      const verify_ = Effect.fn("TrustService.verify")(function* (
        agentId: string,
        presented: string | Readonly<Record<string, unknown>>,
      ) {
        const parsed = parseBadge(presented)
        if (parsed === undefined) return refused(agentId, "malformed")
        const key = yield* keys.publicKey(parsed.kid)
        const checked = checkBadge(parsed, key, { agentId, now: yield* Clock.currentTimeMillis })
        if (!checked.valid) return refused(agentId, checked.reason, checked.claims)
        const holds = yield* current(agentId, true)
        const { tier, score, issuedAt, expiresAt, certifications: named } = checked.claims
        return {
          valid: true,
          agentId,
          tier,
          score,
          issuedAt,
          expiresAt,
          // What the badge shows holds now: the tier, and every certification it names is still in force.
          current:
            holds !== undefined &&
            holds.tier === tier &&
            named.every((f) => (holds.certifications as ReadonlyArray<string>).includes(f)),
        } satisfies BadgeVerification
      })

      const verifyCurrent = Effect.fn("TrustService.verifyCurrent")(function* (agentId: string) {
        const found = yield* current(agentId, true)
        if (found === undefined) return refused(agentId, "no_badge")
        return yield* verify_(agentId, found.signature)
      })

      return TrustService.of({ score, reputation, adjust, badge, cachedBadge, verifyCurrent, verify: verify_ })
    }),
  )
}
