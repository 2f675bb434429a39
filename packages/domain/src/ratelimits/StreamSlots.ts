import { Context, Effect, Layer } from "effect"
import type { Actor } from "../auth/Actor.ts"
import type { Plan } from "../workspaces/Workspace.ts"
import { WorkspaceRepo } from "../workspaces/WorkspaceRepo.ts"

/**
 * Concurrent event streams: per workspace by its plan, per API key (with its SDK tokens) on any plan, and in the
 * whole process, whichever workspaces hold them (each open stream may buffer up to 1 MiB for a slow client).
 */
export interface StreamLimitConfig {
  readonly plans: Readonly<Record<Plan, number>>
  readonly key: number
  readonly process: number
}

export const DEFAULT_STREAM_LIMITS: StreamLimitConfig = {
  plans: { free: 20, pro: 200, enterprise: 2_000 },
  key: 20,
  process: 5_000,
}

/** The operator's stream limits; unset, the defaults hold. */
export const StreamLimitSettings = Context.Reference<StreamLimitConfig>(
  "@agentgov/domain/ratelimits/StreamLimitSettings",
  { defaultValue: () => DEFAULT_STREAM_LIMITS },
)

/** The count of every stream of the process (no workspace or key id has this form). */
const PROCESS = "process"

export type StreamSlot =
  | { readonly ok: true; readonly release: () => void }
  | { readonly ok: false; readonly limit: number; readonly per: "workspace" | "key" | "process"; readonly plan: Plan }

/**
 * Open event streams counted in this process, against the limits of the
 * credential's key and workspace, and the process's own. A slot is held until
 * released (the stream closed); counts live in memory, so each instance applies
 * the limits to the streams it serves and a dead process holds none.
 */
export class StreamSlots extends Context.Service<
  StreamSlots,
  { readonly acquire: (actor: Actor) => Effect.Effect<StreamSlot> }
>()("@agentgov/domain/ratelimits/StreamSlots") {
  static readonly layer = Layer.effect(
    StreamSlots,
    Effect.gen(function* () {
      const config = yield* StreamLimitSettings
      const workspaces = yield* WorkspaceRepo
      const open = new Map<string, number>()
      const countOf = (name: string) => open.get(name) ?? 0
      const add = (name: string, n: number) => {
        const next = countOf(name) + n
        if (next === 0) open.delete(name)
        else open.set(name, next)
      }

      const acquire = (actor: Actor) =>
        Effect.map(workspaces.find(actor.workspaceId), (w): StreamSlot => {
          const plan = w?.plan ?? "free"
          // Checked and taken in one synchronous step: concurrent opens cannot both take the last slot.
          const ws = `ws:${actor.workspaceId}`
          const key = `key:${actor.credential.id}`
          if (countOf(ws) >= config.plans[plan]) return { ok: false, limit: config.plans[plan], per: "workspace", plan }
          if (countOf(key) >= config.key) return { ok: false, limit: config.key, per: "key", plan }
          if (countOf(PROCESS) >= config.process) return { ok: false, limit: config.process, per: "process", plan }
          add(ws, 1)
          add(key, 1)
          add(PROCESS, 1)
          let released = false
          return {
            ok: true,
            release: () => {
              if (released) return
              released = true
              add(ws, -1)
              add(key, -1)
              add(PROCESS, -1)
            },
          }
        })

      return StreamSlots.of({ acquire })
    }),
  )
}
