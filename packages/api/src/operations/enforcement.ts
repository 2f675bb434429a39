import {
  AppealEnforcement,
  CreateEnforcement,
  Enforcement,
  EnforcementListQuery,
  EnforcementService,
  PageOf,
  UpdateEnforcement,
} from "@agentgov/domain"
import { Schema } from "effect"
import { defineOperation } from "../Operation.ts"
import { idAnd, idField } from "./common.ts"

const tag = "Enforcement"

export const enforcementOperations = [
  defineOperation({
    name: "enforcement.create",
    method: "POST",
    path: "/enforcement",
    scope: "enforcement:write",
    tag,
    summary: "Issue an enforcement",
    description:
      "A `suspension` suspends the agent (`agent.suspended`) until it expires or is overturned; a `revocation` also revokes every API key of the agent at once, on every instance, and does not expire. A `throttle` takes `limitPerMinute`. `expiresAt` or `durationSeconds` end it; neither: until resolved. Emits `enforcement.created`.",
    successStatus: 201,
    errors: ["AGENT_NOT_FOUND", "AGENT_DEREGISTERED"],
    input: CreateEnforcement,
    output: Enforcement,
    handler: (input, actor) => EnforcementService.use((s) => s.create(actor, input)),
  }),
  defineOperation({
    name: "enforcement.list",
    method: "GET",
    path: "/enforcement",
    scope: "enforcement:read",
    tag,
    summary: "List enforcements",
    description:
      "Newest first; those in force unless `status` says otherwise (`all` for every status). One in force past `expiresAt` is listed as `expired`. An agent key sees its own agent's.",
    paginated: true,
    input: EnforcementListQuery,
    output: PageOf(Enforcement),
    handler: (input, actor) => EnforcementService.use((s) => s.list(actor, input)),
  }),
  defineOperation({
    name: "enforcement.get",
    method: "GET",
    path: "/enforcement/:id",
    scope: "enforcement:read",
    tag,
    summary: "Get an enforcement",
    errors: ["ENFORCEMENT_NOT_FOUND"],
    input: Schema.Struct(idField),
    output: Enforcement,
    handler: (input, actor) => EnforcementService.use((s) => s.get(actor, input.id)),
  }),
  defineOperation({
    name: "enforcement.update",
    method: "PATCH",
    path: "/enforcement/:id",
    scope: "enforcement:write",
    tag,
    summary: "Update or resolve an enforcement",
    description:
      "Either change `reason` and the expiry (`expiresAt`, null for none, or `durationSeconds` from now) of one in force (`enforcement.updated`), or resolve it with `resolution` and an optional `note` (`enforcement.resolved`): `upheld` keeps it in force until its expiry, `overturned` lifts it and reinstates the agent unless another suspension is in force. An upheld enforcement can later be overturned; nothing else reopens.",
    errors: ["ENFORCEMENT_NOT_FOUND", "ENFORCEMENT_CLOSED"],
    input: idAnd(UpdateEnforcement),
    output: Enforcement,
    handler: ({ id, ...patch }, actor) => EnforcementService.use((s) => s.update(actor, id, patch)),
  }),
  defineOperation({
    name: "enforcement.appeal",
    method: "POST",
    path: "/enforcement/:id/appeal",
    scope: "enforcement:read",
    tag,
    summary: "Appeal an enforcement",
    description:
      "The agent appeals its own active enforcement with its agent key (`enforcement:read`; a suspended agent's keys still read and appeal); a workspace credential also needs `enforcement:write`. Once per enforcement. Emits `enforcement.appealed`.",
    errors: ["ENFORCEMENT_NOT_FOUND", "ENFORCEMENT_ALREADY_APPEALED", "ENFORCEMENT_CLOSED"],
    input: idAnd(AppealEnforcement),
    output: Enforcement,
    handler: ({ id, ...input }, actor) => EnforcementService.use((s) => s.appeal(actor, id, input)),
  }),
]
