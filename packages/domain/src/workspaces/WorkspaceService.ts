import { Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { AgentRepo } from "../agents/AgentRepo.ts"
import type { ApiKeyWithSecret } from "../apikeys/ApiKey.ts"
import { ApiKeyRepo } from "../apikeys/ApiKeyRepo.ts"
import { ApiKeyService } from "../apikeys/ApiKeyService.ts"
import { AuditLog } from "../audit/AuditLog.ts"
import { whenChainClosed } from "../audit/EventErrors.ts"
import type { Actor } from "../auth/Actor.ts"
import { PolicySets } from "../policies/PolicySets.ts"
import { type InvalidInput, PermissionDenied, StateConflict } from "../shared/errors.ts"
import { newId } from "../shared/ids.ts"
import { idCursor, type Page, type PageRequest, pageWindow, toPage } from "../shared/pagination.ts"
import type { InvalidCursor } from "../shared/paginationErrors.ts"
import { requireStorable } from "../shared/storable.ts"
import { nowIso } from "../shared/time.ts"
import { transactional } from "../shared/transaction.ts"
import type { CreateWorkspace, UpdateWorkspace, Workspace } from "./Workspace.ts"
import { WorkspaceNotFound } from "./WorkspaceErrors.ts"
import { WorkspaceRepo } from "./WorkspaceRepo.ts"

const isAdmin = (actor: Actor) => actor.scopes.has("workspaces:admin")

/**
 * Workspaces own everything else. A credential sees its own workspace; one
 * with `workspaces:admin` (the bootstrap key, operators) creates, lists and
 * deletes any. A workspace of another credential is reported as not found.
 */
export class WorkspaceService extends Context.Service<
  WorkspaceService,
  {
    readonly create: (
      actor: Actor | null,
      input: CreateWorkspace,
      keyName?: string,
      options?: { readonly adminKey?: boolean },
    ) => Effect.Effect<{ workspace: Workspace; apiKey: ApiKeyWithSecret }, InvalidInput>
    readonly list: (actor: Actor, page: PageRequest) => Effect.Effect<Page<Workspace>, InvalidCursor>
    readonly get: (actor: Actor, id: string) => Effect.Effect<Workspace, WorkspaceNotFound>
    readonly update: (
      actor: Actor,
      id: string,
      patch: UpdateWorkspace,
    ) => Effect.Effect<Workspace, WorkspaceNotFound | PermissionDenied | InvalidInput>
    readonly remove: (actor: Actor, id: string) => Effect.Effect<Workspace, WorkspaceNotFound | StateConflict>
    readonly isEmpty: Effect.Effect<boolean>
  }
>()("@agentgov/domain/workspaces/WorkspaceService") {
  static readonly layer = Layer.effect(
    WorkspaceService,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* WorkspaceRepo
      const keys = yield* ApiKeyService
      const keyRepo = yield* ApiKeyRepo
      const agentRepo = yield* AgentRepo
      const audit = yield* AuditLog
      const guardState = yield* PolicySets
      const tx = transactional(sql)

      const visible = (actor: Actor, id: string) =>
        Effect.flatMap(repo.find(id), (w) =>
          w && (isAdmin(actor) || w.id === actor.workspaceId)
            ? Effect.succeed(w)
            : Effect.fail(new WorkspaceNotFound({ workspaceId: id })),
        )

      const create = Effect.fn("WorkspaceService.create")(function* (
        creator: Actor | null,
        input: CreateWorkspace,
        keyName: string = "initial key",
        options: { readonly adminKey?: boolean } = {},
      ) {
        yield* requireStorable({ ...input, keyName })
        return yield* tx(
          Effect.gen(function* () {
            const now = yield* nowIso
            const workspace: Workspace = {
              id: newId("ws"),
              name: input.name.normalize("NFC"),
              environment: input.environment ?? "live",
              plan: input.plan ?? "free",
              guardDefault: input.guardDefault ?? "allow",
              createdAt: now,
              updatedAt: now,
            }
            yield* repo.insert(workspace)
            yield* audit.initChain(workspace.id)
            // Recorded in the new workspace's own chain, attributed to whoever created it.
            const actor: Actor = {
              workspaceId: workspace.id,
              environment: workspace.environment,
              credential: creator?.credential ?? { type: "system", id: "system" },
              keyType: "workspace",
              scopes: new Set(),
            }
            yield* audit.append(actor, [
              {
                type: "workspace.created",
                data: {
                  workspaceId: workspace.id,
                  name: workspace.name,
                  environment: workspace.environment,
                  plan: workspace.plan,
                },
              },
            ])
            const apiKey = yield* keys.createInitial(actor, workspace, keyName, { admin: options.adminKey === true })
            return { workspace, apiKey }
          }),
        )
      })

      const list = Effect.fn("WorkspaceService.list")(function* (actor: Actor, page: PageRequest) {
        const { limit, before } = yield* pageWindow(page, idCursor("ws"))
        const rows = yield* repo.list({
          ids: isAdmin(actor) ? undefined : [actor.workspaceId],
          before,
          limit: limit + 1,
        })
        return toPage(rows, limit)
      })

      const update = Effect.fn("WorkspaceService.update")(function* (actor: Actor, id: string, patch: UpdateWorkspace) {
        yield* requireStorable(patch)
        const updated = yield* tx(
          Effect.gen(function* () {
            const current = yield* visible(actor, id)
            if (patch.plan !== undefined && patch.plan !== current.plan && !isAdmin(actor)) {
              return yield* new PermissionDenied({
                message: "changing the plan needs workspaces:admin",
                scope: "workspaces:admin",
              })
            }
            const wanted: UpdateWorkspace =
              patch.name === undefined ? patch : { ...patch, name: patch.name.normalize("NFC") }
            const changes = (Object.keys(wanted) as Array<keyof UpdateWorkspace>).filter(
              (k) => wanted[k] !== current[k],
            )
            if (changes.length === 0) return current
            const next: Workspace = { ...current, ...wanted, updatedAt: yield* nowIso }
            yield* repo.update(next)
            yield* audit.append({ ...actor, workspaceId: id }, [
              {
                type: "workspace.updated",
                data: { workspaceId: id, changes, ...Object.fromEntries(changes.map((k) => [k, next[k]])) },
              },
            ])
            return next
          }),
        ).pipe(whenChainClosed(() => new WorkspaceNotFound({ workspaceId: id })))
        // This instance's next guard call sees a new guardDefault at once, not when the notification is back.
        if (patch.guardDefault !== undefined) yield* guardState.forget(id)
        return updated
      })

      const remove = Effect.fn("WorkspaceService.remove")(function* (actor: Actor, id: string) {
        // Deleted by another request while this one waited for its chain (ChainClosed): gone, as to the next request.
        return yield* tx(
          Effect.gen(function* () {
            const current = yield* visible(actor, id)
            if (current.id === actor.workspaceId) {
              return yield* new StateConflict({
                code: "WORKSPACE_IN_USE",
                message: "a credential cannot delete its own workspace; use a key of another workspace",
              })
            }
            const at = yield* nowIso
            const inTarget: Actor = { ...actor, workspaceId: id }
            // Its agents end with it: nothing may go on acting, or be vouched for (a public badge), for a workspace
            // nobody can see any more. Each recorded as a DELETE /agents/:id would, before the deletion. The agents are
            // locked first, as an agent's deregistration locks its agent first, so that one waits for the other
            // instead of each holding what the other needs next (keys, chain head).
            const ended = yield* agentRepo.deregisterAll(id, at)
            const revoked = yield* keyRepo.revokeAll(id, null, "workspace_deleted", at)
            yield* audit.append(inTarget, [
              ...ended.map((a) => ({
                type: "agent.deregistered",
                agentId: a.id,
                data: { agentId: a.id, agentName: a.name },
              })),
              { type: "workspace.deleted", data: { workspaceId: id, name: current.name, revokedKeys: revoked.length } },
            ])
            yield* repo.markDeleted(id, at)
            return current
          }),
        ).pipe(whenChainClosed(() => new WorkspaceNotFound({ workspaceId: id })))
      })

      return WorkspaceService.of({
        create,
        list,
        get: (actor, id) => visible(actor, id),
        update,
        remove,
        isEmpty: repo.isEmpty,
      })
    }),
  )
}
