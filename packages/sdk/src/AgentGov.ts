import { type FetchLike, HttpClient } from "./core/HttpClient.ts"
import { Agents } from "./resources/Agents.ts"
import { ApiKeys } from "./resources/ApiKeys.ts"
import { Approvals } from "./resources/Approvals.ts"
import { Compliance } from "./resources/Compliance.ts"
import { Content } from "./resources/Content.ts"
import { Enforcements } from "./resources/Enforcements.ts"
import { Events } from "./resources/Events.ts"
import { OAuth } from "./resources/OAuth.ts"
import { Overview } from "./resources/Overview.ts"
import { Invitations, Members, Users } from "./resources/People.ts"
import { Guard, Policies } from "./resources/Policies.ts"
import { Tokens } from "./resources/Tokens.ts"
import { Trust } from "./resources/Trust.ts"
import { Webhooks } from "./resources/Webhooks.ts"
import { Workspaces } from "./resources/Workspaces.ts"
import { AgentRuntime, type AgentRuntimeOptions } from "./runtime/AgentRuntime.ts"

/**
 * The SDK's version, sent nowhere; for your logs.
 *
 * @example
 * ```ts
 * import { VERSION } from "@agentgov/sdk"
 *
 * console.log(`@agentgov/sdk ${VERSION}`)
 * ```
 */
export const VERSION = "0.1.0"

/**
 * Options of {@link AgentGov}.
 *
 * @example
 * ```ts
 * import type { AgentGovOptions } from "@agentgov/sdk"
 *
 * const options: AgentGovOptions = {
 *   apiKey: process.env.AGENTGOV_API_KEY!,
 *   baseUrl: process.env.AGENTGOV_URL ?? "http://127.0.0.1:3000",
 *   timeoutMs: 10_000,
 *   maxRetries: 3,
 * }
 * ```
 */
export interface AgentGovOptions {
  /** A workspace key (`svc_ws_…`) or an agent key (`svc_ag_sk_…`). Keep it out of browsers. */
  readonly apiKey: string
  /** The service's address, e.g. `https://agentgov.example.com` (a trailing `/api/v1` is fine too). */
  readonly baseUrl: string
  /** Time allowed for each attempt of a request, in ms. Default 30,000. */
  readonly timeoutMs?: number
  /**
   * Retries after the first attempt, for requests that are safe to repeat: GET, DELETE, and
   * POSTs (every POST carries an Idempotency-Key). Network errors, time-outs, 408, 429, 5xx.
   * Default 2.
   */
  readonly maxRetries?: number
  /**
   * The longest `Retry-After` (429, 503) the SDK waits for before retrying; a longer one
   * rejects at once with `retryAfter` set, so you decide. Default 60,000 ms.
   */
  readonly maxRetryAfterMs?: number
  /** Headers added to every request (e.g. for a gateway in front of the service). */
  readonly headers?: Readonly<Record<string, string>>
  /**
   * The W3C trace context of the caller's active span, read at every request and sent as its
   * `traceparent` (and `tracestate`) headers, so the service's spans join the caller's trace. With
   * OpenTelemetry: `traceContext: () => { const c = {}; propagation.inject(context.active(), c); return c }`
   * (`context`, `propagation` from `@opentelemetry/api`). Default: none sent.
   */
  readonly traceContext?: () => Readonly<Record<string, string>> | undefined
  /** A `fetch` to use instead of the global one. */
  readonly fetch?: FetchLike
}

const normaliseBaseUrl = (raw: string): string => {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw new TypeError(`baseUrl must be an absolute http(s) URL, got ${JSON.stringify(raw)}`)
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new TypeError(`baseUrl must be an http(s) URL, got ${JSON.stringify(raw)}`)
  }
  const path = url.pathname.replace(/\/+$/, "").replace(/\/(?:api\/)?v1$/, "")
  return `${url.origin}${path}`
}

