import { Cause, Effect, Schema } from "effect"

export class EventNotFound extends Schema.TaggedError<EventNotFound>()("EventNotFound", { eventId: Schema.String }) {}

/**
 * An append to the chain of a deleted workspace, refused: `workspace.deleted` stays its last event. Raised as a
 * defect by AuditLog (whose writers cannot all name it), and told apart where a caller answers it
 * (`whenChainClosed`): the request raced the deletion, and wrote nothing.
 */
export class ChainClosed extends Schema.TaggedError<ChainClosed>()("ChainClosed", { workspaceId: Schema.String }) {}

const closedIn = (cause: Cause.Cause<unknown>) =>
  cause.reasons.some((r) => Cause.isDieReason(r) && r.defect instanceof ChainClosed)

/** Fails with `refusal` where `effect` died because its workspace was deleted under it (ChainClosed). */
export const whenChainClosed =
  <E2>(refusal: () => E2) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | E2, R> =>
    Effect.catchCauseIf(effect, closedIn, () => Effect.fail(refusal()))
