import {
  Approval,
  ApprovalListQuery,
  ApprovalService,
  CreateApproval,
  DEFAULT_APPROVAL_TIMEOUT_SECONDS,
  DecideApproval,
  PageOf,
} from "@agentgov/domain"
import { Schema } from "effect"
import { defineOperation } from "../Operation.ts"
import { idAnd, idField } from "./common.ts"

const tag = "Approvals"

export const approvalOperations = [
  defineOperation({
    name: "approvals.create",
    method: "POST",
    path: "/approvals",
    scope: "approvals:write",
    tag,
    summary: "Request an approval",
    description: `Creates a pending approval for the agent's \`action\` with this \`context\` (the guard creates them for \`require_approval\` rules). Undecided after \`timeoutSeconds\` (default ${DEFAULT_APPROVAL_TIMEOUT_SECONDS}) it expires, which counts as denied. Once approved, a guard call with the same agent, action and context plus \`approvalId\` is allowed once. The \`action\` is checked as the guard checks it (no whitespace, control or invisible characters, Unicode NFC): an approval for an action the guard refuses could never be used. Emits \`approval.requested\`.`,
    successStatus: 201,
    errors: ["AGENT_NOT_FOUND", "AGENT_DEREGISTERED"],
    input: CreateApproval,
    output: Approval,
    handler: (input, actor) => ApprovalService.use((s) => s.create(actor, input)),
  }),
  defineOperation({
    name: "approvals.list",
    method: "GET",
    path: "/approvals",
    scope: "approvals:read",
    tag,
    summary: "List approvals",
    description:
      "Newest first; pending ones unless `status` says otherwise (`all` for every status). An approval undecided past `expiresAt` is listed as `expired`. An agent key sees its own agent's approvals.",
    paginated: true,
    input: ApprovalListQuery,
    output: PageOf(Approval),
    handler: (input, actor) => ApprovalService.use((s) => s.list(actor, input)),
  }),
  defineOperation({
    name: "approvals.get",
    method: "GET",
    path: "/approvals/:id",
    scope: "approvals:read",
    tag,
    summary: "Get an approval",
    description: "An agent waiting for a decision polls this (or listens for `approval.decided`).",
    errors: ["APPROVAL_NOT_FOUND"],
    input: Schema.Struct(idField),
    output: Approval,
    handler: (input, actor) => ApprovalService.use((s) => s.get(actor, input.id)),
  }),
  defineOperation({
    name: "approvals.decide",
    method: "POST",
    path: "/approvals/:id/decide",
    scope: "approvals:manage",
    tag,
    summary: "Approve or deny",
    description:
      "Decides a pending approval once; a decided or expired one is 409 `APPROVAL_NOT_PENDING`. When the approval names `approvers`, only those credentials may decide. Agent keys never decide. Deregistering an agent expires its pending approvals; one left pending by a deregistration before that rule is 409 `AGENT_DEREGISTERED`. Emits `approval.decided`.",
    errors: ["APPROVAL_NOT_FOUND", "APPROVAL_NOT_PENDING", "AGENT_DEREGISTERED"],
    input: idAnd(DecideApproval),
    output: Approval,
    handler: ({ id, ...input }, actor) => ApprovalService.use((s) => s.decide(actor, id, input)),
  }),
]
