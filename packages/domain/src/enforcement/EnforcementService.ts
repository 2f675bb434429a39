import { Clock, Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import type { Agent } from "../agents/Agent.ts"
import { AgentDeregistered, AgentNotFound } from "../agents/AgentErrors.ts"
import { AgentRepo } from "../agents/AgentRepo.ts"
import { ApiKeyRepo } from "../apikeys/ApiKeyRepo.ts"
import type { NewEvent } from "../audit/AuditEvent.ts"
import { AuditLog } from "../audit/AuditLog.ts"
import type { Actor } from "../auth/Actor.ts"
import { ComplianceRepo } from "../compliance/ComplianceRepo.ts"
import type { RuleEnforcement } from "../policies/engine/index.ts"
import { InvalidInput, PermissionDenied } from "../shared/errors.ts"
import { newId } from "../shared/ids.ts"
import { idCursor, type Page, pageWindow, toPage } from "../shared/pagination.ts"
import type { InvalidCursor } from "../shared/paginationErrors.ts"
import { isTimestamp } from "../shared/schemas.ts"
import { requireStorable } from "../shared/storable.ts"
import { isoOf } from "../shared/time.ts"
import { transactional } from "../shared/transaction.ts"
import { systemActorIn, WorkspaceRepo } from "../workspaces/WorkspaceRepo.ts"
import {
  type AppealEnforcement,
  type CreateEnforcement,
  type Enforcement,
  type EnforcementListQuery,
  type EnforcementStatus,
  type EnforcementType,
  MAX_ENFORCEMENT_DURATION_SECONDS,
  MAX_THROTTLE_LIMIT_PER_MINUTE,
  type Resolution,
  type StoredEnforcement,
  SUSPENDING_TYPES,
  type UpdateEnforcement,
} from "./Enforcement.ts"
import { EnforcementAlreadyAppealed, EnforcementClosed, EnforcementNotFound } from "./EnforcementErrors.ts"
import { EnforcementRepo } from "./EnforcementRepo.ts"

/** What the guard passes to `autoEnforce` when a rule's violations call for an enforcement. */
export interface AutoEnforcement {
  readonly workspaceId: string
  readonly agentId: string
  readonly type: EnforcementType
  readonly reason: string
  readonly policyId: string
  readonly ruleId: string
  /** Absent: until an operator resolves it. */
  readonly durationSeconds?: number | undefined
  /** Required for `throttle`, refused otherwise. */
  readonly limitPerMinute?: number | undefined
  /** Recorded on the events; absent: the system. */
  readonly actor?: Actor | undefined
}

/** A deny rule with `enforce` that has just denied an agent (its policy.denied event committed). */
export interface RuleDenial {
  readonly workspaceId: string
  readonly agentId: string
  readonly policyId: string
  readonly ruleId: string
  readonly enforce: RuleEnforcement
  /** The enforcement's reason when the rule's `enforce` gives none. */
  readonly defaultReason: string
}

type CreateError = AgentNotFound | AgentDeregistered | InvalidInput | PermissionDenied
type ChangeError = EnforcementNotFound | EnforcementClosed | InvalidInput | PermissionDenied

const ALL_STATUSES: ReadonlyArray<EnforcementStatus> = ["active", "appealed", "resolved", "expired"]

const inForceByStatus = (e: StoredEnforcement) =>
  e.status === "active" || e.status === "appealed" || (e.status === "resolved" && e.resolution === "upheld")

/**
 * The enforcement as it stands at `now`: one in force past its expiry has expired from that instant
 * (as of `expiresAt`), whether or not the sweep has recorded it yet. The sweep writes the same values.
 */
const present = (e: StoredEnforcement, now: number): Enforcement => {
  const byStatus = inForceByStatus(e)
  if (byStatus && e.expiresAt !== null && Date.parse(e.expiresAt) <= now)
    return { ...e, status: "expired", inForce: false, updatedAt: e.expiresAt }
  return { ...e, inForce: byStatus }
}

const eventBase = (e: StoredEnforcement) => ({ enforcementId: e.id, agentId: e.agentId, type: e.type })

/** `enforcement.resolved` of expiries; the first expired suspension of each reinstated agent says so. */
const lapseEvents = (expired: ReadonlyArray<StoredEnforcement>, reinstated: ReadonlySet<string>): Array<NewEvent> => {
  const told = new Set<string>()
  return expired.map((e) => {
    const says = SUSPENDING_TYPES.has(e.type) && reinstated.has(e.agentId) && !told.has(e.agentId)
    if (says) told.add(e.agentId)
    return {
      type: "enforcement.resolved",
      agentId: e.agentId,
      data: { ...eventBase(e), status: "expired", reinstated: says },
    }
  })
}

/**
 * Enforcement (decision D7): warnings, throttles, suspensions and revocations against an agent. A
 * suspension in force keeps the agent `suspended`; a revocation also revokes the agent's API keys (on
 * every instance, through the keys' NOTIFY). The agent appeals (`appealed`); an operator resolves it as
 * `upheld` (stays in force until its expiry) or `overturned` (lifted at once). Expiry lifts it too.
 * Lifting the last suspension or revocation in force reinstates the agent (`active`).
 */
export class EnforcementService extends Context.Service<
  EnforcementService,
  {
    readonly create: (actor: Actor, input: CreateEnforcement) => Effect.Effect<Enforcement, CreateError>
    /**
     * For the guard, after a deny rule with `enforce` denied an agent: issues the rule's enforcement
     * (as the system) when none by this rule is in force and the rule has now denied the agent `after`
     * times within `withinSeconds`, counting from the end of its previous enforcement by this rule if
     * that is later. Serialised per agent by its row lock, so concurrent denials issue it once. The
     * enforcement, or undefined when none was due.
     */
    readonly enforceOnDenial: (denial: RuleDenial) => Effect.Effect<Enforcement | undefined, InvalidInput>
    /**
     * An enforcement issued by a policy rule, as the system or `actor`, in the caller's transaction
     * (enforceOnDenial's last step).
     */
    readonly autoEnforce: (
      input: AutoEnforcement,
    ) => Effect.Effect<Enforcement, AgentNotFound | AgentDeregistered | InvalidInput>
    readonly list: (
      actor: Actor,
      query: EnforcementListQuery,
    ) => Effect.Effect<Page<Enforcement>, InvalidCursor | PermissionDenied>
    readonly get: (actor: Actor, id: string) => Effect.Effect<Enforcement, EnforcementNotFound>
    /** Changes `reason` or the expiry, or resolves (`resolution`, `note`). */
    readonly update: (actor: Actor, id: string, patch: UpdateEnforcement) => Effect.Effect<Enforcement, ChangeError>
    readonly appeal: (
      actor: Actor,
      id: string,
      input: AppealEnforcement,
    ) => Effect.Effect<Enforcement, ChangeError | EnforcementAlreadyAppealed>
    /** The lowest requests-per-minute of the agent's throttles in force, if any (for the rate limiter). */
    readonly throttleFor: (workspaceId: string, agentId: string) => Effect.Effect<number | undefined>
    /** Records expiries (`enforcement.resolved`, status `expired`) and reinstates agents; returns how many. */
    readonly expireDue: Effect.Effect<number>
  }
>()("@agentgov/domain/enforcement/EnforcementService") {
  static readonly layer = Layer.effect(
    EnforcementService,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* EnforcementRepo
      const agents = yield* AgentRepo
      const workspaces = yield* WorkspaceRepo
      const keys = yield* ApiKeyRepo
      const certifications = yield* ComplianceRepo
      const audit = yield* AuditLog
      const tx = transactional(sql)

      const nowMs = Clock.currentTimeMillis

      const systemIn = (workspaceId: string) => systemActorIn(workspaces, workspaceId)

      const setAgentStatus = (agent: Agent, status: Agent["status"], now: number) =>
        agents.update({ ...agent, status, updatedAt: isoOf(now) }).pipe(Effect.catchTag("SqlError", Effect.die))

      /**
       * The end of an enforcement from `expiresAt` or `durationSeconds` (one at most), judged at `now`:
       * undefined when neither is given, null to clear (PATCH only).
       */
      const endOf = (
        type: EnforcementType,
        input: { readonly expiresAt?: string | null | undefined; readonly durationSeconds?: number | undefined },
        now: number,
      ): Effect.Effect<string | null | undefined, InvalidInput> => {
        if (input.expiresAt !== undefined && input.durationSeconds !== undefined)
          return Effect.fail(
            new InvalidInput({ field: "durationSeconds", message: "give expiresAt or durationSeconds, not both" }),
          )
        const field = input.durationSeconds !== undefined ? "durationSeconds" : "expiresAt"
        let end: number | null | undefined
        if (input.durationSeconds !== undefined) {
          const d = input.durationSeconds
          if (!Number.isInteger(d) || d < 1 || d > MAX_ENFORCEMENT_DURATION_SECONDS)
            return Effect.fail(
              new InvalidInput({ field, message: `must be an integer from 1 to ${MAX_ENFORCEMENT_DURATION_SECONDS}` }),
            )
          end = now + d * 1000
        } else if (input.expiresAt !== undefined && input.expiresAt !== null) {
          if (!isTimestamp(input.expiresAt))
            return Effect.fail(new InvalidInput({ field, message: "not an ISO 8601 timestamp" }))
          end = Date.parse(input.expiresAt)
          if (end <= now) return Effect.fail(new InvalidInput({ field, message: "must be in the future" }))
          // The same bound as durationSeconds: ten years at most (no end at all is "until resolved").
          if (end > now + MAX_ENFORCEMENT_DURATION_SECONDS * 1000)
            return Effect.fail(
              new InvalidInput({
                field,
                message: `must be at most ${MAX_ENFORCEMENT_DURATION_SECONDS} seconds (ten years) from now; omit it for no end`,
              }),
            )
        } else end = input.expiresAt
        if (end !== undefined && end !== null && type === "revocation")
          return Effect.fail(
            new InvalidInput({
              field,
              message: "a revocation does not expire (its keys stay revoked); resolve it as overturned to reinstate",
            }),
          )
        return Effect.succeed(end === undefined || end === null ? end : isoOf(end))
      }

      const checkLimit = (type: EnforcementType, limitPerMinute: number | undefined) => {
        if (type === "throttle" && limitPerMinute === undefined)
          return Effect.fail(new InvalidInput({ field: "limitPerMinute", message: "required for a throttle" }))
        if (type !== "throttle" && limitPerMinute !== undefined)
          return Effect.fail(new InvalidInput({ field: "limitPerMinute", message: "only a throttle takes a limit" }))
        if (
          limitPerMinute !== undefined &&
          (!Number.isInteger(limitPerMinute) || limitPerMinute < 1 || limitPerMinute > MAX_THROTTLE_LIMIT_PER_MINUTE)
        )
          return Effect.fail(
            new InvalidInput({
              field: "limitPerMinute",
              message: `must be an integer from 1 to ${MAX_THROTTLE_LIMIT_PER_MINUTE}`,
            }),
          )
        return Effect.void
      }

      /** Issues an enforcement in one transaction (joining the caller's): suspends, revokes keys, records. */
      const issue = Effect.fn("EnforcementService.issue")(function* (
        actor: Actor,
        spec: {
          readonly agentId: string
          readonly type: EnforcementType
          readonly reason: string
          readonly expiresAt?: string | undefined
          readonly durationSeconds?: number | undefined
          readonly limitPerMinute?: number | undefined
          readonly policyId: string | null
          readonly ruleId: string | null
        },
      ) {
        if (spec.reason.length === 0 || spec.reason.length > 2000)
          return yield* new InvalidInput({ field: "reason", message: "must be 1 to 2000 characters" })
        yield* checkLimit(spec.type, spec.limitPerMinute)
        const now = yield* nowMs
        const expiresAt = (yield* endOf(spec.type, spec, now)) ?? null
        return yield* tx(
          Effect.gen(function* () {
            // A suspension or revocation of an agent whose last one has lapsed but is not yet swept: the agent
            // reads `active` (AgentRepo.find), so record the lapse first, as the sweep would (enforcement rows,
            // then the agent: the lock order), and the agent is reinstated, then suspended, each said once.
            const lapsed = SUSPENDING_TYPES.has(spec.type)
              ? yield* repo.expire(actor.workspaceId, isoOf(now), spec.agentId)
              : []
            const lapsedSuspending = lapsed.filter((e) => SUSPENDING_TYPES.has(e.type))
            const reinstatedByLapse =
              lapsedSuspending.length > 0 &&
              (yield* reinstate(
                actor.workspaceId,
                spec.agentId,
                lapsed.map((e) => e.id),
                now,
                Math.max(...lapsedSuspending.map((e) => Date.parse(e.expiresAt!))),
              ))
            // The agent's row lock serialises this with every other change of its status.
            const agent = yield* agents.findForUpdate(actor.workspaceId, spec.agentId)
            if (!agent) return yield* new AgentNotFound({ agentId: spec.agentId })
            if (agent.status === "deregistered") return yield* new AgentDeregistered({ agentId: spec.agentId })
            // Suspended as it reads now: stored so with a suspension or revocation still in force. (A lapse the
            // step above could not record, its row being held elsewhere, still reads active.)
            const suspended =
              agent.status === "suspended" &&
              (yield* repo.countSuspending(actor.workspaceId, agent.id, [], isoOf(now))) > 0
            const stored: StoredEnforcement = {
              id: newId("enf", now),
              workspaceId: actor.workspaceId,
              agentId: agent.id,
              type: spec.type,
              status: "active",
              reason: spec.reason,
              policyId: spec.policyId,
              ruleId: spec.ruleId,
              limitPerMinute: spec.limitPerMinute ?? null,
              expiresAt,
              appealReason: null,
              appealedAt: null,
              resolution: null,
              resolutionNote: null,
              resolvedAt: null,
              createdAt: isoOf(now),
              updatedAt: isoOf(now),
            }
            yield* repo.insert(stored)
            const events: Array<NewEvent> = [
              {
                type: "enforcement.created",
                agentId: agent.id,
                data: {
                  ...eventBase(stored),
                  status: "active",
                  reason: stored.reason,
                  ...(stored.policyId !== null ? { policyId: stored.policyId } : {}),
                  ...(stored.ruleId !== null ? { ruleId: stored.ruleId } : {}),
                  ...(stored.limitPerMinute !== null ? { limitPerMinute: stored.limitPerMinute } : {}),
                  ...(expiresAt !== null ? { expiresAt } : {}),
                },
              },
            ]
            // A second suspension of a suspended agent changes nothing about the agent: no second event.
            if (SUSPENDING_TYPES.has(stored.type) && !suspended) {
              yield* setAgentStatus(agent, "suspended", now)
              events.push({
                type: "agent.suspended",
                agentId: agent.id,
                data: {
                  agentId: agent.id,
                  agentName: agent.name,
                  enforcementId: stored.id,
                  reason: stored.reason,
                  ...(expiresAt !== null ? { expiresAt } : {}),
                },
              })
            }
            // D14: a suspension or revocation ends the agent's certifications, whatever the agent's status was.
            if (SUSPENDING_TYPES.has(stored.type))
              events.push(
                ...(yield* certifications.revokeCertifications(
                  actor.workspaceId,
                  agent.id,
                  stored.type === "revocation" ? "agent_revoked" : "agent_suspended",
                  isoOf(now),
                )),
              )
            if (stored.type === "revocation") {
              // Before the chain head is taken: key rows, then the chain head, as every key revocation locks.
              const revoked = yield* keys.revokeAll(actor.workspaceId, agent.id, "agent_revoked", isoOf(now))
              for (const k of revoked)
                events.push({
                  type: "apikey.revoked",
                  agentId: agent.id,
                  data: { keyId: k.id, name: k.name, prefix: k.prefix, reason: "agent_revoked" },
                })
            }
            // The lapses, as the system (what the sweep records), after every row lock and before this issue.
            if (lapsed.length > 0)
              yield* audit.append(
                yield* systemIn(actor.workspaceId),
                lapseEvents(lapsed, reinstatedByLapse ? new Set([agent.id]) : new Set()),
              )
            yield* audit.append(actor, events)
            return present(stored, now)
          }),
        )
      })

      const create = Effect.fn("EnforcementService.create")(function* (actor: Actor, input: CreateEnforcement) {
        if (actor.agentId !== undefined)
          return yield* new PermissionDenied({ message: "agent-bound credentials cannot issue enforcements" })
        yield* requireStorable(input)
        return yield* issue(actor, { ...input, policyId: null, ruleId: null })
      })

      const autoEnforce = Effect.fn("EnforcementService.autoEnforce")(function* (input: AutoEnforcement) {
        yield* requireStorable({ reason: input.reason, policyId: input.policyId, ruleId: input.ruleId })
        return yield* tx(
          Effect.gen(function* () {
            const actor = input.actor ?? (yield* systemIn(input.workspaceId))
            if (actor.workspaceId !== input.workspaceId)
              return yield* Effect.die(new Error("autoEnforce: the actor belongs to another workspace"))
            return yield* issue(actor, {
              agentId: input.agentId,
              type: input.type,
              reason: input.reason,
              durationSeconds: input.durationSeconds,
              limitPerMinute: input.limitPerMinute,
              policyId: input.policyId,
              ruleId: input.ruleId,
            })
          }),
        )
      })

      /** When an enforcement no longer in force stopped being in force. */
      const endedAt = (e: StoredEnforcement) =>
        e.resolution === "overturned" && e.resolvedAt !== null ? e.resolvedAt : (e.expiresAt ?? e.updatedAt)

      const enforceOnDenial = Effect.fn("EnforcementService.enforceOnDenial")(function* (denial: RuleDenial) {
        const { workspaceId, agentId, policyId, ruleId, enforce } = denial
        return yield* tx(
          Effect.gen(function* () {
            const agent = yield* agents.findForUpdate(workspaceId, agentId)
            if (!agent || agent.status === "deregistered") return undefined
            const now = yield* nowMs
            const last = yield* repo.latestByRule(workspaceId, agentId, policyId, ruleId)
            if (last && present(last, now).inForce) return undefined
            const windowStart = now - enforce.withinSeconds * 1000
            // Denials until the previous one ended were answered by it: the count starts again there.
            const since = last ? Math.max(windowStart, Date.parse(endedAt(last))) : windowStart
            const denials = yield* repo.countDenials(workspaceId, agentId, policyId, ruleId, isoOf(since))
            if (denials < enforce.after) return undefined
            return yield* autoEnforce({
              workspaceId,
              agentId,
              type: enforce.type,
              reason: enforce.reason ?? denial.defaultReason,
              durationSeconds: enforce.durationSeconds,
              limitPerMinute: enforce.limitPerMinute,
              policyId,
              ruleId,
            }).pipe(
              // The agent's row is locked and checked above: neither can happen here.
              Effect.catchTags({ AgentNotFound: Effect.die, AgentDeregistered: Effect.die }),
            )
          }),
        )
      })

      /**
       * After `lifted` stopped being in force: the agent goes back to `active` unless another suspension or
       * revocation of it is still in force (or it is not suspended: deregistered stays deregistered).
       * Takes the agent's row lock, after the enforcement rows (the lock order everywhere). `liftedAt`: when
       * they stopped being in force (the sweep: the last one's expiry); it becomes the agent's update time
       * unless the agent changed later, which is what the agents' reads show before the sweep gets there
       * (AgentRepo.find).
       */
      const reinstate = (
        workspaceId: string,
        agentId: string,
        lifted: ReadonlyArray<string>,
        now: number,
        liftedAt = now,
      ) =>
        Effect.gen(function* () {
          const agent = yield* agents.findForUpdate(workspaceId, agentId)
          if (agent?.status !== "suspended") return false
          if ((yield* repo.countSuspending(workspaceId, agentId, lifted, isoOf(now))) > 0) return false
          yield* setAgentStatus(agent, "active", Math.max(liftedAt, Date.parse(agent.updatedAt)))
          return true
        })

      const visible = (actor: Actor, e: StoredEnforcement | undefined, id: string) =>
        e === undefined || (actor.agentId !== undefined && e.agentId !== actor.agentId)
          ? Effect.fail(new EnforcementNotFound({ enforcementId: id }))
          : Effect.succeed(e)

      const list = Effect.fn("EnforcementService.list")(function* (actor: Actor, query: EnforcementListQuery) {
        if (actor.agentId !== undefined && query.agentId !== undefined && query.agentId !== actor.agentId)
          return yield* new PermissionDenied({ message: "this credential is bound to another agent" })
        const { limit, before } = yield* pageWindow(query, idCursor("enf"))
        const asked = query.status
        const statuses =
          asked === undefined
            ? undefined
            : asked.includes("all")
              ? ALL_STATUSES
              : ALL_STATUSES.filter((s) => (asked as ReadonlyArray<string>).includes(s))
        const now = yield* nowMs
        const rows = yield* repo.list(actor.workspaceId, {
          statuses,
          types: query.type !== undefined && query.type.length > 0 ? [...new Set(query.type)] : undefined,
          agentId: actor.agentId ?? query.agentId,
          before,
          limit: limit + 1,
          now: isoOf(now),
        })
        return toPage(
          rows.map((e) => present(e, now)),
          limit,
        )
      })

      const get = Effect.fn("EnforcementService.get")(function* (actor: Actor, id: string) {
        return present(yield* visible(actor, yield* repo.find(actor.workspaceId, id), id), yield* nowMs)
      })

      const closed = (e: Enforcement, message: string) =>
        new EnforcementClosed({ enforcementId: e.id, status: e.status, message })

      const resolve = (
        actor: Actor,
        current: Enforcement,
        resolution: Resolution,
        note: string | undefined,
        now: number,
      ) =>
        Effect.gen(function* () {
          if (current.status === "expired") return yield* closed(current, `enforcement ${current.id} has expired`)
          if (current.status === "resolved") {
            // An upheld enforcement may still be overturned on a later review; nothing else reopens.
            if (current.resolution !== "upheld" || resolution !== "overturned")
              return yield* closed(current, `enforcement ${current.id} is already resolved as ${current.resolution}`)
          }
          const { inForce: _, ...rest } = current
          const next: StoredEnforcement = {
            ...rest,
            status: "resolved",
            resolution,
            resolutionNote: note ?? null,
            resolvedAt: isoOf(now),
            updatedAt: isoOf(now),
          }
          yield* repo.update(next)
          const reinstated =
            resolution === "overturned" && SUSPENDING_TYPES.has(next.type)
              ? yield* reinstate(actor.workspaceId, next.agentId, [next.id], now)
              : false
          yield* audit.append(actor, [
            {
              type: "enforcement.resolved",
              agentId: next.agentId,
              data: {
                ...eventBase(next),
                status: "resolved",
                resolution,
                reinstated,
                ...(note !== undefined ? { reason: note } : {}),
              },
            },
          ])
          return present(next, now)
        })

      const update = Effect.fn("EnforcementService.update")(function* (
        actor: Actor,
        id: string,
        patch: UpdateEnforcement,
      ) {
        if (actor.agentId !== undefined)
          return yield* new PermissionDenied({ message: "agent-bound credentials cannot change enforcements" })
        yield* requireStorable(patch)
        const edits = (["reason", "expiresAt", "durationSeconds"] as const).filter((k) => patch[k] !== undefined)
        if (patch.resolution !== undefined && edits.length > 0)
          return yield* new InvalidInput({
            field: "resolution",
            message: `cannot be combined with ${edits.join(", ")}: resolve, then change (or the reverse)`,
          })
        if (patch.note !== undefined && patch.resolution === undefined)
          return yield* new InvalidInput({ field: "note", message: "only with resolution" })
        return yield* tx(
          Effect.gen(function* () {
            const now = yield* nowMs
            const current = present(yield* visible(actor, yield* repo.findForUpdate(actor.workspaceId, id), id), now)
            if (patch.resolution !== undefined) return yield* resolve(actor, current, patch.resolution, patch.note, now)
            if (edits.length === 0) return current
            if (!current.inForce)
              return yield* closed(
                current,
                `enforcement ${id} is ${current.status === "expired" ? "expired" : `resolved as ${current.resolution}`}: it can no longer change`,
              )
            const end = yield* endOf(current.type, patch, now)
            const { inForce: _, ...rest } = current
            const next: StoredEnforcement = {
              ...rest,
              reason: patch.reason ?? current.reason,
              expiresAt: end === undefined ? current.expiresAt : end,
            }
            const changes = (["reason", "expiresAt"] as const).filter((k) => next[k] !== current[k])
            if (changes.length === 0) return current
            const updated: StoredEnforcement = { ...next, updatedAt: isoOf(now) }
            yield* repo.update(updated)
            yield* audit.append(actor, [
              {
                type: "enforcement.updated",
                agentId: updated.agentId,
                data: {
                  ...eventBase(updated),
                  changes,
                  ...(changes.includes("reason") ? { reason: updated.reason } : {}),
                  ...(changes.includes("expiresAt") ? { expiresAt: updated.expiresAt } : {}),
                },
              },
            ])
            return present(updated, now)
          }),
        )
      })

      const appeal = Effect.fn("EnforcementService.appeal")(function* (
        actor: Actor,
        id: string,
        input: AppealEnforcement,
      ) {
        // The agent itself appeals with its own key (which cannot hold enforcement:write); anyone else needs it.
        if (actor.agentId === undefined && !actor.scopes.has("enforcement:write"))
          return yield* new PermissionDenied({
            message: "this credential lacks the scope enforcement:write (an agent key may appeal its own)",
            scope: "enforcement:write",
          })
        yield* requireStorable(input)
        return yield* tx(
          Effect.gen(function* () {
            const now = yield* nowMs
            const current = present(yield* visible(actor, yield* repo.findForUpdate(actor.workspaceId, id), id), now)
            if (current.status === "appealed") return yield* new EnforcementAlreadyAppealed({ enforcementId: id })
            if (current.status !== "active")
              return yield* closed(
                current,
                `enforcement ${id} is ${current.status === "expired" ? "expired" : "resolved"}: there is nothing to appeal`,
              )
            const { inForce: _, ...rest } = current
            const next: StoredEnforcement = {
              ...rest,
              status: "appealed",
              appealReason: input.reason,
              appealedAt: isoOf(now),
              updatedAt: isoOf(now),
            }
            yield* repo.update(next)
            yield* audit.append(actor, [
              {
                type: "enforcement.appealed",
                agentId: next.agentId,
                data: { ...eventBase(next), status: "appealed", reason: input.reason },
              },
            ])
            return present(next, now)
          }),
        )
      })

      const throttleFor = (workspaceId: string, agentId: string) =>
        Effect.flatMap(nowMs, (now) => repo.lowestThrottle(workspaceId, agentId, isoOf(now)))

      // One transaction per workspace (one chain head each). Locks: the enforcement rows, then the agents in id
      // order, then the chain head, the order every other writer of these rows follows.
      const expireDue = Effect.gen(function* () {
        const nowMsValue = yield* nowMs
        const now = isoOf(nowMsValue)
        let count = 0
        for (const { workspaceId, deleted } of yield* repo.workspacesWithExpired(now)) {
          count += yield* tx(
            Effect.gen(function* () {
              const expired = yield* repo.expire(workspaceId, now)
              if (expired.length === 0) return 0
              // A deleted workspace's trail ends with `workspace.deleted` and its agents are deregistered (nobody to
              // reinstate): the lapses are recorded as they read, with no event after it.
              if (deleted) return expired.length
              const liftedIds = expired.map((e) => e.id)
              // Per agent, when its last expired suspension or revocation lapsed (what AgentRepo.find shows).
              const lapsedAt = new Map<string, number>()
              for (const e of expired) {
                if (SUSPENDING_TYPES.has(e.type))
                  lapsedAt.set(e.agentId, Math.max(lapsedAt.get(e.agentId) ?? 0, Date.parse(e.expiresAt!)))
              }
              const reinstated = new Set<string>()
              for (const agentId of [...lapsedAt.keys()].sort()) {
                if (yield* reinstate(workspaceId, agentId, liftedIds, nowMsValue, lapsedAt.get(agentId)))
                  reinstated.add(agentId)
              }
              yield* audit.append(yield* systemIn(workspaceId), lapseEvents(expired, reinstated))
              return expired.length
            }),
          )
        }
        return count
      }).pipe(Effect.withSpan("EnforcementService.expireDue"))

      return EnforcementService.of({
        create,
        autoEnforce,
        enforceOnDenial,
        list,
        get,
        update,
        appeal,
        throttleFor,
        expireDue,
      })
    }),
  )
}
