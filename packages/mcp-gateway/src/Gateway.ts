import { createHash, createHmac, randomBytes } from "node:crypto"
import type { AgentGov, AgentRuntime, GuardDecision, Policy } from "@agentgov/sdk"
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import {
  CallToolRequestSchema,
  type CallToolResult,
  ListToolsRequestSchema,
  McpError,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js"
import type { DefinitionStore } from "./DefinitionStore.ts"
import { GATEWAY_ERRORS, GatewayError, gatewayError, passOn } from "./errors.ts"
import { deniedOutright } from "./hiddenTools.ts"
import type { Sanitizer } from "./sanitizer.ts"
import { canonicalJson, definitionHash, type Finding, scanDefinition } from "./scanner.ts"
import { notSent, type Upstream } from "./Upstream.ts"

export interface GatewayOptions {
  /** The server's name in action names: `mcp.<server>.<tool>`. */
  readonly server: string
  readonly upstream: Upstream
  /** The client of the agent's key: reads the policies and the agent for `tools/list`. */
  readonly client: AgentGov
  /** The agent runtime of that key: guard calls, approvals, events. */
  readonly agent: AgentRuntime
  readonly sanitizer: Sanitizer
  readonly store: DefinitionStore
  /** How long a call waits for an approval before it is refused (default 50 s, under common clients' 60 s). */
  readonly approvalTimeoutMs?: number
  /** Hide tools the policies deny outright from `tools/list` (default true). */
  readonly hideDenied?: boolean
  /**
   * The HMAC key of `argumentsDigest` (see {@link argumentsDigest}); the CLI derives it from the agent key, so that
   * it outlives a restart. Absent: a random key of this process.
   */
  readonly digestKey?: Uint8Array
  readonly log?: (message: string) => void
}

interface KnownDefinition {
  readonly hash: string
  readonly findings: ReadonlyArray<Finding>
}

/** Events kept while the agent cannot be learnt; beyond, the oldest is dropped (and logged). */
const MAX_UNSENT = 1_000
/** Definitions remembered as flagged already: two full listings' worth. */
export const MAX_FLAGGED = 20_000
/** Approvals of calls given up on, remembered for the same call asked again; beyond, the oldest is forgotten. */
export const MAX_AWAITED = 1_000
/** How often events kept for that reason try again without a call to prompt them. */
const RETRY_UNSENT_MS = 5_000

type DeniedReason = "policy_denied" | "approval_denied" | "approval_timeout" | "service_unavailable"

/**
 * The key of {@link argumentsDigest} a gateway holding this agent key uses: every gateway of the key, and a restarted
 * one, digests a call alike (so a call asked again finds its pending approval); nobody without the key can.
 */
export const digestKeyOf = (apiKey: string): Uint8Array =>
  createHmac("sha256", "agentgov-mcp-gateway arguments digest").update(apiKey).digest()

/**
 * Hex HMAC-SHA-256 of a call's arguments as the server is sent them (keys sorted). The guard's context carries it
 * when the arguments it shows were redacted, so that the approval (bound to the context) is bound to the values
 * nobody sees: a call that differs only in a redacted secret asks for its own approval. Keyed, so that the trail
 * and the approvers, who see the digest, cannot test guesses of a short secret against it.
 */
export const argumentsDigest = (key: Uint8Array, args: Record<string, unknown>): string =>
  createHmac("sha256", key).update(canonicalJson(args)).digest("hex")

/** Base64url JSON of a JWT's payload. */
const tokenClaims = (token: string): Record<string, unknown> => {
  try {
    return JSON.parse(Buffer.from(token.split(".")[1] ?? "", "base64url").toString("utf8"))
  } catch {
    return {}
  }
}

/**
 * The governed proxy: what one MCP server's tools look like through agentgov. Every `tools/call` is a guard
 * call on `mcp.<server>.<tool>` with `{server, tool, arguments, argumentsDigest?, definition}` as context, and
 * nothing reaches the server without an `allow` (after an approval when one is required). Results pass the
 * sanitiser. Every outcome is reported as an event under the agent's key.
 */
export class Gateway {
  /** The tools of the server's latest listing, by the exact name it listed (MCP's names are case-sensitive). */
  private definitions = new Map<string, KnownDefinition>()
  /** The latest listing may be out of date: none yet, or the server restarted or said its list changed. */
  private stale = true
  /** The listing in progress: calls that need one share it. */
  private listing: Promise<Array<Tool>> | undefined
  /**
   * `tool\0hash` flagged already by this process: one event per definition seen, not per listing. At most
   * MAX_FLAGGED, the oldest forgotten first (a server that changes its definitions at every listing would otherwise
   * grow it without end; a forgotten one seen again is flagged again).
   */
  private readonly flagged = new Set<string>()
  private readonly servers = new Set<Server>()
  private agentIdPromise: Promise<string> | undefined
  /** Events reported before the agent was known (the service unreachable): sent once it is. */
  private readonly unsent: Array<{ type: string; data: Record<string, unknown> }> = []
  private retry: NodeJS.Timeout | undefined
  private readonly approvalTimeoutMs: number
  private readonly digestKey: Uint8Array
  /**
   * The approval of each call that stopped waiting for it undecided (the gateway's time-out, the client's
   * cancellation, the service out of reach), by action and context: the same call asked again carries it to the
   * guard, so that an approval granted after the gateway gave up lets that call through once, and one still
   * pending is waited for again. (Without it, an approval granted late was used by nothing: asked again, the
   * guard opens a new one.) At most MAX_AWAITED, the oldest forgotten first.
   */
  private readonly awaited = new Map<string, string>()

  private readonly options: GatewayOptions

  constructor(options: GatewayOptions) {
    this.options = options
    this.approvalTimeoutMs = options.approvalTimeoutMs ?? 50_000
    this.digestKey = options.digestKey ?? randomBytes(32)
  }

  /** A new MCP server speaking for this gateway: one per downstream connection (stdio) or HTTP request. */
  createServer(): Server {
    const server = new Server(
      { name: `agentgov-mcp-gateway (${this.options.server})`, version: "0.1.0" },
      { capabilities: { tools: { listChanged: true } } },
    )
    server.setRequestHandler(ListToolsRequestSchema, async () => {
      try {
        return { tools: await this.listTools() }
      } catch (error) {
        throw error instanceof GatewayError ? error : this.listingFailed(error)
      }
    })
    server.setRequestHandler(CallToolRequestSchema, async (request, extra) =>
      this.callTool(request.params.name, request.params.arguments, extra.signal),
    )
    this.servers.add(server)
    server.onclose = () => this.servers.delete(server)
    // A message the SDK cannot read (not JSON, a batch on stdio, an id of the wrong type) is answered with nothing:
    // say so on stderr, where the person wiring a client looks, instead of letting the client wait in silence.
    server.onerror = (error) => this.options.log?.(`a client's message was not handled: ${error.message.slice(0, 300)}`)
    return server
  }

  /** Tells every connected client that the list changed (the upstream restarted or said so). */
  toolsChanged(): void {
    this.stale = true
    for (const server of this.servers) server.sendToolListChanged().catch(() => {})
  }

  /**
   * The server's own error, passed on with its message and data sanitised like a result: a client shows a tool's
   * error to the model as it shows its result.
   */
  private passOnClean(error: McpError, what: string): GatewayError {
    const passed = passOn(error)
    const clean = this.options.sanitizer.sanitize({ message: passed.message, data: passed.data })
    if (clean.redactions.length > 0)
      this.options.log?.(
        `redacted from the error of "${what}": ${clean.redactions.map((r) => `${r.rule} ×${r.count}`).join(", ")}`,
      )
    return new GatewayError(passed.code, clean.value.message, clean.value.data)
  }

  private action(tool: string) {
    return `mcp.${this.options.server}.${tool}`
  }

  /** The agent of the key, from its SDK token's `agentId` claim (the API has no "who am I" call). */
  private agentId(): Promise<string> {
    this.agentIdPromise ??= this.options.client.tokens.create().then((t) => {
      const id = tokenClaims(t.token).agentId
      if (typeof id !== "string")
        throw new Error("AGENTGOV_API_KEY is not an agent key (svc_ag_sk_…): the gateway acts for one agent")
      return id
    })
    this.agentIdPromise.catch(() => {
      this.agentIdPromise = undefined
    })
    return this.agentIdPromise
  }

  /**
   * Opens the connection to the service and learns the agent (a token exchange) ahead of the first call. A
   * service that does not answer yet is no failure: the first call tries again, and is refused if it still
   * cannot be decided.
   */
  warm(): void {
    this.agentId().catch((error) =>
      this.options.log?.(`agentgov did not answer yet (${(error as Error).message}); calls are refused until it does`),
    )
  }

  /**
   * Reports an event under the agent's key. Its `agentId` comes from a token exchange: while the service cannot
   * be reached for it, the event waits here (in order, at most MAX_UNSENT, the oldest dropped with a log line)
   * and is queued with the others once the agent is known, on the next call or the next retry.
   */
  private async record(type: string, data: Record<string, unknown>): Promise<void> {
    this.unsent.push({ type, data })
    if (this.unsent.length > MAX_UNSENT) {
      const dropped = this.unsent.shift()!
      this.options.log?.(`could not record ${dropped.type}: more than ${MAX_UNSENT} events wait for the service`)
    }
    await this.flushUnsent()
  }

  private async flushUnsent(): Promise<void> {
    let agentId: string
    try {
      agentId = await this.agentId()
    } catch (error) {
      if (this.retry === undefined) {
        this.options.log?.(
          `${this.unsent.length} event(s) wait for the service (${(error as Error).message}); retrying every ${RETRY_UNSENT_MS / 1000} s`,
        )
        this.retry = setInterval(() => void this.flushUnsent(), RETRY_UNSENT_MS)
        this.retry.unref()
      }
      return
    }
    if (this.retry !== undefined) {
      clearInterval(this.retry)
      this.retry = undefined
    }
    for (const event of this.unsent.splice(0))
      this.options.agent.track({ type: event.type, data: { agentId, ...event.data } as never })
  }

  /**
   * Scans each definition against its text and its first-seen hash; flags new findings as events. A name listed
   * more than once is one tool with the findings of all its definitions, and `duplicate_name`: which definition
   * the server runs cannot be told, and a clean copy beside a changed one must not hide the change. Returns the
   * listing with the first definition of each name only (MCP's tool names are unique within a server).
   *
   * Names that differ only in case (or Unicode compatibility form) are each `duplicate_name` too: they are distinct
   * tools to MCP and to the guard, which matches actions as written, so a policy written for one spelling does not
   * cover the other, and a server that lists both may run one code for them.
   *
   * A definition's `_meta` is not passed on: it is neither scanned nor pinned (it holds extensions, such as UI
   * resources, that the gateway does not proxy).
   */
  private scan(listed: ReadonlyArray<Tool>): Array<Tool> {
    const { server, store } = this.options
    const known = new Map<string, KnownDefinition>()
    const byName = new Map<string, Array<Tool>>()
    const spellings = new Map<string, Set<string>>()
    const folded = (name: string) => name.normalize("NFKC").toLowerCase()
    for (const tool of listed) {
      const same = byName.get(tool.name)
      if (same) same.push(tool)
      else byName.set(tool.name, [tool])
      const fold = folded(tool.name)
      const names = spellings.get(fold)
      if (names) names.add(tool.name)
      else spellings.set(fold, new Set([tool.name]))
    }
    const tools: Array<Tool> = []
    // Every new tool of the listing pinned at once, each name's first definition as its first hash.
    const pins = store.firstSeenAll(
      server,
      listed.map((tool) => [tool.name, definitionHash(tool)] as const),
    )
    for (const [name, definitions] of byName) {
      const { _meta: _unscanned, ...tool } = definitions[0]!
      tools.push(tool)
      const hash = definitionHash(tool)
      const findings: Array<Finding> = []
      let first = hash
      for (const definition of definitions) {
        const own = definitionHash(definition)
        for (const finding of scanDefinition(definition))
          if (!findings.some((f) => f.kind === finding.kind && f.detail === finding.detail)) findings.push(finding)
        const pinned = pins.get(name)!
        if (pinned !== own && !findings.some((f) => f.kind === "definition_changed")) {
          findings.push({ kind: "definition_changed", detail: "the definition differs from the one first seen" })
          first = pinned
        }
      }
      if (definitions.length > 1)
        findings.push({
          kind: "duplicate_name",
          detail: `listed ${definitions.length} times, ${new Set(definitions.map(definitionHash)).size} different definitions`,
        })
      const others = [...spellings.get(folded(name))!].filter((n) => n !== name)
      if (others.length > 0)
        findings.push({
          kind: "duplicate_name",
          detail: `listed beside ${others
            .slice(0, 3)
            .map((n) => `"${n.slice(0, 64)}"`)
            .join(", ")}${others.length > 3 ? ` and ${others.length - 3} more` : ""}, names that differ only in case`,
        })
      known.set(name, { hash, findings })
      const key = `${name}\u0000${hash}\u0000${definitions.length}\u0000${others.length}`
      if (findings.length > 0 && !this.flagged.has(key)) {
        this.flagged.add(key)
        if (this.flagged.size > MAX_FLAGGED) this.flagged.delete(this.flagged.values().next().value!)
        this.options.log?.(`tool "${name}" flagged: ${findings.map((f) => f.kind).join(", ")}`)
        void this.record("mcp.definition.flagged", {
          server,
          tool: name,
          findings: findings.map((f) => ({ kind: f.kind, detail: f.detail })),
          definitionHash: hash,
          ...(first !== hash ? { firstSeenHash: first } : {}),
        })
      }
    }
    this.definitions = known
    return tools
  }

  /**
   * Lists and scans the server's tools, which become the tools a call may name. Requests that need a listing while
   * one is in progress share it.
   */
  private refresh(): Promise<Array<Tool>> {
    this.listing ??= (async () => {
      this.stale = false
      try {
        return this.scan(await this.options.upstream.listTools())
      } catch (error) {
        this.stale = true
        throw error
      }
    })().finally(() => {
      this.listing = undefined
    })
    return this.listing
  }

  /** The policies and the agent, or undefined when they cannot be read (then nothing is hidden). */
  private async policyView(): Promise<
    { policies: Array<Policy>; agent: { id: string; labels: Array<string> } } | undefined
  > {
    try {
      const id = await this.agentId()
      const [policies, agent] = await Promise.all([
        this.options.client.policies.list({ limit: 100 }, { maxRetries: 0, timeoutMs: 5_000 }).toArray(1_000),
        this.options.client.agents.get(id, { maxRetries: 0, timeoutMs: 5_000 }),
      ])
      return { policies, agent: { id: agent.id, labels: [...agent.labels] } }
    } catch (error) {
      this.options.log?.(`tools/list shows every tool: the policies could not be read (${(error as Error).message})`)
      return undefined
    }
  }

  async listTools(): Promise<Array<Tool>> {
    const tools = await this.refresh()
    if (this.options.hideDenied === false) return tools
    const view = await this.policyView()
    if (view === undefined) return tools
    return tools.filter((t) => !deniedOutright(view.policies, view.agent, this.action(t.name)))
  }

  private async refuse(
    tool: string,
    reason: DeniedReason,
    decision: Pick<GuardDecision, "reasons" | "eventId">,
    approvalId?: string,
  ): Promise<never> {
    const reasons = decision.reasons.map((r) => ({
      code: r.code,
      message: r.message,
      ...(r.policyId ? { policyId: r.policyId } : {}),
      ...(r.ruleId ? { ruleId: r.ruleId } : {}),
    }))
    await this.record("mcp.tool.denied", {
      server: this.options.server,
      tool,
      action: this.action(tool),
      reason,
      reasons,
      guardEventId: decision.eventId ?? null,
      ...(approvalId ? { approvalId } : {}),
    })
    const why = reasons.map((r) => r.message).join("; ") || reason.replace(/_/g, " ")
    const code =
      reason === "policy_denied"
        ? GATEWAY_ERRORS.denied
        : reason === "service_unavailable"
          ? GATEWAY_ERRORS.serviceUnavailable
          : GATEWAY_ERRORS.approvalNotGranted
    const lead =
      reason === "service_unavailable"
        ? `agentgov could not be reached, so "${tool}" was not called`
        : reason === "policy_denied"
          ? `"${tool}" was denied by policy`
          : reason === "approval_timeout"
            ? `"${tool}" needs an approval that was not decided within ${Math.round(this.approvalTimeoutMs / 1000)} s (${approvalId ?? "it"} is still pending: the same call with the same arguments, made again, goes ahead once it is approved)`
            : `"${tool}" needs an approval that was not granted`
    throw gatewayError(code, `${lead}: ${why}`, { reason, reasons, ...(approvalId ? { approvalId } : {}) })
  }

  /**
   * The definition of a tool of the server's latest listing, by its exact name; the server is listed again first
   * when that listing may be out of date or does not name the tool. A name it still does not list is refused, and
   * so is every name when the server cannot be listed: the guard is asked about tools the gateway has scanned, and
   * the server never sees a name it did not offer (a lenient server would run `Delete_File` as `delete_file`,
   * past a policy on the name it listed).
   */
  private async definitionOf(tool: string): Promise<KnownDefinition> {
    if (this.stale || !this.definitions.has(tool)) {
      try {
        await this.refresh()
      } catch (error) {
        const why = error instanceof GatewayError ? error : this.listingFailed(error)
        throw gatewayError(
          why.code,
          `"${tool.slice(0, 128)}" was not called: the gateway could not list the tools of the MCP server "${this.options.server}" (${why.message})`,
          why.data,
        )
      }
    }
    const definition = this.definitions.get(tool)
    if (definition !== undefined) return definition
    const shown = tool.length > 128 ? `${tool.slice(0, 128)}…` : tool
    this.options.log?.(`refused a call to "${shown}": the server does not list it`)
    throw gatewayError(
      GATEWAY_ERRORS.unknownTool,
      `"${shown}" is not a tool of the MCP server "${this.options.server}": call one of the tools it lists (tools/list), by its exact name`,
      { reason: "unknown_tool" },
    )
  }

  /** The server's error on a listing, sanitised like its other errors; anything else as the server failing. */
  private listingFailed(error: unknown): GatewayError {
    if (error instanceof McpError) return this.passOnClean(error, "tools/list")
    const failed = this.options.sanitizer.sanitize((error as Error).message)
    return gatewayError(GATEWAY_ERRORS.upstreamUnavailable, `the MCP server failed: ${failed.value}`, {
      reason: "upstream_unavailable",
    })
  }

  private remember(callKey: string, approvalId: string): void {
    this.awaited.delete(callKey)
    this.awaited.set(callKey, approvalId)
    if (this.awaited.size > MAX_AWAITED) this.awaited.delete(this.awaited.keys().next().value!)
  }

  /**
   * The client cancelled the call before it was sent (while the guard or an approval was awaited): nothing is
   * sent and no `mcp.tool.denied` is recorded, since the gateway refused nothing (its reasons are a closed list
   * and none is "cancelled"); the guard's own `policy.evaluated`, and the approval, show how far it went.
   */
  private cancelled(tool: string, approvalId: string | undefined): never {
    this.options.log?.(
      `the client cancelled its call to "${tool.slice(0, 128)}" before it was sent${approvalId ? ` (it waited for approval ${approvalId})` : ""}`,
    )
    throw gatewayError(
      GATEWAY_ERRORS.approvalNotGranted,
      `the call to "${tool.slice(0, 128)}" was cancelled before it was sent`,
      {
        reason: "cancelled",
        ...(approvalId ? { approvalId } : {}),
      },
    )
  }

  /**
   * A forwarded call's failure as the client is given it: the server's own error sanitised like a result, or the
   * gateway's (the server died or did not answer in time), with what the sanitiser removed.
   */
  private cleanFailure(
    error: unknown,
    tool: string,
  ): { error: GatewayError; redactions: Array<{ kind: string; rule: string; count: number }> } {
    const passed =
      error instanceof GatewayError
        ? error
        : error instanceof McpError
          ? passOn(error)
          : gatewayError(GATEWAY_ERRORS.upstreamUnavailable, `the MCP server failed: ${(error as Error).message}`)
    const clean = this.options.sanitizer.sanitize({ message: passed.message, data: passed.data })
    const redactions = clean.redactions.map((r) => ({ ...r }))
    if (redactions.length > 0)
      this.options.log?.(
        `redacted from the error of "${tool}": ${redactions.map((r) => `${r.rule} ×${r.count}`).join(", ")}`,
      )
    return { error: new GatewayError(passed.code, clean.value.message, clean.value.data), redactions }
  }

  /**
   * Records a call that reached the server, after the answer is on its way (the next turn of the event loop):
   * measuring the result's size and queueing the events are not the caller's wait. Queued is not acknowledged:
   * see the README's "Events".
   */
  private recordCalled(
    tool: string,
    guardEventId: string | null,
    approvalId: string | undefined,
    started: number,
    redactions: Array<{ kind: string; rule: string; count: number }>,
    outcome: { isError: boolean; contentItems: number; resultBytes: () => number },
  ): void {
    const { server } = this.options
    const action = this.action(tool)
    const durationMs = Math.round(performance.now() - started)
    setImmediate(() => {
      if (redactions.length > 0) void this.record("mcp.result.redacted", { server, tool, action, redactions })
      void this.record("mcp.tool.called", {
        server,
        tool,
        action,
        guardEventId,
        ...(approvalId ? { approvalId } : {}),
        durationMs,
        isError: outcome.isError,
        contentItems: outcome.contentItems,
        resultBytes: outcome.resultBytes(),
        redactions,
      })
    })
  }

  async callTool(
    tool: string,
    args: Record<string, unknown> | undefined,
    signal?: AbortSignal,
  ): Promise<CallToolResult> {
    const { agent, server } = this.options
    const action = this.action(tool)
    const definition = await this.definitionOf(tool)
    // The service records the guard's context and shows it to approvers: credentials in the arguments are
    // redacted as in a result (the server itself is sent the arguments as they are).
    const shown = this.options.sanitizer.redactArguments(args ?? {})
    if (shown.redactions.length > 0)
      this.options.log?.(
        `redacted from the arguments of "${tool}" sent to agentgov: ${shown.redactions.map((r) => `${r.rule} ×${r.count}`).join(", ")}`,
      )
    // Redacted arguments alone would let two calls that differ only in a secret share one approval: the digest of
    // the arguments as sent tells them apart (and is only there when something was redacted).
    const context = {
      server,
      tool,
      arguments: shown.value as never,
      ...(shown.redactions.length > 0 ? { argumentsDigest: argumentsDigest(this.digestKey, args ?? {}) } : {}),
      definition: {
        known: true,
        flagged: definition.findings.length > 0,
        findings: [...new Set(definition.findings.map((f) => f.kind))],
      },
    }
    // A refusal of the request itself (a bad key, a context too large, a consumed approval): no decision, so no call.
    const guard = (approvalId?: string) =>
      agent
        .guard(action, context, { ...(approvalId ? { approvalId } : {}), ...(signal ? { signal } : {}) })
        .catch((error: unknown) => {
          throw gatewayError(
            GATEWAY_ERRORS.denied,
            `agentgov refused to decide on "${tool}": ${(error as Error).message}`,
            {
              reason: "guard_error",
              ...(approvalId ? { approvalId } : {}),
            },
          )
        })
    // The approval this very call was given before, if the gateway stopped waiting for it: the guard uses it when
    // it was approved since, answers it again while pending, and opens a new one when it can no longer be used.
    // (By hash: a context may be tens of kilobytes, and up to MAX_AWAITED are kept.)
    const callKey = createHash("sha256")
      .update(`${action}\u0000${canonicalJson(context)}`)
      .digest("base64")
    const earlier = this.awaited.get(callKey)
    this.awaited.delete(callKey)
    let decision = await guard(earlier)
    // The approval the guard used (allowed on the earlier one) or opened.
    let approvalId: string | undefined = decision.approvalId
    if (decision.decision === "require_approval") {
      approvalId = decision.approvalId!
      let status: string
      try {
        const approval = await agent.waitForApproval(approvalId, {
          timeoutMs: this.approvalTimeoutMs,
          ...(signal ? { signal } : {}),
        })
        status = approval.status
      } catch (error) {
        // Undecided as far as the gateway knows: kept for this call's next attempt.
        this.remember(callKey, approvalId)
        if (signal?.aborted) return this.cancelled(tool, approvalId)
        if ((error as { code?: unknown }).code === "APPROVAL_WAIT_TIMEOUT")
          return this.refuse(tool, "approval_timeout", decision, approvalId)
        // No answer about the approval is no approval: refused, as when the service cannot be reached.
        return this.refuse(
          tool,
          "service_unavailable",
          { reasons: [{ code: "SERVICE_UNAVAILABLE", message: (error as Error).message }], eventId: decision.eventId },
          approvalId,
        )
      }
      if (status !== "approved") return this.refuse(tool, "approval_denied", decision, approvalId)
      // The approval lets exactly this call through (D7): the guard says so, and records it.
      decision = await guard(approvalId)
    }
    if (!decision.allowed) {
      // A guard cut short by the client's cancellation is the SDK's fallback, not the service being down.
      if (signal?.aborted) return this.cancelled(tool, approvalId)
      const unavailable = decision.reasons.some((r) => r.code === "SERVICE_UNAVAILABLE")
      return this.refuse(tool, unavailable ? "service_unavailable" : "policy_denied", decision, approvalId)
    }

    const started = performance.now()
    let result: CallToolResult
    try {
      result = await this.options.upstream.callTool(tool, args, signal)
    } catch (error) {
      if (notSent(error)) throw error
      // The call reached the server, which may have acted on it: the trail records it as a failed call (no
      // content), with what the sanitiser removed from the error the client is given.
      const failed = this.cleanFailure(error, tool)
      const text = { code: failed.error.code, message: failed.error.message, data: failed.error.data }
      this.recordCalled(tool, decision.eventId ?? null, approvalId, started, failed.redactions, {
        isError: true,
        contentItems: 0,
        resultBytes: () => Buffer.byteLength(JSON.stringify(text)),
      })
      throw failed.error
    }
    // The whole result: content, structured content, `_meta` and whatever else the server put in it.
    const clean = this.options.sanitizer.sanitize(result)
    const out: CallToolResult = { ...clean.value, content: clean.value.content ?? [] }
    const redactions = clean.redactions.map((r) => ({ ...r }))
    if (redactions.length > 0)
      this.options.log?.(`redacted from "${tool}": ${redactions.map((r) => `${r.rule} ×${r.count}`).join(", ")}`)
    this.recordCalled(tool, decision.eventId ?? null, approvalId, started, redactions, {
      isError: result.isError === true,
      contentItems: Array.isArray(result.content) ? result.content.length : 0,
      resultBytes: () => Buffer.byteLength(JSON.stringify(out)),
    })
    return out
  }
}
