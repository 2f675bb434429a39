import { uniqueViolation } from "@agentgov/db"
import { Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import { ApiKeyService } from "../apikeys/ApiKeyService.ts"
import { ApprovalRepo } from "../approvals/ApprovalRepo.ts"
import { approvalExpiredEvent } from "../approvals/ApprovalService.ts"
import { AuditLog } from "../audit/AuditLog.ts"
import type { Actor } from "../auth/Actor.ts"
import { InvalidInput, PermissionDenied } from "../shared/errors.ts"
import { newId } from "../shared/ids.ts"
import { idCursor, type Page, type PageRequest, pageWindow, toPage } from "../shared/pagination.ts"
import type { InvalidCursor } from "../shared/paginationErrors.ts"
import { METADATA_MAX_BYTES } from "../shared/schemas.ts"
import { requireStorable } from "../shared/storable.ts"
import { nowIso } from "../shared/time.ts"
import { transactional } from "../shared/transaction.ts"
import {
  type Agent,
  type AgentVersion,
  type CreateAgentVersion,
  INITIAL_TRUST_SCORE,
  type RegisterAgent,
  type UpdateAgent,
} from "./Agent.ts"
import { AgentDeregistered, AgentNameTaken, AgentNotFound, AgentVersionExists } from "./AgentErrors.ts"
import { AgentRepo } from "./AgentRepo.ts"

export interface AgentListFilter extends PageRequest {
  readonly status?: Agent["status"] | undefined
  readonly label?: string | undefined
  readonly namePrefix?: string | undefined
}

const checkMetadata = (metadata: unknown) =>
  metadata !== undefined && Buffer.byteLength(JSON.stringify(metadata)) > METADATA_MAX_BYTES
    ? Effect.fail(
        new InvalidInput({ field: "metadata", message: `must encode to at most ${METADATA_MAX_BYTES} bytes` }),
      )
    : Effect.void

/** Maps the unique violation of a write to a domain error; any other database error is a defect. */
const onUnique =
  <E>(constraint: string, error: () => E) =>
  <A, R>(effect: Effect.Effect<A, SqlError, R>): Effect.Effect<A, E, R> =>
    Effect.catchTag(effect, "SqlError", (e) =>
      uniqueViolation(e) === constraint ? Effect.fail(error()) : Effect.die(e),
    )

/**
 * Agents: registered, updated, versioned and deregistered (soft: the record
 * and its history stay, its keys are revoked, its pending approvals expire). An agent-bound credential sees
 * and acts for its own agent only; any other agent is 403 for it.
 */
export class AgentService extends Context.Service<
  AgentService,
  {
    readonly register: (
      actor: Actor,
      input: RegisterAgent,
    ) => Effect.Effect<Agent, AgentNameTaken | InvalidInput | PermissionDenied>
    readonly list: (actor: Actor, filter: AgentListFilter) => Effect.Effect<Page<Agent>, InvalidCursor>
    readonly get: (actor: Actor, id: string) => Effect.Effect<Agent, AgentNotFound | PermissionDenied>
    readonly update: (
      actor: Actor,
      id: string,
      patch: UpdateAgent,
    ) => Effect.Effect<Agent, AgentNotFound | AgentNameTaken | AgentDeregistered | InvalidInput | PermissionDenied>
    readonly deregister: (actor: Actor, id: string) => Effect.Effect<Agent, AgentNotFound | PermissionDenied>
    readonly createVersion: (
      actor: Actor,
      agentId: string,
      input: CreateAgentVersion,
    ) => Effect.Effect<
      AgentVersion,
      AgentNotFound | AgentVersionExists | AgentDeregistered | InvalidInput | PermissionDenied
    >
    readonly listVersions: (
      actor: Actor,
      agentId: string,
      page: PageRequest,
    ) => Effect.Effect<Page<AgentVersion>, AgentNotFound | PermissionDenied | InvalidCursor>
  }
>()("@agentgov/domain/agents/AgentService") {
  static readonly layer = Layer.effect(
    AgentService,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* AgentRepo
      const keys = yield* ApiKeyService
      const approvals = yield* ApprovalRepo
      const audit = yield* AuditLog
      const tx = transactional(sql)

      const ownAgentOnly = (actor: Actor, id: string) =>
        actor.agentId !== undefined && actor.agentId !== id
          ? Effect.fail(new PermissionDenied({ message: "this credential is bound to another agent" }))
          : Effect.void

      const load = (actor: Actor, id: string, lock = false) =>
        Effect.gen(function* () {
          yield* ownAgentOnly(actor, id)
          // Read as of now (a lapsed suspension shows as lifted); locked for a change, as stored.
          const agent = lock
            ? yield* repo.findForUpdate(actor.workspaceId, id)
            : yield* repo.find(actor.workspaceId, id, yield* nowIso)
          if (!agent) return yield* new AgentNotFound({ agentId: id })
          return agent
        })

      /** A suspended agent read under its lock, as it stands at `now` (its suspension may have lapsed). */
      const shown = (agent: Agent, now: string) =>
        agent.status === "suspended"
          ? Effect.map(repo.find(agent.workspaceId, agent.id, now), (a) => a ?? agent)
          : Effect.succeed(agent)

      /**
       * Fails when another registered agent of the workspace is called `name` but for letter case: two agents
       * that read alike on a badge or in a chat message are one too many. The unique index (agents_name_unique)
       * still catches an exact duplicate.
       */
      const nameFree = (workspaceId: string, name: string, except?: string) =>
        Effect.flatMap(repo.nameTakenIgnoringCase(workspaceId, name, except), (holder) =>
          holder === undefined ? Effect.void : Effect.fail(new AgentNameTaken({ name: holder })),
        )

      const register = Effect.fn("AgentService.register")(function* (actor: Actor, input: RegisterAgent) {
        if (actor.agentId !== undefined)
          return yield* new PermissionDenied({ message: "agent-bound credentials cannot register agents" })
        yield* requireStorable(input)
        yield* checkMetadata(input.metadata)
        const now = yield* nowIso
        const agent: Agent = {
          id: newId("agt"),
          workspaceId: actor.workspaceId,
          // Stored in NFC: "é" sent precomposed or as e + U+0301 is one name.
          name: input.name.normalize("NFC"),
          description: input.description ?? null,
          labels: [...new Set(input.labels ?? [])],
          metadata: input.metadata ?? {},
          status: "active",
          currentVersion: null,
          trustScore: INITIAL_TRUST_SCORE,
          createdAt: now,
          updatedAt: now,
          deregisteredAt: null,
        }
        return yield* tx(
          Effect.gen(function* () {
            yield* nameFree(agent.workspaceId, agent.name)
            yield* repo
              .insert(agent)
              .pipe(onUnique("agents_name_unique", () => new AgentNameTaken({ name: input.name })))
            yield* audit.append(actor, [
              {
                type: "agent.registered",
                agentId: agent.id,
                data: { agentId: agent.id, agentName: agent.name, trustScore: agent.trustScore },
              },
            ])
            return agent
          }),
        )
      })

      const list = Effect.fn("AgentService.list")(function* (actor: Actor, filter: AgentListFilter) {
        const { limit, before } = yield* pageWindow(filter, idCursor("agt"))
        const rows = yield* repo.list(actor.workspaceId, {
          status: filter.status,
          label: filter.label,
          namePrefix: filter.namePrefix?.normalize("NFC"),
          onlyId: actor.agentId,
          before,
          limit: limit + 1,
          asOf: yield* nowIso,
        })
        return toPage(rows, limit)
      })

      const update = Effect.fn("AgentService.update")(function* (actor: Actor, id: string, patch: UpdateAgent) {
        yield* requireStorable(patch)
        yield* checkMetadata(patch.metadata)
        return yield* tx(
          Effect.gen(function* () {
            const current = yield* load(actor, id, true)
            if (current.status === "deregistered") return yield* new AgentDeregistered({ agentId: id })
            const next: Agent = {
              ...current,
              ...patch,
              name: patch.name === undefined ? current.name : patch.name.normalize("NFC"),
              labels: patch.labels ? [...new Set(patch.labels)] : current.labels,
            }
            const changes = (Object.keys(patch) as Array<keyof UpdateAgent>).filter(
              (k) => JSON.stringify(next[k]) !== JSON.stringify(current[k]),
            )
            const now = yield* nowIso
            if (changes.length === 0) return yield* shown(current, now)
            if (changes.includes("name")) yield* nameFree(current.workspaceId, next.name, id)
            const updated: Agent = { ...next, updatedAt: now }
            yield* repo
              .update(updated)
              .pipe(onUnique("agents_name_unique", () => new AgentNameTaken({ name: updated.name })))
            yield* audit.append(actor, [
              { type: "agent.updated", agentId: id, data: { agentId: id, agentName: updated.name, changes } },
            ])
            return yield* shown(updated, now)
          }),
        )
      })

      const deregister = Effect.fn("AgentService.deregister")(function* (actor: Actor, id: string) {
        return yield* tx(
          Effect.gen(function* () {
            const current = yield* load(actor, id, true)
            // Deregistering twice changes nothing: DELETE is idempotent.
            if (current.status === "deregistered") return current
            const now = yield* nowIso
            const updated: Agent = { ...current, status: "deregistered", updatedAt: now, deregisteredAt: now }
            yield* repo.update(updated).pipe(Effect.catchTag("SqlError", Effect.die))
            // Its pending approvals can no longer be acted on: they expire now, recorded as the sweep records an
            // expiry. Before the audit append: a decision holding one of them goes on to the chain head, which
            // this transaction must not hold while it waits for that row. (No writer holding a pending approval
            // waits for an agent row: deciding and the sweep take the approval, then the chain head.)
            const expired = yield* approvals.expireForAgent(actor.workspaceId, id, now)
            yield* audit.append(actor, [
              { type: "agent.deregistered", agentId: id, data: { agentId: id, agentName: current.name } },
              ...expired.map(approvalExpiredEvent),
            ])
            yield* keys.revokeForAgent(actor, id, "agent_deregistered")
            return updated
          }),
        )
      })

      const createVersion = Effect.fn("AgentService.createVersion")(function* (
        actor: Actor,
        agentId: string,
        input: CreateAgentVersion,
      ) {
        yield* requireStorable(input)
        yield* checkMetadata(input.metadata)
        return yield* tx(
          Effect.gen(function* () {
            const agent = yield* load(actor, agentId, true)
            if (agent.status === "deregistered") return yield* new AgentDeregistered({ agentId })
            const now = yield* nowIso
            const version: AgentVersion = {
              id: newId("ver"),
              agentId,
              version: input.version,
              description: input.description ?? null,
              metadata: input.metadata ?? {},
              createdAt: now,
            }
            yield* repo
              .insertVersion(actor.workspaceId, version)
              .pipe(
                onUnique("agent_versions_unique", () => new AgentVersionExists({ agentId, version: input.version })),
              )
            yield* repo
              .update({ ...agent, currentVersion: input.version, updatedAt: now })
              .pipe(Effect.catchTag("SqlError", Effect.die))
            yield* audit.append(actor, [
              {
                type: "agent.updated",
                agentId,
                data: {
                  agentId,
                  agentName: agent.name,
                  changes: ["currentVersion"],
                  versionId: version.id,
                  version: version.version,
                  previousVersion: agent.currentVersion,
                },
              },
            ])
            return version
          }),
        )
      })

      const listVersions = Effect.fn("AgentService.listVersions")(function* (
        actor: Actor,
        agentId: string,
        page: PageRequest,
      ) {
        yield* load(actor, agentId)
        const { limit, before } = yield* pageWindow(page, idCursor("ver"))
        return toPage(yield* repo.listVersions(actor.workspaceId, agentId, { before, limit: limit + 1 }), limit)
      })

      return AgentService.of({
        register,
        list,
        get: (actor, id) => load(actor, id),
        update,
        deregister,
        createVersion,
        listVersions,
      })
    }),
  )
}
