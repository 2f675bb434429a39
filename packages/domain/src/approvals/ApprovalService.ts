import { createHash } from "node:crypto"
import { canonicalize } from "@agentgov/verifier"
import { Clock, Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { AgentDeregistered, AgentNotFound } from "../agents/AgentErrors.ts"
import { AgentRepo } from "../agents/AgentRepo.ts"
import type { NewEvent } from "../audit/AuditEvent.ts"
import { AuditLog } from "../audit/AuditLog.ts"
import type { Actor } from "../auth/Actor.ts"
import { InvalidInput, PermissionDenied } from "../shared/errors.ts"
import { newId } from "../shared/ids.ts"
import { idCursor, type Page, pageWindow, toPage } from "../shared/pagination.ts"
import type { InvalidCursor } from "../shared/paginationErrors.ts"
import { requireStorable } from "../shared/storable.ts"
import { isoOf } from "../shared/time.ts"
import { transactional } from "../shared/transaction.ts"
import { systemActorIn, WorkspaceRepo } from "../workspaces/WorkspaceRepo.ts"
import {
  type Approval,
  type ApprovalListQuery,
  type ApprovalStatus,
  type CreateApproval,
  DEFAULT_APPROVAL_TIMEOUT_SECONDS,
  type DecideApproval,
  MAX_APPROVAL_CONTEXT_BYTES,
  MAX_APPROVAL_TIMEOUT_SECONDS,
  MAX_PENDING_APPROVALS_PER_AGENT,
  MIN_APPROVAL_TIMEOUT_SECONDS,
} from "./Approval.ts"
import { ApprovalNotFound, ApprovalNotPending, ApproverNotListed } from "./ApprovalErrors.ts"
import { ApprovalRepo } from "./ApprovalRepo.ts"

/**
 * What an approval is bound to (D7): hex SHA-256 of the JCS (RFC 8785) text of `{agentId, action, context}`.
 * Key order and number spelling do not matter; any other difference does.
 */
export const approvalBindingHash = (binding: {
  readonly agentId: string
  readonly action: string
  readonly context: Readonly<Record<string, unknown>>
}): string =>
  createHash("sha256")
    .update(canonicalize({ agentId: binding.agentId, action: binding.action, context: binding.context }))
    .digest("hex")

/** A `require_approval` rule's request, made by the guard inside its own transaction. */
export interface GuardApprovalRequest {
  readonly workspaceId: string
  readonly agentId: string
  readonly action: string
  readonly context: Readonly<Record<string, unknown>>
  readonly policyId: string
  readonly ruleId: string
  readonly reason?: string | undefined
  /** Default 3600; 1..2,592,000. */
  readonly timeoutSeconds?: number | undefined
  /** Credential ids that may decide; empty or absent: any credential with `approvals:manage`. */
  readonly approvers?: ReadonlyArray<string> | undefined
  /** The guard's caller, recorded on `approval.requested`; absent: the system. */
  readonly actor?: Actor | undefined
}

/**
 * What a guard call that needs an approval gets (`requestForGuard`), so that asking again does not flood the
 * approvers:
 * - `requested`: a new pending approval (`approval.requested`);
 * - `pending`: one for the same agent, action, context and approvers still awaits a decision: that one, no new one;
 * - `denied`: an approver denied the same request less than its time-out ago: the answer is deny until `until`;
 * - `queue_full`: the agent has {@link MAX_PENDING_APPROVALS_PER_AGENT} approvals awaiting a decision already;
 * - `deregistered`: the agent was deregistered since the guard read it: no approval is opened for it.
 */
export type GuardApprovalAsk =
  | { readonly kind: "requested" | "pending"; readonly approval: Approval }
  | { readonly kind: "denied"; readonly approval: Approval; readonly until: string }
  | { readonly kind: "queue_full"; readonly pending: number }
  | { readonly kind: "deregistered" }

/** A guard call that carries an `approvalId`. */
export interface GuardApprovalUse {
  readonly workspaceId: string
  readonly approvalId: string
  readonly agentId: string
  readonly action: string
  readonly context: Readonly<Record<string, unknown>>
  /**
   * The approvers the rule asking for an approval names: when it names any, only an approval one of them
   * decided can be used (whichever rule or request created it).
   */
  readonly approvers?: ReadonlyArray<string> | undefined
}

/**
 * Why a guard call could not use an approval:
 * - `not_found`: no such approval in the workspace;
 * - `mismatch`: it was requested for another agent, action or context;
 * - `pending`: nobody has decided yet;
 * - `denied`: an approver denied it;
 * - `expired`: undecided at `expiresAt` (counts as denied), or approved but not used by then;
 * - `used`: a guard call already used it (an approval allows one call);
 * - `not_approver`: approved, but by a credential the rule asking for an approval does not name as an approver.
 */
export type ApprovalRefusal = "not_found" | "mismatch" | "pending" | "denied" | "expired" | "used" | "not_approver"

export type ApprovalUse =
  | { readonly ok: true; readonly approval: Approval }
  | { readonly ok: false; readonly reason: "not_found" }
  | { readonly ok: false; readonly reason: Exclude<ApprovalRefusal, "not_found">; readonly approval: Approval }

/** The advisory lock class of one agent's guard requests (with the hash of workspace and agent). */
const GUARD_REQUEST_LOCK = 72_410_021

const ALL_STATUSES: ReadonlyArray<ApprovalStatus> = ["pending", "approved", "denied", "expired"]

/** An undecided approval past its expiry is expired (denied) from that instant, whether or not the sweep has run. */
const present = (a: Approval, now: number): Approval =>
  a.status === "pending" && Date.parse(a.expiresAt) <= now ? { ...a, status: "expired", decidedAt: a.expiresAt } : a

const requestedEvent = (a: Approval) => ({
  type: "approval.requested",
  agentId: a.agentId,
  data: {
    approvalId: a.id,
    agentId: a.agentId,
    action: a.action,
    status: "pending",
    expiresAt: a.expiresAt,
    ...(a.policyId !== null ? { policyId: a.policyId } : {}),
    ...(a.ruleId !== null ? { ruleId: a.ruleId } : {}),
    ...(a.reason !== null ? { reason: a.reason } : {}),
    ...(a.approvers.length > 0 ? { approvers: a.approvers } : {}),
  },
})

/**
 * `approval.decided` of an approval recorded as expired (as denied, by nobody): by the sweep, or at its agent's
 * deregistration, whose reason it then carries.
 */
export const approvalExpiredEvent = (a: Approval): NewEvent => ({
  type: "approval.decided",
  agentId: a.agentId,
  data: {
    approvalId: a.id,
    agentId: a.agentId,
    action: a.action,
    decision: "denied",
    expired: true,
    ...(a.decisionReason !== null ? { reason: a.decisionReason } : {}),
  },
})

/**
 * Approvals (decision D7): a `require_approval` rule of the guard, or an explicit request, creates a
 * pending approval bound to the hash of `{agentId, action, context}`. A credential with
 * `approvals:manage` approves or denies it once; undecided by `expiresAt`, it is denied (`expired`). An
 * approved approval lets exactly one guard call with the same binding through, until `expiresAt`.
 * Agent-bound credentials see their own agent's approvals and never decide.
 */
export class ApprovalService extends Context.Service<
  ApprovalService,
  {
    readonly create: (
      actor: Actor,
      input: CreateApproval,
    ) => Effect.Effect<Approval, AgentNotFound | AgentDeregistered | InvalidInput | PermissionDenied>
    /**
     * For the guard: requests an approval unless one for the same request awaits a decision, an approver denied
     * it lately, or the agent has too many awaiting (see {@link GuardApprovalAsk}). Joins the caller's transaction;
     * emits `approval.requested` for a new one only.
     */
    readonly requestForGuard: (request: GuardApprovalRequest) => Effect.Effect<GuardApprovalAsk, InvalidInput>
    /**
     * For the guard: uses an approval for this exact call, atomically (one UPDATE), or says why not.
     * Joins the caller's transaction; emits nothing (the guard's `policy.evaluated` names the approval).
     */
    readonly consumeForGuard: (use: GuardApprovalUse) => Effect.Effect<ApprovalUse>
    readonly list: (
      actor: Actor,
      query: ApprovalListQuery,
    ) => Effect.Effect<Page<Approval>, InvalidCursor | PermissionDenied>
    readonly get: (actor: Actor, id: string) => Effect.Effect<Approval, ApprovalNotFound>
    readonly decide: (
      actor: Actor,
      id: string,
      input: DecideApproval,
    ) => Effect.Effect<
      Approval,
      ApprovalNotFound | ApprovalNotPending | ApproverNotListed | AgentDeregistered | InvalidInput | PermissionDenied
    >
    /**
     * Records the expiry of undecided approvals past `expiresAt` (`approval.decided`, denied), and expires the pending
     * approvals of agents deregistered before deregistrations expired them; returns how many.
     */
    readonly expireDue: Effect.Effect<number>
  }
>()("@agentgov/domain/approvals/ApprovalService") {
  static readonly layer = Layer.effect(
    ApprovalService,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      /** One agent's guard requests (and the sweep of its approvals), one at a time until the transaction ends. */
      const lockAgentRequests = (workspaceId: string, agentId: string) =>
        sql`SELECT pg_advisory_xact_lock(${GUARD_REQUEST_LOCK}, hashtext(${`${workspaceId}/${agentId}`}))`.pipe(
          Effect.orDie,
        )
      const repo = yield* ApprovalRepo
      const agents = yield* AgentRepo
      const workspaces = yield* WorkspaceRepo
      const audit = yield* AuditLog
      const tx = transactional(sql)

      const nowMs = Clock.currentTimeMillis

      const systemIn = (workspaceId: string) => systemActorIn(workspaces, workspaceId)

      const insert = Effect.fn("ApprovalService.insert")(function* (
        actor: Actor,
        spec: {
          readonly agentId: string
          readonly action: string
          readonly context: Readonly<Record<string, unknown>>
          readonly reason: string | null
          readonly policyId: string | null
          readonly ruleId: string | null
          readonly approvers: ReadonlyArray<string>
          readonly timeoutSeconds: number
        },
      ) {
        const now = yield* nowMs
        const approval: Approval = {
          id: newId("apr", now),
          workspaceId: actor.workspaceId,
          agentId: spec.agentId,
          action: spec.action,
          context: spec.context as Record<string, unknown>,
          status: "pending",
          reason: spec.reason,
          policyId: spec.policyId,
          ruleId: spec.ruleId,
          approvers: [...new Set(spec.approvers)],
          bindingHash: approvalBindingHash(spec),
          decidedBy: null,
          decisionReason: null,
          decidedAt: null,
          expiresAt: isoOf(now + spec.timeoutSeconds * 1000),
          usedAt: null,
          createdAt: isoOf(now),
        }
        yield* repo.insert(approval)
        yield* audit.append(actor, [requestedEvent(approval)])
        return approval
      })

      const checkTimeout = (timeoutSeconds: number) =>
        Number.isInteger(timeoutSeconds) &&
        timeoutSeconds >= MIN_APPROVAL_TIMEOUT_SECONDS &&
        timeoutSeconds <= MAX_APPROVAL_TIMEOUT_SECONDS
          ? Effect.void
          : Effect.fail(
              new InvalidInput({
                field: "timeoutSeconds",
                message: `must be an integer from ${MIN_APPROVAL_TIMEOUT_SECONDS} to ${MAX_APPROVAL_TIMEOUT_SECONDS}`,
              }),
            )

      const create = Effect.fn("ApprovalService.create")(function* (actor: Actor, input: CreateApproval) {
        if (actor.agentId !== undefined && actor.agentId !== input.agentId)
          return yield* new PermissionDenied({ message: "this credential is bound to another agent" })
        yield* requireStorable(input)
        const context = input.context ?? {}
        if (Buffer.byteLength(JSON.stringify(context)) > MAX_APPROVAL_CONTEXT_BYTES) {
          return yield* new InvalidInput({
            field: "context",
            message: `must encode to at most ${MAX_APPROVAL_CONTEXT_BYTES} bytes`,
          })
        }
        const timeoutSeconds = input.timeoutSeconds ?? DEFAULT_APPROVAL_TIMEOUT_SECONDS
        yield* checkTimeout(timeoutSeconds)
        return yield* tx(
          Effect.gen(function* () {
            // The agent's row lock (the order a deregistration and an enforcement take: the agent, then the chain
            // head): a request racing a deregistration (or the workspace's deletion) waits for it and is refused,
            // rather than recording `approval.requested` after `agent.deregistered`.
            const agent = yield* agents.findForUpdate(actor.workspaceId, input.agentId)
            if (!agent) return yield* new AgentNotFound({ agentId: input.agentId })
            if (agent.status === "deregistered") return yield* new AgentDeregistered({ agentId: input.agentId })
            return yield* insert(actor, {
              agentId: input.agentId,
              action: input.action,
              context,
              reason: input.reason ?? null,
              policyId: null,
              ruleId: null,
              approvers: [],
              timeoutSeconds,
            })
          }),
        )
      })

      const requestForGuard = Effect.fn("ApprovalService.requestForGuard")(function* (request: GuardApprovalRequest) {
        const timeoutSeconds = request.timeoutSeconds ?? DEFAULT_APPROVAL_TIMEOUT_SECONDS
        yield* checkTimeout(timeoutSeconds)
        yield* requireStorable(request.context, ["context"])
        return yield* tx(
          Effect.gen(function* () {
            const actor = request.actor ?? (yield* systemIn(request.workspaceId))
            if (actor.workspaceId !== request.workspaceId)
              return yield* Effect.die(new Error("requestForGuard: the actor belongs to another workspace"))
            // One agent's requests one at a time (across instances), so concurrent calls of one request open one
            // approval and the bound holds; held until the transaction ends.
            yield* lockAgentRequests(request.workspaceId, request.agentId)
            // The agent's row, waited for while a deregistration holds it and then read as committed (FOR KEY SHARE,
            // the lock the approval's foreign key takes anyway): the guard decided on its cached agent, and an
            // approval opened after the deregistration expired the agent's pending ones would be left pending.
            // After the advisory lock, as nothing holding an agent's row waits for that lock.
            const [agent] = yield* sql<{ status: string }>`SELECT status FROM agents
                WHERE workspace_id = ${request.workspaceId} AND id = ${request.agentId} FOR KEY SHARE`.pipe(
              Effect.orDie,
            )
            if (agent?.status === "deregistered") return { kind: "deregistered" } as const
            const approvers = [...new Set(request.approvers ?? [])]
            const now = yield* nowMs
            const standing = yield* repo.standing(
              request.workspaceId,
              request.agentId,
              approvalBindingHash(request),
              approvers,
              isoOf(now),
            )
            if (standing?.status === "pending") return { kind: "pending", approval: standing } as const
            if (standing?.status === "denied") {
              const until =
                Date.parse(standing.decidedAt!) + Date.parse(standing.expiresAt) - Date.parse(standing.createdAt)
              return { kind: "denied", approval: standing, until: isoOf(until) } as const
            }
            const pending = yield* repo.countPending(
              request.workspaceId,
              request.agentId,
              isoOf(now),
              MAX_PENDING_APPROVALS_PER_AGENT,
            )
            if (pending >= MAX_PENDING_APPROVALS_PER_AGENT) return { kind: "queue_full", pending } as const
            const approval = yield* insert(actor, {
              agentId: request.agentId,
              action: request.action,
              context: request.context,
              reason: request.reason ?? null,
              policyId: request.policyId,
              ruleId: request.ruleId,
              approvers,
              timeoutSeconds,
            })
            return { kind: "requested", approval } as const
          }),
        )
      })

      const consumeForGuard = Effect.fn("ApprovalService.consumeForGuard")(function* (use: GuardApprovalUse) {
        const now = yield* nowMs
        const hash = approvalBindingHash(use)
        // The named approvers' keys, and the keys that replaced them by rotation since.
        const approvers = yield* repo.approversWithSuccessors(use.workspaceId, use.approvers ?? [])
        const used = yield* repo.consume(use.workspaceId, use.approvalId, use.agentId, hash, approvers, isoOf(now))
        if (used) return { ok: true, approval: used } as const
        // Not used: read it to say why. (A decision racing this read can only make the answer stale, never wrong
        // in the agent's favour: nothing was used.)
        const found = yield* repo.find(use.workspaceId, use.approvalId)
        if (!found) return { ok: false, reason: "not_found" } as const
        const approval = present(found, now)
        const reason: Exclude<ApprovalRefusal, "not_found"> =
          approval.agentId !== use.agentId || approval.bindingHash !== hash
            ? "mismatch"
            : approval.usedAt !== null
              ? "used"
              : approval.status === "denied"
                ? "denied"
                : approval.status === "pending"
                  ? "pending"
                  : approval.status === "approved" &&
                      approvers.length > 0 &&
                      !approvers.includes(approval.decidedBy ?? "")
                    ? "not_approver"
                    : "expired"
        return { ok: false, reason, approval } as const
      })

      const visible = (actor: Actor, a: Approval | undefined, id: string) =>
        a === undefined || (actor.agentId !== undefined && a.agentId !== actor.agentId)
          ? Effect.fail(new ApprovalNotFound({ approvalId: id }))
          : Effect.succeed(a)

      const list = Effect.fn("ApprovalService.list")(function* (actor: Actor, query: ApprovalListQuery) {
        if (actor.agentId !== undefined && query.agentId !== undefined && query.agentId !== actor.agentId)
          return yield* new PermissionDenied({ message: "this credential is bound to another agent" })
        const { limit, before } = yield* pageWindow(query, idCursor("apr"))
        const asked = query.status ?? ["pending"]
        const statuses = asked.includes("all")
          ? ALL_STATUSES
          : ALL_STATUSES.filter((s) => (asked as ReadonlyArray<string>).includes(s))
        const now = yield* nowMs
        const rows = yield* repo.list(actor.workspaceId, {
          statuses,
          agentId: actor.agentId ?? query.agentId,
          action: query.action,
          before,
          limit: limit + 1,
          now: isoOf(now),
        })
        return toPage(
          rows.map((a) => present(a, now)),
          limit,
        )
      })

      const get = Effect.fn("ApprovalService.get")(function* (actor: Actor, id: string) {
        const approval = yield* visible(actor, yield* repo.find(actor.workspaceId, id), id)
        return present(approval, yield* nowMs)
      })

      const decide = Effect.fn("ApprovalService.decide")(function* (actor: Actor, id: string, input: DecideApproval) {
        if (actor.agentId !== undefined)
          return yield* new PermissionDenied({ message: "agent-bound credentials cannot decide approvals" })
        yield* requireStorable(input)
        return yield* tx(
          Effect.gen(function* () {
            const current = yield* visible(actor, yield* repo.find(actor.workspaceId, id), id)
            if (
              current.approvers.length > 0 &&
              !(yield* repo.approversWithSuccessors(actor.workspaceId, current.approvers)).includes(actor.credential.id)
            )
              return yield* new ApproverNotListed({ approvalId: id })
            const now = yield* nowMs
            // Deregistering an agent expires its pending approvals in its transaction, so a decision racing it is
            // refused by the row's own state: `repo.decide` is conditional on `pending`, and either it runs first
            // (the deregistration waits for this transaction and finds it decided: `approval.decided` precedes
            // `agent.deregistered` in the trail) or after (it finds the approval expired: 409 APPROVAL_NOT_PENDING).
            // No agent lock is taken here. A pending approval of a deregistered agent is one left from before
            // deregistrations expired them: it is not decided either (no `approval.decided` says an agent that is
            // gone may go ahead) and reads pending until it expires.
            if (present(current, now).status === "pending") {
              const agent = yield* agents.find(actor.workspaceId, current.agentId)
              if (agent?.status === "deregistered") return yield* new AgentDeregistered({ agentId: current.agentId })
            }
            const decided = yield* repo.decide(actor.workspaceId, id, {
              status: input.decision,
              decidedBy: actor.credential.id,
              reason: input.reason ?? null,
              now: isoOf(now),
            })
            if (!decided) {
              // Decided meanwhile, or expired: say which, as it reads now.
              const latest = (yield* repo.find(actor.workspaceId, id)) ?? current
              return yield* new ApprovalNotPending({ approvalId: id, status: present(latest, now).status })
            }
            yield* audit.append(actor, [
              {
                type: "approval.decided",
                agentId: decided.agentId,
                data: {
                  approvalId: decided.id,
                  agentId: decided.agentId,
                  action: decided.action,
                  decision: input.decision,
                  expired: false,
                  decidedBy: actor.credential.id,
                  ...(input.reason !== undefined ? { reason: input.reason } : {}),
                },
              },
            ])
            return decided
          }),
        )
      })

      // One transaction per workspace: each takes one chain head only, so sweeps on several instances
      // (and this sweep beside others) never wait on each other's chain heads.
      const expireDue = Effect.gen(function* () {
        const now = isoOf(yield* nowMs)
        let count = 0
        for (const { workspaceId, deleted } of yield* repo.workspacesWithExpired(now)) {
          count += yield* tx(
            Effect.gen(function* () {
              const expired = yield* repo.expire(workspaceId, now)
              if (expired.length === 0) return 0
              // A deleted workspace's trail ends with `workspace.deleted` (and its webhooks would be sent anything
              // appended after it): its approvals are recorded as expired, as they read, with no event.
              if (deleted) return expired.length
              yield* audit.append(yield* systemIn(workspaceId), expired.map(approvalExpiredEvent))
              return expired.length
            }),
          )
        }
        // Pending approvals of agents deregistered before a deregistration expired them (fourth pass): expired now,
        // as the deregistration does (`expireForAgent`, reason "the agent was deregistered"), recorded as the system.
        // `now`, not the deregistration's instant: they read pending (and were listed to approvers) until now. Each
        // agent under its guard-request lock, so that sweeps on two instances take its rows one after the other.
        for (const { workspaceId, agentId, deleted } of yield* repo.deregisteredWithPending) {
          count += yield* tx(
            Effect.gen(function* () {
              yield* lockAgentRequests(workspaceId, agentId)
              const expired = yield* repo.expireForAgent(workspaceId, agentId, now)
              if (expired.length === 0 || deleted) return expired.length
              yield* audit.append(yield* systemIn(workspaceId), expired.map(approvalExpiredEvent))
              return expired.length
            }),
          )
        }
        return count
      }).pipe(Effect.withSpan("ApprovalService.expireDue"))

      return ApprovalService.of({ create, requestForGuard, consumeForGuard, list, get, decide, expireDue })
    }),
  )
}
