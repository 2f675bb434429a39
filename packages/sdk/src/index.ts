/**
 * `@agentgov/sdk`: the agent SDK of agentgov.
 *
 * - `new AgentGov({ apiKey, baseUrl })`: the REST API, one getter per resource.
 * - `agentgov.agent()`: guard actions, track events, wait for approvals, govern functions.
 * - `@agentgov/sdk/webhooks`: verify signed webhook deliveries.
 * - `@agentgov/sdk/ai`: govern the tools of a Vercel AI SDK agent.
 */

export { AgentGov, type AgentGovOptions, VERSION } from "./AgentGov.ts"
export type { FetchLike, RequestOptions } from "./core/HttpClient.ts"
export { Page, PageIterator } from "./core/pagination.ts"
export type { EventStreamParams } from "./core/sse.ts"
export {
  ActionDenied,
  AgentGovError,
  type AgentGovErrorInit,
  type ClientErrorCode,
  type ErrorDetails,
} from "./errors.ts"
export { Agents, AgentVersions } from "./resources/Agents.ts"
export { ApiKeys } from "./resources/ApiKeys.ts"
export { Approvals } from "./resources/Approvals.ts"
export { Certifications, Compliance, ComplianceReports } from "./resources/Compliance.ts"
export { Content, Takedowns } from "./resources/Content.ts"
export { Enforcements } from "./resources/Enforcements.ts"
export { Events } from "./resources/Events.ts"
export { OAuth, OAuthClients, OAuthGrants } from "./resources/OAuth.ts"
export { Overview } from "./resources/Overview.ts"
export { Invitations, Members, Users } from "./resources/People.ts"
export { Guard, Policies, PolicyVersions } from "./resources/Policies.ts"
export { Tokens } from "./resources/Tokens.ts"
export { Trust } from "./resources/Trust.ts"
export { Webhooks } from "./resources/Webhooks.ts"
export { Workspaces } from "./resources/Workspaces.ts"
export {
  AgentRuntime,
  type AgentRuntimeOptions,
  type GovernedOptions,
  type GuardOptions,
  type UnavailableInfo,
  type WaitForApprovalOptions,
} from "./runtime/AgentRuntime.ts"
export type { FallbackDecision, GuardDecision } from "./runtime/decision.ts"
export type { DroppedEvents, DropReason, EventQueueStats, TrackEvent } from "./runtime/EventQueue.ts"
export type * from "./types.ts"
