import type { Operation } from "./Operation.ts"
import { agentOperations } from "./operations/agents.ts"
import { apiKeyOperations } from "./operations/apikeys.ts"
import { approvalOperations } from "./operations/approvals.ts"
import { complianceOperations } from "./operations/compliance.ts"
import { contentOperations } from "./operations/content.ts"
import { enforcementOperations } from "./operations/enforcement.ts"
import { eventOperations } from "./operations/events.ts"
import { oauthOperations } from "./operations/oauth.ts"
import { overviewOperations } from "./operations/overview.ts"
import { peopleOperations } from "./operations/people.ts"
import { policyOperations } from "./operations/policies.ts"
import { tokenOperations } from "./operations/tokens.ts"
import { trustOperations } from "./operations/trust.ts"
import { webhookOperations } from "./operations/webhooks.ts"
import { workspaceOperations } from "./operations/workspaces.ts"

/** Every operation of the API, in the order the reference lists them, each with its own type. */
export const definedOperations = [
  ...workspaceOperations,
  ...peopleOperations,
  ...oauthOperations,
  ...agentOperations,
  ...apiKeyOperations,
  ...tokenOperations,
  ...eventOperations,
  ...overviewOperations,
  ...policyOperations,
  ...enforcementOperations,
  ...approvalOperations,
  ...trustOperations,
  ...webhookOperations,
  ...complianceOperations,
  ...contentOperations,
] as const

/** One of them, typed: what the tRPC router's type is built from. */
export type AnyDefinedOperation = (typeof definedOperations)[number]

export const operations: ReadonlyArray<Operation> = definedOperations
