import {
  GuardRequestInput,
  GuardResult,
  GuardService,
  PageOf,
  Policy,
  PolicyDocument,
  PolicyService,
  PolicySimulation,
  PolicySimulationInput,
  PolicyVersion,
  UpdatePolicy,
} from "@agentgov/domain"
import { Effect, Schema } from "effect"
import { defineOperation, type FastHandler } from "../Operation.ts"
import { idAnd, idField, pageFields } from "./common.ts"

const tag = "Policies"

const guardDescription =
  "Decision D6. Any matching enforced `deny` wins; else any `require_approval` (an approval is created and its id " +
  "returned); else any `allow`; else the workspace's `guardDefault` (`NO_MATCHING_POLICY`). `monitor` policies never " +
  "change the decision; their matches are reported and recorded. A condition that cannot be evaluated counts as " +
  "matched for `deny` and `require_approval` rules (fail closed). A suspended or deregistered agent is denied " +
  "(`AGENT_SUSPENDED`, `AGENT_DEREGISTERED`). With `approvalId`, an approved approval bound to the same agent, " +
  "action and context lets exactly one call through. Records `policy.evaluated`, and `policy.denied` / " +
  "`policy.violated` when they apply; `eventId` is the `policy.evaluated` event. Under an `Idempotency-Key` " +
  "a retry answers the first decision again and records nothing (the SDK sends one with every call). A call whose " +
  "policies could cost more than a fraction of a millisecond to evaluate waits its turn behind other workspaces' " +
  "(one such evaluation per event-loop turn, workspaces in turn); past 64 waiting in a workspace it is a 429 " +
  "`RATE_LIMITED` with `Retry-After`, nothing evaluated or recorded."

const invalidNote =
  "A stored policy whose document no longer validates (a stricter check after an upgrade, an edited row) carries " +
  "`invalid` (its first issue): the guard then denies every action of the agents it targets, `CONDITION_ERROR`, " +
  "until it is updated or deleted; in `monitor` mode it only reports."

const guard = <const N extends string>(name: N, path: string, summary: string) =>
  defineOperation({
    name,
    method: "POST",
    path,
    scope: "guard:evaluate",
    tag,
    summary,
    description: guardDescription,
    errors: ["AGENT_NOT_FOUND"],
    input: GuardRequestInput,
    output: GuardResult,
    // The key is claimed with the decision's events, in their group commit (GuardService.evaluate).
    ownsIdempotency: true,
    handler: (input, actor, { idempotency }) => GuardService.use((s) => s.evaluate(actor, input, idempotency)),
    fast: GuardService.use((s) =>
      Effect.succeed<FastHandler<GuardRequestInput, GuardResult>>((input, actor, { idempotency }) =>
        s.evaluateNow(actor, input, idempotency),
      ),
    ),
  })

export const policyOperations = [
  guard("guard.evaluate", "/guard", "Ask the guard whether an agent may take an action"),
  guard("policies.evaluate", "/policies/evaluate", "Evaluate an action against the policies (same as POST /guard)"),
  defineOperation({
    name: "policies.simulate",
    method: "POST",
    path: "/policies/simulate",
    scope: "policies:read",
    tag,
    summary: "What the saved policies would decide, recording nothing",
    description:
      "The guard's decision (D6) for this agent, action and context under the workspace's saved policies, with " +
      "nothing done: no event is recorded, no approval is created or spent, no automatic enforcement is issued, " +
      "nothing counts toward the agent's trust score, and no rate condition or throttle is counted (a rate " +
      "condition sees no earlier call, and a throttle in force is not applied). For trying a policy out: " +
      "`POST /guard` and `POST /policies/evaluate` act as the agent and record the decision. A simulation whose " +
      "policies could cost more than a fraction of a millisecond waits its turn like a guard call; past 64 waiting " +
      "in a workspace it is a 429 `RATE_LIMITED` with `Retry-After`.",
    errors: ["AGENT_NOT_FOUND"],
    input: PolicySimulationInput,
    output: PolicySimulation,
    handler: (input, actor) => GuardService.use((s) => s.simulate(actor, input)),
  }),
  defineOperation({
    name: "policies.create",
    method: "POST",
    path: "/policies",
    scope: "policies:write",
    tag,
    summary: "Create a policy",
    description:
      "The document is validated and compiled when saved; an invalid one is a 422 whose `details.field` names the " +
      "exact field (`rules[2].when.all[0].op`). Takes effect on every instance within a second. Emits `policy.created`.",
    successStatus: 201,
    errors: ["POLICY_NAME_TAKEN"],
    input: PolicyDocument,
    output: Policy,
    handler: (input, actor) => PolicyService.use((s) => s.create(actor, input as unknown as Record<string, unknown>)),
  }),
  defineOperation({
    name: "policies.list",
    method: "GET",
    path: "/policies",
    scope: "policies:read",
    tag,
    summary: "List policies",
    description: `Newest first. ${invalidNote}`,
    paginated: true,
    input: Schema.Struct({ ...pageFields, enabled: Schema.optionalKey(Schema.Boolean) }),
    output: PageOf(Policy),
    handler: (input, actor) => PolicyService.use((s) => s.list(actor, input)),
  }),
  defineOperation({
    name: "policies.get",
    method: "GET",
    path: "/policies/:id",
    scope: "policies:read",
    tag,
    summary: "Get a policy",
    description: invalidNote,
    errors: ["POLICY_NOT_FOUND"],
    input: Schema.Struct(idField),
    output: Policy,
    handler: (input, actor) => PolicyService.use((s) => s.get(actor, input.id)),
  }),
  defineOperation({
    name: "policies.versions.list",
    method: "GET",
    path: "/policies/:id/versions",
    scope: "policies:read",
    tag,
    summary: "List a policy's versions",
    description:
      "Every stored version of the policy, newest first, each with its document as saved then: what the dashboard's history compares.",
    paginated: true,
    errors: ["POLICY_NOT_FOUND"],
    input: Schema.Struct({ ...idField, ...pageFields }),
    output: PageOf(PolicyVersion),
    handler: ({ id, ...page }, actor) => PolicyService.use((s) => s.versions(actor, id, page)),
  }),
  defineOperation({
    name: "policies.update",
    method: "PATCH",
    path: "/policies/:id",
    scope: "policies:write",
    tag,
    summary: "Update a policy",
    description:
      "Any of the document's fields (`description` and `target` take null to remove them). The merged document is " +
      "validated like a new one, saved as the next `version`, and emits `policy.updated` naming both versions. " +
      "With `expectedVersion`, a policy saved meanwhile at another version is 409 `VERSION_CONFLICT` and nothing " +
      "changes (an editor's stale copy never saves over someone else's change).",
    errors: ["POLICY_NOT_FOUND", "POLICY_NAME_TAKEN", "VERSION_CONFLICT"],
    input: idAnd(UpdatePolicy),
    output: Policy,
    handler: ({ id, ...patch }, actor) => PolicyService.use((s) => s.update(actor, id, patch)),
  }),
  defineOperation({
    name: "policies.delete",
    method: "DELETE",
    path: "/policies/:id",
    scope: "policies:write",
    tag,
    summary: "Delete a policy",
    description:
      "It stops applying on every instance within a second; its versions stay on record. Emits `policy.deleted`.",
    errors: ["POLICY_NOT_FOUND"],
    input: Schema.Struct(idField),
    output: Policy,
    handler: (input, actor) => PolicyService.use((s) => s.remove(actor, input.id)),
  }),
]
