import { uniqueViolation } from "@agentgov/db"
import { canonicalize } from "@agentgov/verifier"
import { Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import { AuditLog } from "../audit/AuditLog.ts"
import type { Actor } from "../auth/Actor.ts"
import { PermissionDenied, StateConflict } from "../shared/errors.ts"
import { newId } from "../shared/ids.ts"
import {
  decodeCursor,
  encodeCursor,
  idCursor,
  type Page,
  type PageRequest,
  pageWindow,
  toPage,
} from "../shared/pagination.ts"
import { InvalidCursor } from "../shared/paginationErrors.ts"
import { UNSEEN } from "../shared/schemas.ts"
import { nowIso } from "../shared/time.ts"
import { transactional } from "../shared/transaction.ts"
import {
  budgetIssues,
  decodePolicyDocument,
  type PolicyDocument,
  type PolicyInvalid,
  type PolicyIssue,
  policyInvalid,
  validatePolicyDocument,
} from "./engine/index.ts"
import type { Policy, PolicyVersion, UpdatePolicy } from "./Policy.ts"
import { PolicyNameTaken, PolicyNotFound } from "./PolicyErrors.ts"
import { PolicyRepo } from "./PolicyRepo.ts"
import { PolicySets } from "./PolicySets.ts"

export interface PolicyListFilter extends PageRequest {
  readonly enabled?: boolean | undefined
}

/** A position in a policy's versions: the last version seen (`version_<n>`). */
const versionCursor = (cursor: string): number | InvalidCursor => {
  const raw = decodeCursor(cursor)
  const n = typeof raw === "string" && /^version_[1-9][0-9]{0,8}$/.test(raw) ? Number(raw.slice(8)) : undefined
  return n ?? new InvalidCursor({})
}

const documentOf = (p: Policy): Record<string, unknown> => {
  const { id: _id, workspaceId: _ws, version: _v, createdAt: _c, updatedAt: _u, invalid: _i, ...document } = p
  return document
}

/** A stored policy as it is read: with its first issue when its document no longer validates (the guard's stand-in). */
const shown = (p: Policy): Policy => {
  const validation = validatePolicyDocument(documentOf(p))
  return validation.ok ? p : { ...p, invalid: validation.issues[0] ?? { field: "", issue: "does not validate" } }
}

/**
 * Action patterns no guard call can match, checked when a policy is saved: the guard refuses an action with
 * invisible formatting characters (zero-width, bidi controls, BOM, soft hyphen) or in a form other than Unicode NFC
 * (GuardAction), so a rule naming one (a decomposed accent pasted from another system) would never apply while
 * reading as the named action. Patterns an earlier version already held are let through, so that an unrelated
 * change (disabling the policy) still saves; compiling stored policies does not apply this check.
 */
const unmatchableActions = (document: PolicyDocument, previous?: Record<string, unknown>): Array<PolicyIssue> => {
  const held = new Set<unknown>()
  const rules = previous?.rules
  if (Array.isArray(rules))
    for (const r of rules) {
      const actions = (r as { actions?: unknown } | null)?.actions
      if (Array.isArray(actions)) for (const a of actions) held.add(a)
    }
  const issues: Array<PolicyIssue> = []
  document.rules.forEach((rule, i) => {
    rule.actions.forEach((pattern, j) => {
      if (held.has(pattern)) return
      const issue = UNSEEN.test(pattern)
        ? "must not contain invisible formatting characters: the guard refuses such an action, so the rule would never apply"
        : pattern.normalize("NFC") !== pattern
          ? "must be in Unicode normalization form C (NFC), as the guard's actions are: the rule would never apply"
          : undefined
      if (issue) issues.push({ field: `rules[${i}].actions[${j}]`, issue })
    })
  })
  return issues
}

const nameTaken =
  (name: string) =>
  <A, R>(effect: Effect.Effect<A, SqlError, R>): Effect.Effect<A, PolicyNameTaken, R> =>
    Effect.catchTag(effect, "SqlError", (e) =>
      uniqueViolation(e) === "policies_name_unique" ? Effect.fail(new PolicyNameTaken({ name })) : Effect.die(e),
    )

const summary = (p: Policy) => ({
  policyId: p.id,
  name: p.name,
  version: p.version,
  mode: p.mode,
  enabled: p.enabled,
  rules: p.rules.length,
})

/**
 * Policies (decision D6): validated on save with errors that name the exact
 * field, stored with every version, and announced so that every instance
 * recompiles the workspace's set (PolicySets) at commit. Agent-bound
 * credentials may read policies, never change them.
 */
export class PolicyService extends Context.Service<
  PolicyService,
  {
    readonly create: (
      actor: Actor,
      input: Record<string, unknown>,
    ) => Effect.Effect<Policy, PolicyInvalid | PolicyNameTaken | PermissionDenied>
    readonly list: (actor: Actor, filter: PolicyListFilter) => Effect.Effect<Page<Policy>, InvalidCursor>
    readonly get: (actor: Actor, id: string) => Effect.Effect<Policy, PolicyNotFound>
    /** The policy's stored versions, newest first, paginated. */
    readonly versions: (
      actor: Actor,
      id: string,
      page: PageRequest,
    ) => Effect.Effect<Page<PolicyVersion>, PolicyNotFound | InvalidCursor>
    readonly update: (
      actor: Actor,
      id: string,
      patch: UpdatePolicy,
    ) => Effect.Effect<Policy, PolicyNotFound | PolicyInvalid | PolicyNameTaken | PermissionDenied | StateConflict>
    readonly remove: (actor: Actor, id: string) => Effect.Effect<Policy, PolicyNotFound | PermissionDenied>
  }
>()("@agentgov/domain/policies/PolicyService") {
  static readonly layer = Layer.effect(
    PolicyService,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* PolicyRepo
      const audit = yield* AuditLog
      const sets = yield* PolicySets
      const tx = transactional(sql)
      /** A change in its transaction; then this instance's compiled set goes at once (the others' at the notification). */
      const change = <A, E, R>(workspaceId: string, effect: Effect.Effect<A, E, R>) =>
        tx(effect).pipe(Effect.tap(() => sets.forget(workspaceId)))

      const writer = (actor: Actor) =>
        actor.agentId !== undefined
          ? Effect.fail(new PermissionDenied({ message: "agent-bound credentials cannot change policies" }))
          : Effect.void

      /** The workspace's set with this document in it must fit one evaluation's budget (decision D6, issue 24). */
      const affordable = (workspaceId: string, id: string, version: number, document: PolicyDocument) =>
        Effect.flatMap(repo.all(workspaceId), (stored) => {
          const issues = budgetIssues(
            stored.map((p) => ({ id: p.id, version: p.version, document: p.document })),
            { id, version, document },
            // What this instance compiled last: only the saved document and versions it has not seen compile here.
            sets.compilations(workspaceId),
          )
          return issues.length === 0 ? Effect.void : Effect.fail(policyInvalid(issues))
        })

      const found = (actor: Actor, id: string, lock = false) =>
        Effect.flatMap(repo.find(actor.workspaceId, id, lock), (p) =>
          p ? Effect.succeed(p) : Effect.fail(new PolicyNotFound({ policyId: id })),
        )

      const create = Effect.fn("PolicyService.create")(function* (actor: Actor, input: Record<string, unknown>) {
        yield* writer(actor)
        const document: PolicyDocument = yield* decodePolicyDocument(input)
        const unmatchable = unmatchableActions(document)
        if (unmatchable.length > 0) return yield* policyInvalid(unmatchable)
        const now = yield* nowIso
        const policy: Policy = {
          id: newId("pol"),
          workspaceId: actor.workspaceId,
          version: 1,
          ...document,
          createdAt: now,
          updatedAt: now,
        }
        return yield* change(
          actor.workspaceId,
          Effect.gen(function* () {
            // Checked and saved under the workspace's lock: saves at once cannot each fit without the other.
            yield* repo.lockSet(actor.workspaceId)
            yield* affordable(actor.workspaceId, policy.id, policy.version, document)
            yield* repo.insert(policy, document).pipe(nameTaken(policy.name))
            yield* audit.append(actor, [{ type: "policy.created", data: summary(policy) }])
            return policy
          }),
        )
      })

      const list = Effect.fn("PolicyService.list")(function* (actor: Actor, filter: PolicyListFilter) {
        const { limit, before } = yield* pageWindow(filter, idCursor("pol"))
        const rows = yield* repo.list(actor.workspaceId, { before, limit: limit + 1, enabled: filter.enabled })
        return toPage(rows.map(shown), limit)
      })

      const get = Effect.fn("PolicyService.get")(function* (actor: Actor, id: string) {
        return shown(yield* found(actor, id))
      })

      const versions = Effect.fn("PolicyService.versions")(function* (actor: Actor, id: string, page: PageRequest) {
        yield* found(actor, id)
        const { limit, before } = yield* pageWindow(page, versionCursor)
        const rows = yield* repo.versions(actor.workspaceId, id, { before, limit: limit + 1 })
        const hasMore = rows.length > limit
        const data = hasMore ? rows.slice(0, limit) : rows
        return {
          data,
          meta: { cursor: hasMore ? encodeCursor(`version_${data.at(-1)!.version}`) : null, hasMore },
        } satisfies Page<PolicyVersion>
      })

      const update = Effect.fn("PolicyService.update")(function* (actor: Actor, id: string, input: UpdatePolicy) {
        yield* writer(actor)
        const { expectedVersion, ...patch } = input
        return yield* change(
          actor.workspaceId,
          Effect.gen(function* () {
            // The workspace's lock first, then the row's (the lock order of every policy save).
            yield* repo.lockSet(actor.workspaceId)
            const current = yield* found(actor, id, true)
            // Checked under the row's lock: two editors of one version cannot both save over it.
            if (expectedVersion !== undefined && current.version !== expectedVersion)
              return yield* new StateConflict({
                code: "VERSION_CONFLICT",
                message: `the policy is at version ${current.version}, not ${expectedVersion}: it was saved meanwhile; read it again and make the change on that version`,
              })
            const merged: Record<string, unknown> = { ...documentOf(current) }
            for (const [field, value] of Object.entries(patch)) {
              if (value === null && (field === "description" || field === "target")) delete merged[field]
              else merged[field] = value
            }
            const document = yield* decodePolicyDocument(merged)
            // Fields whose value the PATCH changed (key order aside): none is a no-op, no version and no event.
            const before = documentOf(current)
            const after: Record<string, unknown> = { ...document }
            const changes = [...new Set([...Object.keys(before), ...Object.keys(after)])]
              .filter((k) => canonicalize(before[k] ?? null) !== canonicalize(after[k] ?? null))
              .sort()
            if (changes.length === 0) return current
            const unmatchable = unmatchableActions(document, before)
            if (unmatchable.length > 0) return yield* policyInvalid(unmatchable)
            yield* affordable(actor.workspaceId, current.id, current.version + 1, document)
            const now = yield* nowIso
            const policy: Policy = {
              id: current.id,
              workspaceId: current.workspaceId,
              version: current.version + 1,
              ...document,
              createdAt: current.createdAt,
              updatedAt: now,
            }
            yield* repo.update(policy, document).pipe(nameTaken(policy.name))
            yield* audit.append(actor, [
              {
                type: "policy.updated",
                data: {
                  ...summary(policy),
                  previousVersion: current.version,
                  changes,
                },
              },
            ])
            return policy
          }),
        )
      })

      const remove = Effect.fn("PolicyService.remove")(function* (actor: Actor, id: string) {
        yield* writer(actor)
        return yield* change(
          actor.workspaceId,
          Effect.gen(function* () {
            const current = yield* found(actor, id, true)
            yield* repo.markDeleted(actor.workspaceId, id, yield* nowIso)
            yield* audit.append(actor, [{ type: "policy.deleted", data: summary(current) }])
            return current
          }),
        )
      })

      return PolicyService.of({ create, list, get, versions, update, remove })
    }),
  )
}
