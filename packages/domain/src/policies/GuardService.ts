import { Database } from "@agentgov/db"
import { Cause, Context, Effect, Exit, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import type { Agent } from "../agents/Agent.ts"
import { AgentNotFound } from "../agents/AgentErrors.ts"
import { AGENTS_CHANNEL, AgentRepo } from "../agents/AgentRepo.ts"
import { MAX_APPROVAL_CONTEXT_BYTES } from "../approvals/Approval.ts"
import { ApprovalService, type ApprovalUse } from "../approvals/ApprovalService.ts"
import type { AuditEvent, NewEvent } from "../audit/AuditEvent.ts"
import { type AppendOutcome, type AppendRequest, EventAppender } from "../audit/EventAppender.ts"
import type { Actor } from "../auth/Actor.ts"
import { EnforcementRepo } from "../enforcement/EnforcementRepo.ts"
import { EnforcementService } from "../enforcement/EnforcementService.ts"
import {
  Idempotency,
  type IdempotencyKeyReused,
  type IdempotencyRequest,
  Replayed,
} from "../idempotency/Idempotency.ts"
import { Counters } from "../ratelimits/Counters.ts"
import { InvalidInput, PermissionDenied } from "../shared/errors.ts"
import { backgroundReloads, type Refreshable, refreshAhead } from "../shared/refreshAhead.ts"
import { nowIso } from "../shared/time.ts"
import { transactional } from "../shared/transaction.ts"
import { tierOf } from "../trust/Tier.ts"
import {
  type AgentFacts,
  type CompiledPolicySet,
  type Decision,
  type DecisionKind,
  evaluate,
  evaluationCostSpent,
  InMemoryRateCounter,
} from "./engine/index.ts"
import type { GuardReason, GuardRequestInput, GuardResult, PolicySimulation, PolicySimulationInput } from "./Guard.ts"
import { GuardBusy } from "./PolicyErrors.ts"
import { PolicySets, type WorkspaceGuardState } from "./PolicySets.ts"
import { HEAVY_FOR_MS, SLOW_LANE_COST, SlowLane } from "./SlowLane.ts"

export type GuardError = AgentNotFound | PermissionDenied | InvalidInput | IdempotencyKeyReused | GuardBusy

const THROTTLE_TTL_MS = 5_000
/** A safety net for a missed notification. */
const AGENT_MAX_AGE_MS = 30_000

/** The agent as conditions read it (D6); `agent.trust.tier` is D11's tier of the score the trust worker announced. */
const factsOf = (agent: Agent): { -readonly [K in keyof AgentFacts]: AgentFacts[K] } => ({
  id: agent.id,
  name: agent.name,
  status: agent.status,
  labels: agent.labels,
  version: agent.currentVersion,
  trustScore: agent.trustScore,
  trustTier: tierOf(agent.trustScore),
})

const REFUSAL: Record<Exclude<ApprovalUse, { ok: true }>["reason"], [string, string]> = {
  not_found: ["APPROVAL_NOT_FOUND", "no such approval in this workspace"],
  mismatch: ["APPROVAL_MISMATCH", "it was requested for another agent, action or context"],
  pending: ["APPROVAL_PENDING", "nobody has decided it yet"],
  denied: ["APPROVAL_DENIED", "an approver denied it"],
  expired: ["APPROVAL_EXPIRED", "it expired"],
  used: ["APPROVAL_USED", "an earlier call already used it; an approval allows one call"],
  not_approver: ["APPROVAL_NOT_APPROVER", "it was decided by a credential the rule does not name as an approver"],
}

/** A decision as it is answered: the rules' decision, changed by an approval used or refused. */
export interface Verdict {
  readonly decided: Decision
  decision: DecisionKind
  reasons: Array<GuardReason>
  approvalId?: string
}

/** The agent a call is for, or why it cannot name one. */
const agentIdOf = (actor: Actor, requested: string | undefined): string | PermissionDenied | InvalidInput => {
  if (actor.agentId !== undefined) {
    if (requested !== undefined && requested !== actor.agentId)
      return new PermissionDenied({ message: "this credential is bound to another agent" })
    return actor.agentId
  }
  if (requested === undefined)
    return new InvalidInput({ field: "agentId", message: "is required with a workspace credential" })
  return requested
}

const verdictOf = (decided: Decision): Verdict => ({
  decided,
  decision: decided.decision,
  reasons: [...decided.reasons],
})

/** The agent a request acts for, and its context within the size an approval can hold: the guard's and the simulation's checks. */
const checkedAgentId = (
  actor: Actor,
  input: { readonly agentId?: string | undefined; readonly context?: Record<string, unknown> | undefined },
): Effect.Effect<string, PermissionDenied | InvalidInput> => {
  const agentId = agentIdOf(actor, input.agentId)
  if (typeof agentId !== "string") return Effect.fail(agentId)
  if (input.context !== undefined && !contextFits(input.context))
    return Effect.fail(
      new InvalidInput({ field: "context", message: `must encode to at most ${MAX_APPROVAL_CONTEXT_BYTES} bytes` }),
    )
  return Effect.succeed(agentId)
}

const contextFits = (context: Record<string, unknown>) => {
  const json = JSON.stringify(context)
  // Three bytes a UTF-16 unit at most: most contexts are answered without counting.
  return json.length * 3 <= MAX_APPROVAL_CONTEXT_BYTES || Buffer.byteLength(json) <= MAX_APPROVAL_CONTEXT_BYTES
}

const throttledDecision = (agentId: string, throttle: number): Decision =>
  ({
    decision: "deny",
    allowed: false,
    reasons: [
      {
        code: "AGENT_THROTTLED",
        message: `agent ${agentId} is throttled to ${throttle} guard calls a minute by an enforcement`,
      },
    ],
    matched: [],
  }) as unknown as Decision

/** Whether a deny rule that matched enforces automatically: then the decision is followed by `enforceOnDenial`. */
const enforcesOnDeny = (set: CompiledPolicySet, decided: Decision) =>
  decided.decision === "deny" &&
  decided.matched.some(
    (m) => m.effect === "deny" && m.mode === "enforce" && set.enforcementOf(m.policyId, m.ruleId) !== undefined,
  )

/** The decision's events (D6): `policy.evaluated` always, `policy.denied` on a deny, `policy.violated` on a deny or a matched monitor rule. */
export const eventsOf = (agentId: string, action: string, verdict: Verdict): Array<NewEvent> => {
  const { decided, decision, reasons, approvalId } = verdict
  const allowed = decision === "allow"
  const events: Array<NewEvent> = [
    {
      type: "policy.evaluated",
      agentId,
      // Every object of these events lists its keys in code-unit order (the engine's matched rules and reasons
      // too): the trail's canonical text is then JSON.stringify's, about a third of the general path's cost.
      data: {
        action,
        agentId,
        allowed,
        ...(approvalId !== undefined ? { approvalId } : {}),
        decision,
        matched: decided.matched,
        reasons,
      },
    },
  ]
  if (decision === "deny")
    events.push({
      type: "policy.denied",
      agentId,
      data: { action, agentId, matched: decided.matched.filter((m) => m.mode === "enforce"), reasons },
    })
  const monitored = decided.matched.filter((m) => m.mode === "monitor")
  if (decision === "deny" || monitored.length > 0) {
    const violations = [
      ...(decision === "deny"
        ? reasons
            .filter((r) => r.code !== "POLICY_MONITORED")
            .slice(0, 1)
            .map((r) => ({ ...r }))
        : []),
      ...monitored.map((m) => ({
        code: "POLICY_MONITORED",
        effect: m.effect,
        message:
          reasons.find((r) => r.code === "POLICY_MONITORED" && r.ruleId === m.ruleId)?.message ??
          `monitored rule "${m.ruleId}" matched`,
        mode: m.mode,
        policyId: m.policyId,
        ruleId: m.ruleId,
      })),
    ]
    events.push({ type: "policy.violated", agentId, data: { action, agentId, decision, violations } })
  }
  return events
}

const resultOf = (verdict: Verdict, stored: ReadonlyArray<AuditEvent>): GuardResult => ({
  decision: verdict.decision,
  allowed: verdict.decision === "allow",
  reasons: verdict.reasons,
  matched: verdict.decided.matched,
  ...(verdict.approvalId !== undefined ? { approvalId: verdict.approvalId } : {}),
  eventId: stored[0]!.id,
})

/**
 * The decision's answer for its stored events, built once: the answer a key stores and the answer the caller
 * gets are then one object, which the transport renders once.
 */
const answering = (verdict: Verdict) => {
  let last: { readonly stored: ReadonlyArray<AuditEvent>; readonly result: GuardResult } | undefined
  return (stored: ReadonlyArray<AuditEvent>): GuardResult => {
    if (last?.stored !== stored) last = { stored, result: resultOf(verdict, stored) }
    return last.result
  }
}

/** What the caller gets for an append: the decision's answer, or the first answer of its Idempotency-Key. */
const answerOf = (result: (stored: ReadonlyArray<AuditEvent>) => GuardResult, outcome: AppendOutcome) =>
  outcome instanceof Replayed ? outcome : result(outcome)

/**
 * The decision's append. Under an Idempotency-Key, the key rides with the events (the appender claims it in
 * their batch) and stores this answer; with an approval, the key was claimed first in the caller's
 * transaction and no key is passed here.
 */
const appendRequest = (
  actor: Actor,
  agentId: string,
  action: string,
  verdict: Verdict,
  key: IdempotencyRequest | undefined,
  result: (stored: ReadonlyArray<AuditEvent>) => GuardResult,
): AppendRequest => ({
  actor,
  events: eventsOf(agentId, action, verdict),
  idempotency: key && {
    ...key,
    render: (stored) => key.render(result(stored as ReadonlyArray<AuditEvent>)),
  },
})

/**
 * The guard (decision D6): may this agent take this action, with this
 * context? Evaluates the workspace's compiled policies, applies approvals
 * (D7), and records the decision in the audit chain: `policy.evaluated`
 * always, `policy.denied` on a deny, `policy.violated` on a deny or a
 * matched monitor rule. Group-committed with other calls unless an approval
 * is created or used, which shares the events' transaction.
 */
export class GuardService extends Context.Service<
  GuardService,
  {
    /**
     * Under an Idempotency-Key a retry replays the first answer: the key is claimed with the decision's
     * events (group-committed like any other), or, when an approval is created or used, first in that
     * transaction, so a retry never requests or spends an approval twice.
     */
    readonly evaluate: (
      actor: Actor,
      input: GuardRequestInput,
      idempotency?: IdempotencyRequest,
    ) => Effect.Effect<GuardResult | Replayed, GuardError>
    /**
     * `evaluate` for the common case without entering an Effect runtime per call: an agent-bound or named
     * agent this instance knows and holds active, the workspace's compiled policies at hand, its throttle
     * looked up lately. Undefined, with nothing done, for anything else: the caller then runs `evaluate`.
     * Outside any transaction only (it joins the group commit).
     */
    readonly evaluateNow: (
      actor: Actor,
      input: GuardRequestInput,
      idempotency?: IdempotencyRequest,
    ) => Promise<Exit.Exit<GuardResult | Replayed, GuardError>> | undefined
    /**
     * What the saved policies decide for this agent, action and context now, and nothing more: no event is
     * recorded, no approval created or spent, no enforcement issued, nothing the trust score reads, and no rate
     * condition or throttle counted (a rate condition sees no earlier call, and a throttle in force is not
     * applied). What an operator tries a policy with, without acting as the agent. A costly one waits in the slow
     * lane like a guard call (GuardBusy past its bound).
     */
    readonly simulate: (
      actor: Actor,
      input: PolicySimulationInput,
    ) => Effect.Effect<PolicySimulation, AgentNotFound | PermissionDenied | InvalidInput | GuardBusy>
  }
>()("@agentgov/domain/policies/GuardService") {
  static readonly layer = Layer.effect(
    GuardService,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const db = yield* Database
      const agents = yield* AgentRepo
      const sets = yield* PolicySets
      const approvals = yield* ApprovalService
      const appender = yield* EventAppender
      const enforcement = yield* EnforcementService
      const enforcements = yield* EnforcementRepo
      const idempotencyStore = yield* Idempotency
      const tx = transactional(sql)
      // Rate conditions and throttles: in-process, or shared by every instance through Redis (Counters.ts).
      const rate = (yield* Counters).rates
      // Reloads ahead of expiry (refreshAhead.ts) run on this layer's services, in the background.
      const background = backgroundReloads(yield* Effect.context<never>())

      // A throttle enforcement (D7) caps the agent's guard calls per minute; looked up at most every THROTTLE_TTL_MS.
      const throttles = new Map<string, Refreshable & { readonly limit: number | undefined }>()
      const loadThrottle = (workspaceId: string, agentId: string) => {
        const at = Date.now()
        return enforcement.throttleFor(workspaceId, agentId).pipe(
          Effect.tap((limit) =>
            Effect.sync(() => {
              if (throttles.size > 100_000) throttles.clear()
              throttles.set(agentId, { limit, at })
            }),
          ),
        )
      }
      /** The agent's throttle as last looked up, while that is recent enough (reloaded ahead of that). */
      const heldThrottle = (workspaceId: string, agentId: string, now: number) => {
        const hit = throttles.get(agentId)
        if (!hit || now - hit.at >= THROTTLE_TTL_MS) return undefined
        refreshAhead(hit, now, THROTTLE_TTL_MS, () =>
          background("the guard's throttle", loadThrottle(workspaceId, agentId)),
        )
        return hit
      }
      const throttleOf = (workspaceId: string, agentId: string, now: number) => {
        const hit = heldThrottle(workspaceId, agentId, now)
        return hit ? Effect.succeed(hit.limit) : loadThrottle(workspaceId, agentId)
      }

      // Agents as the guard sees them, per instance; any update of an agent row is announced by a trigger
      // (migration 0006) and drops the copy on every instance at commit.
      const agentCache = new Map<string, Refreshable & { readonly agent: Agent; readonly workspaceId: string }>()
      const agentGenerations = new Map<string, number>()
      const forgetAgent = (agentId: string) => {
        agentGenerations.set(agentId, (agentGenerations.get(agentId) ?? 0) + 1)
        agentCache.delete(agentId)
      }
      // Notifications may have been missed (the listening connection dropped): no copy can be trusted.
      let agentEpoch = 0
      const forgetAgents = () => {
        agentEpoch += 1
        agentCache.clear()
      }
      // This instance's own writes drop the copy at once (and again at commit, through the trigger).
      agents.onUpdate(forgetAgent)
      yield* Effect.acquireRelease(
        Effect.promise(() => db.listen(AGENTS_CHANNEL, forgetAgent, forgetAgents)),
        (stop) => Effect.promise(() => stop()),
      )
      const loadAgent = (workspaceId: string, agentId: string) => {
        const generation = agentGenerations.get(agentId) ?? 0
        const epoch = agentEpoch
        const at = Date.now()
        return agents.find(workspaceId, agentId).pipe(
          Effect.tap((agent) =>
            Effect.sync(() => {
              // A load that started before a change was announced (or before a gap) must not be kept.
              if (!agent || (agentGenerations.get(agentId) ?? 0) !== generation || agentEpoch !== epoch) return
              if (agentCache.size >= 100_000) agentCache.clear()
              agentCache.set(agentId, { agent, workspaceId, at })
            }),
          ),
        )
      }
      /** The agent as this instance holds it, while the copy is recent enough (reloaded ahead of that). */
      const heldAgent = (workspaceId: string, agentId: string, now: number) => {
        const hit = agentCache.get(agentId)
        if (!hit || hit.workspaceId !== workspaceId || now - hit.at >= AGENT_MAX_AGE_MS) return undefined
        refreshAhead(hit, now, AGENT_MAX_AGE_MS, () => background("the guard's agent", loadAgent(workspaceId, agentId)))
        return hit.agent
      }
      const agentCached = (workspaceId: string, agentId: string) => {
        const held = heldAgent(workspaceId, agentId, Date.now())
        return held ? Effect.succeed(held) : loadAgent(workspaceId, agentId)
      }

      const suspensionInForce = (workspaceId: string, agentId: string) =>
        Effect.flatMap(nowIso, (now) => enforcements.countSuspending(workspaceId, agentId, [], now)).pipe(
          Effect.map((n) => n > 0),
        )

      /**
       * After a recorded deny: the automatic enforcement of each enforced deny rule that matched, when it is
       * due. The decision stands whatever happens here; a failure is logged, not answered.
       */
      const enforceDenials = (workspaceId: string, agentId: string, set: CompiledPolicySet, decided: Decision) =>
        Effect.forEach(
          decided.matched,
          (m) => {
            const enforce =
              m.effect === "deny" && m.mode === "enforce" ? set.enforcementOf(m.policyId, m.ruleId) : undefined
            if (!enforce) return Effect.void
            const ruleReason = decided.reasons.find((r) => r.policyId === m.policyId && r.ruleId === m.ruleId)?.message
            return enforcement
              .enforceOnDenial({
                workspaceId,
                agentId,
                policyId: m.policyId,
                ruleId: m.ruleId,
                enforce,
                // A rule's reason is at most 500 characters: this stays within an enforcement's 2000.
                defaultReason:
                  `rule "${m.ruleId}" of policy ${m.policyId} denied this agent ${enforce.after} time(s) within ` +
                  `${enforce.withinSeconds} s${ruleReason ? `: ${ruleReason}` : ""}`,
              })
              .pipe(
                Effect.catchCause((cause) =>
                  Effect.logWarning("automatic enforcement failed; the decision stands", {
                    policyId: m.policyId,
                    ruleId: m.ruleId,
                    agentId,
                    cause: Cause.pretty(cause),
                  }),
                ),
              )
          },
          { discard: true },
        )

      // Costly evaluations wait their turn, one per event-loop turn, workspaces in turn (SlowLane.ts).
      const lane = new SlowLane()
      /** Workspaces whose evaluations cost more than SLOW_LANE_COST lately (a large request), until when. */
      const heavy = new Map<string, number>()
      /** Whether this call waits in the slow lane: its action's rules could cost more, or its workspace's calls did. */
      const costly = (workspaceId: string, set: CompiledPolicySet, action: string, now: number) =>
        (set.worstCost().cost > SLOW_LANE_COST && set.costOf(action) > SLOW_LANE_COST) ||
        (heavy.size > 0 && (heavy.get(workspaceId) ?? 0) > now)

      /** After an evaluation: a workspace whose evaluation cost more than the lane's threshold sends its calls there a while. */
      const noteCost = (workspaceId: string, now: number) => {
        if (evaluationCostSpent() > SLOW_LANE_COST) {
          if (heavy.size >= 100_000) heavy.clear()
          heavy.set(workspaceId, now + HEAVY_FOR_MS)
        }
      }

      /** The rules' decision, or the throttle's deny when the agent is over its enforced rate. */
      const decide = (
        workspaceId: string,
        agentId: string,
        input: GuardRequestInput,
        context: Record<string, unknown>,
        facts: AgentFacts,
        state: WorkspaceGuardState,
        throttle: number | undefined,
        now: number,
      ): Decision => {
        if (throttle !== undefined && rate.hit(`throttle:${agentId}`, 60_000, throttle, now).exceeded)
          return throttledDecision(agentId, throttle)
        const decided = evaluate(
          state.set,
          { action: input.action, context, agent: facts },
          { now, guardDefault: state.guardDefault, rate },
        )
        noteCost(workspaceId, now)
        return decided
      }

      /**
       * `decide` in the slow lane, at its turn: the clock (time windows, rate conditions, the throttle) is read
       * then, so a call is counted when it is decided, as inline. A full lane refuses the call before anything
       * is counted or recorded; a call abandoned while waiting leaves the queue.
       */
      const decideLater = (workspaceId: string, decision: (now: number) => Decision) =>
        Effect.callback<Decision, GuardBusy>((resume) => {
          const cancel = lane.offer(workspaceId, () => {
            try {
              resume(Effect.succeed(decision(Date.now())))
            } catch (e) {
              resume(Effect.die(e))
            }
          })
          if (cancel === undefined) {
            resume(Effect.fail(new GuardBusy({ waiting: lane.waiting(workspaceId), retryAfterSeconds: 1 })))
            return
          }
          return Effect.sync(cancel)
        })

      /** The decision's events, appended in the group commit (or in the caller's transaction, there). */
      const record = (actor: Actor, agentId: string, action: string, verdict: Verdict, key?: IdempotencyRequest) =>
        // Built when run: an approval settled before it changes the verdict.
        Effect.suspend(() => {
          const result = answering(verdict)
          return appender
            .append(appendRequest(actor, agentId, action, verdict, key, result))
            .pipe(Effect.map((outcome) => answerOf(result, outcome)))
        })

      /**
       * What follows a decision: the approval it needs created or used (D7), its events recorded, and the
       * automatic enforcement of a deny rule applied.
       */
      const conclude = (
        actor: Actor,
        input: GuardRequestInput,
        agentId: string,
        context: Record<string, unknown>,
        set: CompiledPolicySet,
        decided: Decision,
        idempotency: IdempotencyRequest | undefined,
      ) =>
        Effect.gen(function* () {
          const verdict = verdictOf(decided)
          // An approval is consulted only when the rules ask for one: a deny still wins, an allow needs none.
          // Creating or using one and recording the decision commit together, after the key's claim.
          const result =
            verdict.decision !== "require_approval"
              ? yield* record(actor, agentId, input.action, verdict, idempotency)
              : yield* tx(
                  idempotencyStore.within(
                    actor.workspaceId,
                    idempotency,
                    Effect.andThen(
                      settleApproval(actor, input, agentId, context, verdict),
                      record(actor, agentId, input.action, verdict),
                    ),
                  ),
                )
          if (!(result instanceof Replayed) && result.decision === "deny")
            yield* enforceDenials(actor.workspaceId, agentId, set, decided)
          return result
        })

      /** Uses the approval the call carries, or requests one; updates the verdict accordingly. */
      const settleApproval = (
        actor: Actor,
        input: GuardRequestInput,
        agentId: string,
        context: Record<string, unknown>,
        verdict: Verdict,
      ) =>
        Effect.gen(function* () {
          if (input.approvalId !== undefined) {
            const use = yield* approvals.consumeForGuard({
              workspaceId: actor.workspaceId,
              approvalId: input.approvalId,
              agentId,
              action: input.action,
              context,
              approvers: verdict.decided.approval?.approvers,
            })
            if (use.ok) {
              verdict.decision = "allow"
              verdict.approvalId = use.approval.id
              verdict.reasons = [
                { code: "APPROVAL_GRANTED", message: `approval ${use.approval.id} was granted; this call uses it` },
                ...verdict.reasons,
              ]
              return
            }
            const [code, why] = REFUSAL[use.reason]
            const refusal = { code, message: `approval ${input.approvalId} cannot be used: ${why}` }
            if (use.reason === "denied") {
              // The approval decides now: its reason goes first (and is the policy.violated record's).
              verdict.decision = "deny"
              verdict.reasons = [refusal, ...verdict.reasons]
              return
            }
            // The rules still ask for an approval: that stays the deciding reason, the refusal a note.
            verdict.reasons.push(refusal)
            if (use.reason === "pending") {
              verdict.approvalId = input.approvalId
              return
            }
          }
          const rule = verdict.decided.approval!
          const asked = yield* approvals.requestForGuard({
            workspaceId: actor.workspaceId,
            agentId,
            action: input.action,
            context,
            policyId: rule.policyId,
            ruleId: rule.ruleId,
            timeoutSeconds: rule.timeoutSeconds,
            approvers: rule.approvers,
            reason: verdict.reasons.find((r) => r.code === "APPROVAL_REQUIRED")?.message,
            actor,
          })
          switch (asked.kind) {
            case "requested":
              verdict.approvalId = asked.approval.id
              return
            case "pending":
              // Asking again waits for the same approval rather than adding one to the approvers' queue.
              verdict.approvalId = asked.approval.id
              verdict.reasons.push({
                code: "APPROVAL_PENDING",
                message: `approval ${asked.approval.id} for this agent, action and context awaits a decision; no second one is requested`,
              })
              return
            case "denied":
              // An approver's no stands for one time-out of the request: asking again is not another chance.
              verdict.decision = "deny"
              verdict.reasons = [
                {
                  code: "APPROVAL_DENIED",
                  message: `approval ${asked.approval.id} for this agent, action and context was denied; until ${asked.until} the same request is denied`,
                },
                ...verdict.reasons,
              ]
              return
            case "deregistered":
              // Deregistered since this call read the agent: answered as a call after it is.
              verdict.decision = "deny"
              verdict.reasons = [{ code: "AGENT_DEREGISTERED", message: `agent ${agentId} is deregistered` }]
              return
            case "queue_full":
              verdict.decision = "deny"
              verdict.reasons = [
                {
                  code: "APPROVAL_QUEUE_FULL",
                  message: `agent ${agentId} has ${asked.pending} approvals awaiting a decision; no more are requested until some are decided or expire`,
                },
                ...verdict.reasons,
              ]
              return
          }
        })

      const run = Effect.fn("GuardService.evaluate")(function* (
        actor: Actor,
        input: GuardRequestInput,
        idempotency?: IdempotencyRequest,
      ) {
        const agentId = yield* checkedAgentId(actor, input)
        const context = input.context ?? {}
        const agent = yield* agentCached(actor.workspaceId, agentId)
        const state = yield* sets.get(actor.workspaceId)
        if (!agent) return yield* new AgentNotFound({ agentId })
        // A suspension ends at its expiry, not when the sweep gets to reinstating the agent.
        const facts = factsOf(agent)
        if (agent.status === "suspended" && !(yield* suspensionInForce(actor.workspaceId, agentId)))
          facts.status = "active"
        const now = Date.now()
        const throttle = facts.status === "active" ? yield* throttleOf(actor.workspaceId, agentId, now) : undefined
        const decided =
          facts.status === "active" && costly(actor.workspaceId, state.set, input.action, now)
            ? yield* decideLater(actor.workspaceId, (at) =>
                decide(actor.workspaceId, agentId, input, context, facts, state, throttle, at),
              )
            : decide(actor.workspaceId, agentId, input, context, facts, state, throttle, now)
        return yield* conclude(actor, input, agentId, context, state.set, decided, idempotency)
      })

      // The fast path runs what needs no lookup as plain code; the rest runs on this layer's services.
      const runExit = Effect.runPromiseExitWith(yield* Effect.context<never>())

      const evaluateNow = (
        actor: Actor,
        input: GuardRequestInput,
        idempotency?: IdempotencyRequest,
      ): Promise<Exit.Exit<GuardResult | Replayed, GuardError>> | undefined => {
        // Everything `run` would look up or refuse is left to it; nothing is counted before this point.
        const agentId = agentIdOf(actor, input.agentId)
        if (typeof agentId !== "string") return undefined
        if (input.context !== undefined && !contextFits(input.context)) return undefined
        const now = Date.now()
        const agent = heldAgent(actor.workspaceId, agentId, now)
        if (agent?.status !== "active") return undefined
        const state = sets.peek(actor.workspaceId)
        const throttle = heldThrottle(actor.workspaceId, agentId, now)
        if (state === undefined || throttle === undefined) return undefined
        // A costly call waits in the slow lane, which the Effect path handles.
        if (costly(actor.workspaceId, state.set, input.action, now)) return undefined
        const context = input.context ?? {}
        const decided = decide(actor.workspaceId, agentId, input, context, factsOf(agent), state, throttle.limit, now)
        if (decided.decision === "require_approval" || enforcesOnDeny(state.set, decided))
          return runExit(conclude(actor, input, agentId, context, state.set, decided, idempotency))
        const verdict = verdictOf(decided)
        const result = answering(verdict)
        return appender
          .appendNow(appendRequest(actor, agentId, input.action, verdict, idempotency, result))
          .then(
            (exit): Exit.Exit<GuardResult | Replayed, GuardError> =>
              Exit.map(exit, (outcome) => answerOf(result, outcome)),
          )
      }

      const simulate = Effect.fn("GuardService.simulate")(function* (actor: Actor, input: PolicySimulationInput) {
        const agentId = yield* checkedAgentId(actor, input)
        const agent = yield* agentCached(actor.workspaceId, agentId)
        if (!agent) return yield* new AgentNotFound({ agentId })
        const state = yield* sets.get(actor.workspaceId)
        const facts = factsOf(agent)
        if (agent.status === "suspended" && !(yield* suspensionInForce(actor.workspaceId, agentId)))
          facts.status = "active"
        // A counter of its own: rate conditions see no earlier call, and this one is counted nowhere.
        const judge = (now: number) => {
          const decided = evaluate(
            state.set,
            { action: input.action, context: input.context ?? {}, agent: facts },
            { now, guardDefault: state.guardDefault, rate: new InMemoryRateCounter() },
          )
          noteCost(actor.workspaceId, now)
          return decided
        }
        // A costly simulation waits its turn in the slow lane as a guard call does: it costs the process the same.
        const now = Date.now()
        const decided =
          facts.status === "active" && costly(actor.workspaceId, state.set, input.action, now)
            ? yield* decideLater(actor.workspaceId, judge)
            : judge(now)
        return {
          decision: decided.decision,
          allowed: decided.decision === "allow",
          reasons: [...decided.reasons],
          matched: decided.matched,
        } satisfies PolicySimulation
      })

      return GuardService.of({ evaluate: run, evaluateNow, simulate })
    }),
  )
}
