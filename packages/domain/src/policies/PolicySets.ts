import { Database } from "@agentgov/db"
import { Context, Effect, Exit, Layer } from "effect"
import { backgroundReloads, type Refreshable, refreshAhead } from "../shared/refreshAhead.ts"
import { WorkspaceRepo } from "../workspaces/WorkspaceRepo.ts"
import { type CompiledPolicySet, compilePolicies, type PolicyCompilation } from "./engine/index.ts"
import { POLICIES_CHANNEL, PolicyRepo } from "./PolicyRepo.ts"

export interface WorkspaceGuardState {
  readonly set: CompiledPolicySet
  readonly guardDefault: "allow" | "deny"
}

/**
 * Safety net only: a dropped LISTEN connection drops every compiled set (when
 * it drops and again when it is back); anything else missed heals within this. Changes normally reach every instance at their commit.
 */
const MAX_AGE_MS = 30_000
const MAX_WORKSPACES = 10_000

/**
 * Each workspace's policies compiled into an action index, with its
 * guardDefault: built on first use and again after every change announced on
 * the policies channel (a policy saved or deleted, the workspace updated), on
 * every instance. Evaluation never parses or compiles.
 */
export class PolicySets extends Context.Service<
  PolicySets,
  {
    readonly get: (workspaceId: string) => Effect.Effect<WorkspaceGuardState>
    /** The compiled state when this instance holds a current one; `get` loads it otherwise. */
    readonly peek: (workspaceId: string) => WorkspaceGuardState | undefined
    /**
     * The compilations of the workspace's policy versions this instance made last (empty when none): what a
     * save's budget check reuses rather than compiling every stored policy again.
     */
    readonly compilations: (workspaceId: string) => ReadonlyMap<string, PolicyCompilation>
    /**
     * Drops this instance's copy at once: the writer's own instance calls it after committing a change, so
     * that its next call does not depend on the notification's arrival (the others rely on it).
     */
    readonly forget: (workspaceId: string) => Effect.Effect<void>
  }
>()("@agentgov/domain/policies/PolicySets") {
  static readonly layer = Layer.effect(
    PolicySets,
    Effect.gen(function* () {
      const repo = yield* PolicyRepo
      const workspaces = yield* WorkspaceRepo
      const db = yield* Database
      const sets = new Map<string, Refreshable & { readonly state: WorkspaceGuardState }>()
      /**
       * The last compilation of each workspace's policies, kept when its set is dropped: the next load compiles only
       * the policy versions it has not seen (CEL is parsed and checked once per version, not at every load).
       */
      const compiledLast = new Map<string, ReadonlyMap<string, PolicyCompilation>>()
      /** Loads under way, by workspace and generation: calls that miss together share one load. */
      const loading = new Map<
        string,
        { readonly generation: number; readonly epoch: number; readonly done: Promise<WorkspaceGuardState | undefined> }
      >()
      // Bumped by every announcement: a load that started before one must not be cached after it.
      const generations = new Map<string, number>()

      const forget = (workspaceId: string) => {
        generations.set(workspaceId, (generations.get(workspaceId) ?? 0) + 1)
        sets.delete(workspaceId)
      }
      // Notifications may have been missed (the listening connection dropped): no compiled set can be trusted.
      let epoch = 0
      const forgetAll = () => {
        epoch += 1
        sets.clear()
      }

      yield* Effect.acquireRelease(
        Effect.promise(() => db.listen(POLICIES_CHANNEL, forget, forgetAll)),
        (stop) => Effect.promise(() => stop()),
      )

      /** Policy versions whose invalid document was logged: once each, not at every load. */
      const reported = new Set<string>()
      const reportInvalid = (workspaceId: string, set: CompiledPolicySet) =>
        Effect.forEach(
          set.policies,
          (p) => {
            const key = `${p.id}\u0000${p.version}`
            if (p.invalid === undefined || reported.has(key)) return Effect.void
            if (reported.size >= MAX_WORKSPACES) reported.clear()
            reported.add(key)
            return Effect.logWarning("a stored policy no longer validates; the guard denies within its target", {
              workspaceId,
              policyId: p.id,
              version: p.version,
              mode: p.mode,
              field: p.invalid.field,
              issue: p.invalid.issue,
            })
          },
          { discard: true },
        )

      const load = (workspaceId: string) =>
        Effect.gen(function* () {
          const generation = generations.get(workspaceId) ?? 0
          const startedIn = epoch
          // The copy's age counts from before the read, as the guard's other copies do.
          const at = Date.now()
          const [policies, workspace] = yield* Effect.all([repo.all(workspaceId), workspaces.find(workspaceId)], {
            concurrency: 2,
          })
          const state: WorkspaceGuardState = {
            set: compilePolicies(
              policies.map((p) => ({ id: p.id, version: p.version, document: p.document })),
              compiledLast.get(workspaceId),
            ),
            guardDefault: workspace?.guardDefault ?? "allow",
          }
          if (!compiledLast.has(workspaceId) && compiledLast.size >= MAX_WORKSPACES)
            compiledLast.delete(compiledLast.keys().next().value!)
          compiledLast.set(workspaceId, state.set.compilations)
          yield* reportInvalid(workspaceId, state.set)
          if ((generations.get(workspaceId) ?? 0) === generation && epoch === startedIn) {
            if (sets.size >= MAX_WORKSPACES) sets.delete(sets.keys().next().value!)
            sets.set(workspaceId, { state, at })
          }
          return state
        })

      // A set reloaded ahead of its expiry (refreshAhead.ts) is loaded in the background, as a missing one is.
      const background = backgroundReloads(yield* Effect.context<never>())
      const peek = (workspaceId: string) => {
        const hit = sets.get(workspaceId)
        const now = Date.now()
        if (!hit || now - hit.at >= MAX_AGE_MS) return undefined
        refreshAhead(hit, now, MAX_AGE_MS, () => background("a policy set", shared(workspaceId)))
        return hit.state
      }

      /**
       * The load for this workspace's current generation: the one under way, which this call waits for, or a new
       * one that calls missing meanwhile join (a refresh of a large set is then compiled once, not once per call).
       * A load that did not complete (its caller was interrupted) leaves its waiters to load on their own.
       */
      const shared = (workspaceId: string): Effect.Effect<WorkspaceGuardState> => {
        const generation = generations.get(workspaceId) ?? 0
        const running = loading.get(workspaceId)
        if (running && running.generation === generation && running.epoch === epoch)
          return Effect.flatMap(
            Effect.promise(() => running.done),
            (state) => (state ? Effect.succeed(state) : load(workspaceId)),
          )
        let settle!: (state: WorkspaceGuardState | undefined) => void
        const entry = { generation, epoch, done: new Promise<WorkspaceGuardState | undefined>((r) => (settle = r)) }
        if (loading.size >= MAX_WORKSPACES) loading.clear()
        loading.set(workspaceId, entry)
        return load(workspaceId).pipe(
          Effect.onExit((exit) =>
            Effect.sync(() => {
              if (loading.get(workspaceId) === entry) loading.delete(workspaceId)
              settle(Exit.isSuccess(exit) ? exit.value : undefined)
            }),
          ),
        )
      }

      return PolicySets.of({
        get: (workspaceId) =>
          Effect.suspend(() => {
            const state = peek(workspaceId)
            return state ? Effect.succeed(state) : shared(workspaceId)
          }),
        compilations: (workspaceId) => compiledLast.get(workspaceId) ?? new Map(),
        peek,
        forget: (workspaceId) => Effect.sync(() => forget(workspaceId)),
      })
    }),
  )
}
