import { Clock, Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { AgentDeregistered, AgentNotFound } from "../agents/AgentErrors.ts"
import { AgentRepo } from "../agents/AgentRepo.ts"
import { AuditLog } from "../audit/AuditLog.ts"
import { type Actor, systemActor } from "../auth/Actor.ts"
import { AGENT_KEY_SCOPES, canonicalScope, SCOPES, type Scope } from "../auth/scopes.ts"
import { EnforcementRepo } from "../enforcement/EnforcementRepo.ts"
import { PeopleRepo } from "../people/PeopleRepo.ts"
import { InvalidInput, PermissionDenied, StateConflict } from "../shared/errors.ts"
import { newId } from "../shared/ids.ts"
import { idCursor, type Page, type PageRequest, pageWindow, toPage } from "../shared/pagination.ts"
import type { InvalidCursor } from "../shared/paginationErrors.ts"
import { isTimestamp } from "../shared/schemas.ts"
import { requireStorable } from "../shared/storable.ts"
import { nowIso } from "../shared/time.ts"
import { transactional } from "../shared/transaction.ts"
import type { ApiKey, ApiKeyWithSecret, CreateApiKey } from "./ApiKey.ts"
import { ApiKeyNotFound, ApiKeyNotRotatable } from "./ApiKeyErrors.ts"
import { ApiKeyRepo, publicKey, type RevokeReason, type StoredKey } from "./ApiKeyRepo.ts"
import { mintKey } from "./keyFormat.ts"

export const DEFAULT_ROTATION_OVERLAP_SECONDS = 86_400

const withSecret = (k: StoredKey, apiKey: string): ApiKeyWithSecret => ({ ...publicKey(k), apiKey })

/**
 * An app acting for a person (an OAuth token) mints no API key: the key would outlive the grant, so revoking the
 * app, or the person's removal, would not end what it can do.
 */
const noKeysForApps = (actor: Actor) =>
  actor.credential.type === "oauth"
    ? Effect.fail(
        new PermissionDenied({
          message: "an app's OAuth token cannot mint API keys (a key would outlive its grant); use the dashboard",
          field: "credential",
          issue: "an OAuth access token",
        }),
      )
    : Effect.void

export const revokedEvent = (k: StoredKey, reason: RevokeReason) => ({
  type: "apikey.revoked",
  agentId: k.agentId,
  data: { keyId: k.id, name: k.name, prefix: k.prefix, reason },
})

export interface KeyListFilter extends PageRequest {
  readonly agentId?: string | undefined
  readonly status?: "active" | "revoked" | undefined
}

/**
 * API keys (decision D4): minted once and shown once, stored as a SHA-256 hash,
 * scoped, optionally bound to one agent, rotated with an overlap, revoked
 * immediately or at expiry. A key can only grant scopes its creator holds.
 */
export class ApiKeyService extends Context.Service<
  ApiKeyService,
  {
    readonly create: (
      actor: Actor,
      input: CreateApiKey,
    ) => Effect.Effect<
      ApiKeyWithSecret,
      InvalidInput | PermissionDenied | AgentNotFound | AgentDeregistered | StateConflict
    >
    /** The all-scope key of a new workspace (bootstrap, CLI, workspace creation); in the caller's transaction. */
    readonly createInitial: (
      actor: Actor,
      workspace: { id: string; environment: "live" | "test" },
      name: string,
      options?: { readonly admin?: boolean },
    ) => Effect.Effect<ApiKeyWithSecret>
    readonly list: (actor: Actor, filter: KeyListFilter) => Effect.Effect<Page<ApiKey>, InvalidCursor>
    readonly get: (actor: Actor, id: string) => Effect.Effect<ApiKey, ApiKeyNotFound>
    readonly revoke: (actor: Actor, id: string) => Effect.Effect<ApiKey, ApiKeyNotFound | PermissionDenied>
    readonly rotate: (
      actor: Actor,
      id: string,
      overlapSeconds?: number,
    ) => Effect.Effect<ApiKeyWithSecret, ApiKeyNotFound | ApiKeyNotRotatable | PermissionDenied>
    /** Revokes every active key of an agent, in the caller's transaction. */
    readonly revokeForAgent: (actor: Actor, agentId: string, reason: RevokeReason) => Effect.Effect<number>
    /** Revokes the keys whose `expiresAt` has passed; returns how many. Run by the sweeper. */
    readonly revokeExpired: Effect.Effect<number>
    /**
     * Revokes the keys whose person is no longer a member of the workspace (made before removal revoked them);
     * returns how many. Run by the sweeper.
     */
    readonly revokeOrphaned: Effect.Effect<number>
  }
>()("@agentgov/domain/apikeys/ApiKeyService") {
  static readonly layer = Layer.effect(
    ApiKeyService,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const enforcements = yield* EnforcementRepo
      const repo = yield* ApiKeyRepo
      const agents = yield* AgentRepo
      const audit = yield* AuditLog
      const people = yield* PeopleRepo
      const tx = transactional(sql)

      /**
       * The person a new key belongs to: the member acting in person (a session) or through an app; for a key, or
       * its SDK token, that key's person; none for the operator (system).
       */
      const personBehind = (actor: Actor) =>
        actor.credential.type === "user" || actor.credential.type === "oauth"
          ? Effect.succeed(actor.userId ?? null)
          : actor.credential.type === "api_key" || actor.credential.type === "sdk_token"
            ? Effect.map(repo.find(actor.workspaceId, actor.credential.id), (k) => k?.createdByUser ?? null)
            : Effect.succeed(null)

      const insertKey = Effect.fn("ApiKeyService.insertKey")(function* (
        actor: Actor,
        spec: Omit<
          StoredKey,
          | "id"
          | "prefix"
          | "hash"
          | "status"
          | "revokedAt"
          | "revokedReason"
          | "rotatedTo"
          | "lastUsedAt"
          | "createdAt"
          | "createdByUser"
        >,
        operators = false,
      ) {
        // A new workspace's first key is the operator's, whoever asked for the workspace.
        const createdByUser = operators ? null : yield* personBehind(actor)
        // Held until commit: a removal of this person waits for the key and then revokes it, or came first and the
        // key is refused (their credential authenticated a moment before the removal).
        if (createdByUser !== null && !(yield* repo.holdMembership(spec.workspaceId, createdByUser)))
          return yield* new PermissionDenied({
            message: "the person behind this credential is no longer a member of the workspace",
            field: "credential",
            issue: "not a member",
          })
        const createdAt = yield* nowIso
        const minted = mintKey(spec.type, spec.environment)
        const stored: StoredKey = {
          ...spec,
          createdByUser,
          id: newId("key"),
          prefix: minted.prefix,
          hash: minted.hash,
          status: "active",
          revokedAt: null,
          revokedReason: null,
          rotatedTo: null,
          lastUsedAt: null,
          createdAt,
        }
        yield* repo.insert(stored)
        yield* audit.append({ ...actor, workspaceId: spec.workspaceId }, [
          {
            type: "apikey.created",
            agentId: stored.agentId,
            data: {
              keyId: stored.id,
              name: stored.name,
              type: stored.type,
              prefix: stored.prefix,
              scopes: stored.scopes,
            },
          },
        ])
        return withSecret(stored, minted.key)
      })

      const create = Effect.fn("ApiKeyService.create")(function* (actor: Actor, input: CreateApiKey) {
        yield* noKeysForApps(actor)
        yield* requireStorable(input)
        const scopes: Array<Scope> = []
        for (const [i, name] of input.scopes.entries()) {
          const scope = canonicalScope(name)
          if (!scope) return yield* new InvalidInput({ field: `scopes[${i}]`, message: `unknown scope "${name}"` })
          if (input.type === "agent" && !AGENT_KEY_SCOPES.has(scope)) {
            return yield* new InvalidInput({
              field: `scopes[${i}]`,
              message: `scope "${name}" cannot be given to an agent key`,
            })
          }
          // A key never grants more than its creator holds: no escalation through key creation.
          if (!actor.scopes.has(scope)) {
            return yield* new PermissionDenied({
              message: `cannot grant scope "${scope}" that this credential lacks`,
              scope,
            })
          }
          if (!scopes.includes(scope)) scopes.push(scope)
        }
        if (input.type === "agent" && input.agentId === undefined) {
          return yield* new InvalidInput({ field: "agentId", message: "required for agent keys" })
        }
        if (input.type === "workspace" && input.agentId !== undefined) {
          return yield* new InvalidInput({ field: "agentId", message: "only agent keys are bound to an agent" })
        }
        if (actor.agentId !== undefined) {
          return yield* new PermissionDenied({ message: "agent-bound credentials cannot create keys" })
        }
        let expiresAt: string | null = null
        if (input.expiresAt !== undefined) {
          if (!isTimestamp(input.expiresAt)) {
            return yield* new InvalidInput({ field: "expiresAt", message: "not an ISO 8601 timestamp" })
          }
          const at = Date.parse(input.expiresAt)
          if (at <= (yield* Clock.currentTimeMillis)) {
            return yield* new InvalidInput({ field: "expiresAt", message: "must be in the future" })
          }
          expiresAt = new Date(at).toISOString()
        }
        return yield* tx(
          Effect.gen(function* () {
            if (input.agentId !== undefined) {
              // Locked, as deregistration and enforcement lock it before revoking the agent's keys: a key created
              // while one of them runs is seen by it (revoked with the others), or sees its outcome. Read without the
              // lock, a key inserted beside a deregistration stayed active (32 of 40 concurrent tries).
              const agent = yield* agents.findForUpdate(actor.workspaceId, input.agentId)
              if (!agent) return yield* new AgentNotFound({ agentId: input.agentId })
              if (agent.status === "deregistered") return yield* new AgentDeregistered({ agentId: input.agentId })
              // A revocation (D7) revoked the agent's keys; a new key must not undo it while it is in force.
              const revoked = yield* enforcements.revocationInForce(actor.workspaceId, input.agentId, yield* nowIso)
              if (revoked)
                return yield* new StateConflict({
                  code: "AGENT_REVOKED",
                  message: `agent ${input.agentId} is under a revocation; overturn it before issuing new keys`,
                })
            }
            return yield* insertKey(actor, {
              workspaceId: actor.workspaceId,
              name: input.name,
              type: input.type,
              agentId: input.agentId ?? null,
              environment: actor.environment,
              scopes,
              expiresAt,
            })
          }),
        )
      })

      // Every scope of the workspace; `workspaces:admin` (all tenants) only for the operator's bootstrap key.
      const createInitial = (
        actor: Actor,
        workspace: { id: string; environment: "live" | "test" },
        name: string,
        options: { readonly admin?: boolean } = {},
      ) =>
        insertKey(
          actor,
          {
            workspaceId: workspace.id,
            name,
            type: "workspace",
            agentId: null,
            environment: workspace.environment,
            scopes: SCOPES.filter((s) => options.admin === true || s !== "workspaces:admin"),
            expiresAt: null,
          },
          true,
        ).pipe(Effect.catchTag("PermissionDenied", Effect.die))

      // A key past its expiry is revoked (D4) from that instant, whether or not the sweep has recorded it yet.
      const present = (k: StoredKey, now: number): StoredKey =>
        k.status === "active" && k.expiresAt !== null && Date.parse(k.expiresAt) <= now
          ? {
              ...k,
              status: "revoked",
              revokedAt: k.expiresAt,
              revokedReason: k.rotatedTo === null ? "expired" : "rotated",
            }
          : k

      const visible = (actor: Actor, k: StoredKey | undefined, id: string) =>
        k === undefined || (actor.agentId !== undefined && k.agentId !== actor.agentId)
          ? Effect.fail(new ApiKeyNotFound({ keyId: id }))
          : Effect.succeed(k)

      const list = Effect.fn("ApiKeyService.list")(function* (actor: Actor, filter: KeyListFilter) {
        const { limit, before } = yield* pageWindow(filter, idCursor("key"))
        const rows = yield* repo.list(actor.workspaceId, {
          before,
          limit: limit + 1,
          agentId: actor.agentId ?? filter.agentId,
          status: filter.status,
          now: new Date(yield* Clock.currentTimeMillis).toISOString(),
        })
        const now = yield* Clock.currentTimeMillis
        return toPage(
          rows.map((k) => publicKey(present(k, now))),
          limit,
        )
      })

      const get = Effect.fn("ApiKeyService.get")(function* (actor: Actor, id: string) {
        const key = yield* visible(actor, yield* repo.find(actor.workspaceId, id), id)
        return publicKey(present(key, yield* Clock.currentTimeMillis))
      })

      /**
       * A credential manages only keys no stronger than itself: creating, rotating and revoking all
       * refuse a key holding a scope the caller lacks, so `apikeys:write` alone cannot take out the
       * workspace's full-scope key.
       */
      const mayManage = (actor: Actor, key: StoredKey, verb: "rotate" | "revoke") => {
        const missing = key.scopes.find((s) => !actor.scopes.has(s as Scope))
        return missing === undefined
          ? Effect.void
          : Effect.fail(
              new PermissionDenied({
                message: `cannot ${verb} a key holding scope "${missing}" that this credential lacks`,
                scope: missing,
              }),
            )
      }

      const revoke = Effect.fn("ApiKeyService.revoke")(function* (actor: Actor, id: string) {
        return yield* tx(
          Effect.gen(function* () {
            const current = yield* visible(actor, yield* repo.findForUpdate(actor.workspaceId, id), id)
            yield* mayManage(actor, current, "revoke")
            // Revoking a revoked key changes nothing and records nothing: DELETE is idempotent.
            if (current.status === "revoked") return publicKey(current)
            const at = yield* nowIso
            const revoked = (yield* repo.revoke(actor.workspaceId, id, "revoked", at))!
            // A key is revoked when it leaked or its holder left: the invitations it sent that nobody accepted yet go
            // with it, or whoever held it would keep a way in (invite an address of theirs, accept after the revocation).
            const withdrawn = yield* people.withdrawInvitationsOf(actor.workspaceId, id, at)
            yield* audit.append(actor, [
              revokedEvent(revoked, "revoked"),
              ...withdrawn.map((i) => ({
                type: "invitation.revoked" as const,
                data: { invitationId: i.id, email: i.email, role: i.role },
              })),
            ])
            return publicKey(revoked)
          }),
        )
      })

      const rotate = Effect.fn("ApiKeyService.rotate")(function* (
        actor: Actor,
        id: string,
        overlapSeconds = DEFAULT_ROTATION_OVERLAP_SECONDS,
      ) {
        yield* noKeysForApps(actor)
        return yield* tx(
          Effect.gen(function* () {
            // An agent key's agent is locked first (the order deregistration and enforcement take: agent, then its
            // keys), so that a successor is never inserted after they revoked the agent's keys.
            const peek = yield* visible(actor, yield* repo.find(actor.workspaceId, id), id)
            if (peek.agentId !== null) {
              const agent = yield* agents.findForUpdate(actor.workspaceId, peek.agentId)
              if (agent === undefined || agent.status === "deregistered")
                return yield* new ApiKeyNotRotatable({ keyId: id, reason: `its agent ${peek.agentId} is deregistered` })
            }
            const old = yield* visible(actor, yield* repo.findForUpdate(actor.workspaceId, id), id)
            const now = yield* Clock.currentTimeMillis
            if (old.status === "revoked" || (old.expiresAt !== null && Date.parse(old.expiresAt) <= now)) {
              return yield* new ApiKeyNotRotatable({ keyId: id, reason: "the key is revoked" })
            }
            yield* mayManage(actor, old, "rotate")
            if (old.rotatedTo !== null) {
              return yield* new ApiKeyNotRotatable({
                keyId: id,
                reason: `the key was already replaced by ${old.rotatedTo}`,
              })
            }
            const next = yield* insertKey(actor, {
              workspaceId: old.workspaceId,
              name: old.name,
              type: old.type,
              agentId: old.agentId,
              environment: old.environment,
              scopes: old.scopes,
              expiresAt: old.expiresAt,
            })
            const events = []
            if (overlapSeconds === 0) {
              yield* repo.markRotated(actor.workspaceId, id, next.id, new Date(now).toISOString())
              const revoked = (yield* repo.revoke(actor.workspaceId, id, "rotated", new Date(now).toISOString()))!
              events.push(revokedEvent(revoked, "rotated"))
            } else {
              const until = Math.min(now + overlapSeconds * 1000, old.expiresAt ? Date.parse(old.expiresAt) : Infinity)
              yield* repo.markRotated(actor.workspaceId, id, next.id, new Date(until).toISOString())
            }
            yield* audit.append(actor, [
              { type: "apikey.rotated", agentId: old.agentId, data: { keyId: id, newKeyId: next.id, overlapSeconds } },
              ...events,
            ])
            return next
          }),
        )
      })

      const revokeForAgent = Effect.fn("ApiKeyService.revokeForAgent")(function* (
        actor: Actor,
        agentId: string,
        reason: RevokeReason,
      ) {
        const revoked = yield* repo.revokeAll(actor.workspaceId, agentId, reason, yield* nowIso)
        yield* audit.append(
          actor,
          revoked.map((k) => revokedEvent(k, reason)),
        )
        return revoked.length
      })

      const revokeExpired = tx(
        Effect.gen(function* () {
          const revoked = yield* repo.revokeExpired(yield* nowIso)
          const byWorkspace = Map.groupBy(revoked, (k) => k.workspaceId)
          for (const [workspaceId, keys] of byWorkspace) {
            const actor = systemActor(workspaceId, keys[0]!.environment, new Set())
            yield* audit.append(
              actor,
              keys.map((k) => revokedEvent(k, k.revokedReason ?? "expired")),
            )
          }
          return revoked.length
        }),
      ).pipe(Effect.withSpan("ApiKeyService.revokeExpired"))

      const revokeOrphaned = tx(
        Effect.gen(function* () {
          const revoked = yield* repo.revokeOrphaned(yield* nowIso)
          for (const [workspaceId, keys] of Map.groupBy(revoked, (k) => k.workspaceId))
            yield* audit.append(
              systemActor(workspaceId, keys[0]!.environment, new Set()),
              keys.map((k) => revokedEvent(k, "member_removed")),
            )
          return revoked.length
        }),
      ).pipe(Effect.withSpan("ApiKeyService.revokeOrphaned"))

      return ApiKeyService.of({
        create,
        createInitial,
        list,
        get,
        revoke,
        rotate,
        revokeForAgent,
        revokeExpired,
        revokeOrphaned,
      })
    }),
  )
}