/**
 * The agentgov client: one getter per resource of the REST API, and `agent()` for the agent
 * runtime (guard, track, approvals). Every call returns typed records, rejects with
 * {@link AgentGovError}, retries what is safe to retry, and lists are async-iterable.
 *
 * @example
 * ```ts
 * import { AgentGov } from "@agentgov/sdk"
 *
 * const agentgov = new AgentGov({ apiKey: process.env.AGENTGOV_API_KEY!, baseUrl: "http://127.0.0.1:3000" })
 *
 * const bot = await agentgov.agents.create({ name: "billing-bot" })
 * for await (const agent of agentgov.agents.list()) console.log(agent.name)
 *
 * const agent = agentgov.agent({ agentId: bot.id })
 * const decision = await agent.guard("invoice.send", { amount: 120 })
 * ```
 */
export class AgentGov {
  readonly workspaces: Workspaces
  readonly agents: Agents
  readonly apiKeys: ApiKeys
  readonly tokens: Tokens
  readonly events: Events
  readonly overview: Overview
  readonly policies: Policies
  readonly guard: Guard
  readonly approvals: Approvals
  readonly enforcement: Enforcements
  readonly trust: Trust
  readonly webhooks: Webhooks
  readonly compliance: Compliance
  readonly content: Content
  readonly users: Users
  readonly members: Members
  readonly invitations: Invitations
  readonly oauth: OAuth
  private readonly http: HttpClient

  constructor(options: AgentGovOptions) {
    if (typeof options?.apiKey !== "string" || options.apiKey.trim() === "") {
      throw new TypeError("apiKey is required (a workspace key svc_ws_… or an agent key svc_ag_sk_…)")
    }
    const timeoutMs = options.timeoutMs ?? 30_000
    const maxRetries = options.maxRetries ?? 2
    if (!(timeoutMs > 0)) throw new RangeError("timeoutMs must be positive")
    if (!Number.isInteger(maxRetries) || maxRetries < 0) throw new RangeError("maxRetries must be an integer ≥ 0")
    const fetchImpl: FetchLike = options.fetch ?? ((input, init) => globalThis.fetch(input, init))
    this.http = new HttpClient({
      apiKey: options.apiKey,
      baseUrl: normaliseBaseUrl(options.baseUrl),
      timeoutMs,
      maxRetries,
      fetch: fetchImpl,
      headers: { ...options.headers },
      ...(options.traceContext ? { traceContext: options.traceContext } : {}),
      retryInitialDelayMs: 500,
      retryMaxDelayMs: 8_000,
      maxRetryAfterMs: options.maxRetryAfterMs ?? 60_000,
    })
    this.workspaces = new Workspaces(this.http)
    this.agents = new Agents(this.http)
    this.apiKeys = new ApiKeys(this.http)
    this.tokens = new Tokens(this.http)
    this.events = new Events(this.http)
    this.overview = new Overview(this.http)
    this.policies = new Policies(this.http)
    this.guard = new Guard(this.http)
    this.approvals = new Approvals(this.http)
    this.enforcement = new Enforcements(this.http)
    this.trust = new Trust(this.http)
    this.webhooks = new Webhooks(this.http)
    this.users = new Users(this.http)
    this.members = new Members(this.http)
    this.invitations = new Invitations(this.http)
    this.oauth = new OAuth(this.http)
    this.compliance = new Compliance(this.http)
    this.content = new Content(this.http)
  }

  /**
   * The agent runtime for one agent: `guard`, `track`, `waitForApproval`, `governed`. It talks
   * with short-lived SDK tokens exchanged for this client's key (shared by every runtime of the
   * client). With a workspace key, pass `agentId`; an agent key implies its agent.
   *
   * @example
   * ```ts
   * import { AgentGov } from "@agentgov/sdk"
   *
   * const agentgov = new AgentGov({ apiKey: process.env.AGENTGOV_API_KEY!, baseUrl: process.env.AGENTGOV_URL! })
   * const agent = agentgov.agent({ onUnavailable: "deny" })
   * const d = await agent.guard("db.query", { table: "users" })
   * ```
   */
  agent(options: AgentRuntimeOptions = {}): AgentRuntime {
    return new AgentRuntime(this.http, options)
  }

  /**
   * How many times an SDK token was exchanged for the key so far (each lives 15 minutes; the
   * runtime refreshes ahead of expiry). For monitoring.
   *
   * @example
   * ```ts
   * console.log(agentgov.tokenExchanges)
   * ```
   */
  get tokenExchanges(): number {
    return this.http.tokens.exchanges
  }
}
