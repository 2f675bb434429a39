import { Context, Effect, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { type Actor, systemActor } from "../auth/Actor.ts"
import { newId } from "../shared/ids.ts"
import type { Verification } from "./Event.ts"
import { EventAppender } from "./EventAppender.ts"

/** Who found a chain's state: `POST /events/verify`, the 6-hourly verification, the checkpointer, or a compliance report. */
export type ChainCheckTrigger = "api" | "scheduled" | "checkpoint" | "report"

/**
 * Records what a check of a workspace's chain found (`chain_verifications`) and raises a broken chain: an
 * error-level log line on every finding (the operator's alert), and a `chain.invalid` event in the trail
 * when the chain was not already known to be broken, so that a checkpointer refusing every minute writes
 * one event, not one a minute.
 */
export class ChainAlarm extends Context.Service<
  ChainAlarm,
  {
    readonly record: (actor: Actor, trigger: ChainCheckTrigger, result: Verification) => Effect.Effect<void>
  }
>()("@agentgov/domain/audit/ChainAlarm") {
  static readonly layer = Layer.effect(
    ChainAlarm,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const appender = yield* EventAppender

      const record = Effect.fn("ChainAlarm.record")(function* (
        actor: Actor,
        trigger: ChainCheckTrigger,
        result: Verification,
      ) {
        const workspaceId = actor.workspaceId
        const [previous] = yield* sql<{ valid: boolean }>`SELECT valid FROM chain_verifications
            WHERE workspace_id = ${workspaceId} ORDER BY verified_at DESC, id DESC LIMIT 1`
        yield* sql`INSERT INTO chain_verifications (id, workspace_id, trigger, valid, checked, first_bad_sequence, reason, verified_at)
            VALUES (${newId("rpt")}, ${workspaceId}, ${trigger}, ${result.valid}, ${result.checked},
              ${result.firstBadSequence ?? null}, ${result.reason ?? null}, ${result.verifiedAt}::timestamptz)`
        if (result.valid) return
        yield* Effect.logError("audit chain broken", {
          workspaceId,
          trigger,
          firstBadSequence: result.firstBadSequence,
          reason: result.reason,
        })
        if (previous !== undefined && !previous.valid) return
        // A broken chain may refuse the append too (a row already at the head's next sequence): the finding is
        // recorded and logged all the same. Its own savepoint inside a caller's transaction keeps that usable.
        const appended = yield* Effect.exit(
          sql.withTransaction(
            appender.append({
              actor: systemActor(workspaceId, actor.environment, actor.scopes),
              events: [
                {
                  type: "chain.invalid",
                  data: {
                    trigger,
                    checked: result.checked,
                    firstBadSequence: result.firstBadSequence ?? result.checked + 1,
                    reason: result.reason ?? "",
                  },
                },
              ],
            }),
          ),
        )
        if (appended._tag === "Failure")
          yield* Effect.logError("could not append chain.invalid", { workspaceId, cause: String(appended.cause) })
      }, Effect.orDie)

      return ChainAlarm.of({ record })
    }),
  )
}
