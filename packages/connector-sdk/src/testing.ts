/**
 * `@agentgov/connector-sdk/testing`: deliveries signed exactly as the service signs them, and a
 * valid sample event of every type, for testing connectors without a server.
 */
import { createHmac, randomBytes } from "node:crypto"
import {
  type AnyWebhookEvent,
  type CustomWebhookEvent,
  canonicalEventName,
  type DeliveryMetadata,
  type EventAlias,
  type SystemEventDataMap,
  type SystemEventName,
  type SystemWebhookEvent,
} from "./events.ts"
import { WEBHOOK_HEADERS } from "./Webhook.ts"

const CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"

/** A D3-style id: prefix, then a lowercase ULID (48-bit time, 80 random bits). */
const newId = (prefix: string, now = Date.now()): string => {
  let time = ""
  for (let t = now, i = 0; i < 10; i++, t = Math.floor(t / 32)) time = CROCKFORD[t % 32] + time
  const random = Array.from(randomBytes(16), (b) => CROCKFORD[b % 32]).join("")
  return `${prefix}_${time}${random}`
}

const SAMPLE_AGENT = "agt_01jd8x3m9q7k2v5w0b4c6e8f1g"
const SAMPLE_AGENT_NAME = "invoice-bot"

const inAnHour = () => new Date(Date.now() + 3600_000).toISOString()

/** One valid `data` per system event: every required field, and the optional ones a connector would show. */
const sampleData: { readonly [N in SystemEventName]: () => SystemEventDataMap[N] } = {
  "agent.registered": () => ({ agentId: SAMPLE_AGENT, agentName: SAMPLE_AGENT_NAME, trustScore: 400 }),
  "agent.updated": () => ({
    agentId: SAMPLE_AGENT,
    agentName: SAMPLE_AGENT_NAME,
    changes: ["currentVersion"],
    version: "1.2.0",
    versionId: "ver_01jd8x4a0b1c2d3e4f5g6h7j8k",
    previousVersion: "1.1.0",
  }),
  "agent.deregistered": () => ({ agentId: SAMPLE_AGENT, agentName: SAMPLE_AGENT_NAME }),
  "agent.suspended": () => ({
    agentId: SAMPLE_AGENT,
    agentName: SAMPLE_AGENT_NAME,
    enforcementId: "enf_01jd8x5b2c3d4e5f6g7h8j9k0m",
    reason: "repeated policy violations",
    expiresAt: inAnHour(),
  }),
  "policy.evaluated": () => ({
    agentId: SAMPLE_AGENT,
    action: "payments.transfer",
    decision: "require_approval",
    allowed: false,
    matched: [{ policyId: "pol_01jd8x6c3d4e5f6g7h8j9k0m1n", ruleId: "large-transfers", effect: "require_approval" }],
    reasons: [
      {
        code: "APPROVAL_REQUIRED",
        message: "transfers above 10,000 need an operator's approval",
        policyId: "pol_01jd8x6c3d4e5f6g7h8j9k0m1n",
        ruleId: "large-transfers",
      },
    ],
    approvalId: "apr_01jd8x7d4e5f6g7h8j9k0m1n2p",
    durationMs: 0.4,
  }),
  "policy.created": () => ({
    policyId: "pol_01jd8x6c3d4e5f6g7h8j9k0m1n",
    name: "payments",
    version: 1,
    mode: "enforce",
    enabled: true,
    rules: 3,
  }),
  "policy.updated": () => ({
    policyId: "pol_01jd8x6c3d4e5f6g7h8j9k0m1n",
    name: "payments",
    version: 2,
    mode: "monitor",
    enabled: true,
    rules: 3,
    previousVersion: 1,
    changes: ["mode"],
  }),
  "policy.deleted": () => ({
    policyId: "pol_01jd8x6c3d4e5f6g7h8j9k0m1n",
    name: "payments",
    version: 2,
    mode: "monitor",
    enabled: true,
    rules: 3,
  }),
  "policy.denied": () => ({
    agentId: SAMPLE_AGENT,
    action: "files.delete",
    matched: [{ policyId: "pol_01jd8x6c3d4e5f6g7h8j9k0m1n", ruleId: "no-deletes", effect: "deny" }],
    reasons: [
      {
        code: "POLICY_DENIED",
        message: "deleting files is not allowed",
        policyId: "pol_01jd8x6c3d4e5f6g7h8j9k0m1n",
        ruleId: "no-deletes",
      },
    ],
  }),
  "policy.violated": () => ({
    agentId: SAMPLE_AGENT,
    action: "files.delete",
    decision: "deny",
    violations: [
      {
        code: "POLICY_DENIED",
        message: "deleting files is not allowed",
        policyId: "pol_01jd8x6c3d4e5f6g7h8j9k0m1n",
        ruleId: "no-deletes",
        effect: "deny",
        mode: "enforce",
      },
    ],
  }),
  "enforcement.created": () => ({
    enforcementId: "enf_01jd8x5b2c3d4e5f6g7h8j9k0m",
    agentId: SAMPLE_AGENT,
    type: "suspension",
    status: "active",
    reason: "repeated policy violations",
    policyId: "pol_01jd8x6c3d4e5f6g7h8j9k0m1n",
    ruleId: "repeat-offenders",
    expiresAt: inAnHour(),
  }),
  "enforcement.updated": () => ({
    enforcementId: "enf_01jd8x5b2c3d4e5f6g7h8j9k0m",
    agentId: SAMPLE_AGENT,
    type: "suspension",
    changes: ["expiresAt"],
    expiresAt: inAnHour(),
  }),
  "enforcement.appealed": () => ({
    enforcementId: "enf_01jd8x5b2c3d4e5f6g7h8j9k0m",
    agentId: SAMPLE_AGENT,
    type: "suspension",
    status: "appealed",
    reason: "the violations came from a misconfigured test",
  }),
  "enforcement.resolved": () => ({
    enforcementId: "enf_01jd8x5b2c3d4e5f6g7h8j9k0m",
    agentId: SAMPLE_AGENT,
    type: "suspension",
    status: "resolved",
    resolution: "overturned",
    reason: "appeal accepted",
    reinstated: true,
  }),
  "approval.requested": () => ({
    approvalId: "apr_01jd8x7d4e5f6g7h8j9k0m1n2p",
    agentId: SAMPLE_AGENT,
    action: "payments.transfer",
    status: "pending",
    expiresAt: inAnHour(),
    policyId: "pol_01jd8x6c3d4e5f6g7h8j9k0m1n",
    ruleId: "large-transfers",
    reason: "transfers above 10,000 need an operator's approval",
    approvers: ["finance-oncall"],
  }),
  "approval.decided": () => ({
    approvalId: "apr_01jd8x7d4e5f6g7h8j9k0m1n2p",
    agentId: SAMPLE_AGENT,
    action: "payments.transfer",
    decision: "approved",
    expired: false,
    decidedBy: "key_01jd8x8e5f6g7h8j9k0m1n2p3q",
    reason: "invoice checked",
  }),
  "trust.score.changed": () => ({
    agentId: SAMPLE_AGENT,
    agentName: SAMPLE_AGENT_NAME,
    previousScore: 480,
    newScore: 520,
    delta: 40,
    reason: "30 days without violations",
    newTier: "bronze",
  }),
  "trust.score.adjusted": () => ({
    adjustmentId: "adj_01jd0000000000000000000000",
    agentId: SAMPLE_AGENT,
    agentName: SAMPLE_AGENT_NAME,
    delta: 50,
    reason: "passed a manual audit",
  }),
  "trust.tier.upgraded": () => ({
    agentId: SAMPLE_AGENT,
    agentName: SAMPLE_AGENT_NAME,
    previousTier: "probation",
    newTier: "bronze",
    score: 520,
  }),
  "trust.tier.downgraded": () => ({
    agentId: SAMPLE_AGENT,
    agentName: SAMPLE_AGENT_NAME,
    previousTier: "bronze",
    newTier: "probation",
    score: 470,
  }),
  "content.registered": () => ({
    contentId: "cnt_01jd8x9f6g7h8j9k0m1n2p3q4r",
    mediaType: "image/png",
    fingerprint: "phash:c3a5e1f00f1e5a3c",
    watermarked: true,
    c2pa: true,
    agentId: SAMPLE_AGENT,
  }),
  "content.match.detected": () => ({
    contentId: "cnt_01jd8x9f6g7h8j9k0m1n2p3q4r",
    matchId: "mch_01jd8xag7h8j9k0m1n2p3q4r5s",
    similarity: 0.93,
    url: "https://example.com/copied.png",
  }),
  "content.takedown.submitted": () => ({
    contentId: "cnt_01jd8x9f6g7h8j9k0m1n2p3q4r",
    takedownId: "tdn_01jd8xbh8j9k0m1n2p3q4r5s6t",
    url: "https://example.com/copied.png",
    matchId: "mch_01jd8xag7h8j9k0m1n2p3q4r5s",
  }),
  "badge.earned": () => ({ agentId: SAMPLE_AGENT, agentName: SAMPLE_AGENT_NAME, tier: "bronze", score: 520 }),
  "badge.revoked": () => ({
    agentId: SAMPLE_AGENT,
    agentName: SAMPLE_AGENT_NAME,
    tier: "bronze",
    reason: "tier_below_bronze",
  }),
  "workspace.created": () => ({
    workspaceId: "ws_01jd8xcj9k0m1n2p3q4r5s6t7v",
    name: "acme",
    environment: "live",
    plan: "pro",
  }),
  "workspace.updated": () => ({
    workspaceId: "ws_01jd8xcj9k0m1n2p3q4r5s6t7v",
    changes: ["guardDefault"],
    guardDefault: "deny",
  }),
  "workspace.deleted": () => ({ workspaceId: "ws_01jd8xcj9k0m1n2p3q4r5s6t7v", name: "acme", revokedKeys: 3 }),
  "apikey.created": () => ({
    keyId: "key_01jd8x8e5f6g7h8j9k0m1n2p3q",
    name: "ci",
    type: "workspace",
    prefix: "a1B2c3",
    scopes: ["agents:read", "events:write"],
  }),
  "apikey.revoked": () => ({
    keyId: "key_01jd8x8e5f6g7h8j9k0m1n2p3q",
    name: "ci",
    prefix: "a1B2c3",
    reason: "revoked",
  }),
  "apikey.rotated": () => ({
    keyId: "key_01jd8x8e5f6g7h8j9k0m1n2p3q",
    newKeyId: "key_01jd8xdk0m1n2p3q4r5s6t7v8w",
    overlapSeconds: 86_400,
  }),
  "member.invited": () => ({
    invitationId: "inv_01jd8xg2h3j4k5m6n7p8q9r0s1",
    email: "ada@example.com",
    role: "member",
    expiresAt: "2026-12-02T10:00:00.000Z",
  }),
  "invitation.revoked": () => ({
    invitationId: "inv_01jd8xg2h3j4k5m6n7p8q9r0s1",
    email: "ada@example.com",
    role: "member",
  }),
  "member.joined": () => ({
    userId: "usr_01jd8xh3j4k5m6n7p8q9r0s1t2",
    email: "ada@example.com",
    role: "member",
    invitationId: "inv_01jd8xg2h3j4k5m6n7p8q9r0s1",
  }),
  "member.role_changed": () => ({
    userId: "usr_01jd8xh3j4k5m6n7p8q9r0s1t2",
    email: "ada@example.com",
    from: "member",
    to: "admin",
  }),
  "member.signin_link_created": () => ({
    userId: "usr_01jd8xh3j4k5m6n7p8q9r0s1t2",
    email: "ada@example.com",
    expiresAt: "2026-11-20T13:00:00.000Z",
  }),
  "member.removed": () => ({
    userId: "usr_01jd8xh3j4k5m6n7p8q9r0s1t2",
    email: "ada@example.com",
    role: "admin",
    left: false,
  }),
  "oauth.client.created": () => ({
    clientId: "oac_01jd8xj4k5m6n7p8q9r0s1t2v3",
    name: "Release notes bot",
    type: "confidential",
    redirectUris: ["https://bot.example.com/callback"],
    scopes: ["agents:read", "events:read"],
  }),
  "oauth.client.deleted": () => ({
    clientId: "oac_01jd8xj4k5m6n7p8q9r0s1t2v3",
    name: "Release notes bot",
    revokedGrants: 2,
  }),
  "oauth.grant.created": () => ({
    grantId: "grt_01jd8xk5m6n7p8q9r0s1t2v3w4",
    clientId: "oac_01jd8xj4k5m6n7p8q9r0s1t2v3",
    clientName: "Release notes bot",
    userId: "usr_01jd8xh3j4k5m6n7p8q9r0s1t2",
    scopes: ["agents:read"],
  }),
  "oauth.grant.revoked": () => ({
    grantId: "grt_01jd8xk5m6n7p8q9r0s1t2v3w4",
    clientId: "oac_01jd8xj4k5m6n7p8q9r0s1t2v3",
    userId: "usr_01jd8xh3j4k5m6n7p8q9r0s1t2",
    reason: "refresh_token_reused",
  }),
  "webhook.created": () => ({
    webhookId: "whk_01jd8xf2g3h4j5k6m7n8p9q0r1",
    origin: "https://hooks.example.com",
    events: ["enforcement.*"],
    retryPolicy: "exponential",
    enabled: true,
  }),
  "webhook.updated": () => ({
    webhookId: "whk_01jd8xf2g3h4j5k6m7n8p9q0r1",
    changes: ["enabled"],
    enabled: true,
  }),
  "webhook.secret.rotated": () => ({ webhookId: "whk_01jd8xf2g3h4j5k6m7n8p9q0r1", overlapSeconds: 86_400 }),
  "webhook.deleted": () => ({ webhookId: "whk_01jd8xf2g3h4j5k6m7n8p9q0r1", origin: "https://hooks.example.com" }),
  "webhook.redelivered": () => ({ webhookId: "whk_01jd8xf2g3h4j5k6m7n8p9q0r1", queued: 3 }),
  "webhook.disabled": () => ({
    webhookId: "whk_01jd8xf2g3h4j5k6m7n8p9q0r1",
    reason: "all_attempts_failed",
    deliveryId: "dlv_01jd8xg3h4j5k6m7n8p9q0r1s2",
    eventId: "evt_01jd8xh4j5k6m7n8p9q0r1s2t3",
  }),
  "chain.invalid": () => ({
    trigger: "scheduled",
    checked: 37,
    firstBadSequence: 38,
    reason: "event 38 is missing: checkpoint 39 signed events 1..39, and the chain ends at 37",
  }),
  "compliance.report.generated": () => ({
    reportId: "rpt_01jd8xk5m6n7p8q9r0s1t2v3w4",
    framework: "soc2",
    from: "2026-10-01T00:00:00.000Z",
    to: "2026-11-01T00:00:00.000Z",
    result: "compliant",
    treeSize: 1204,
    counted: 1180,
  }),
  "certification.issued": () => ({
    certificationId: "crt_01jd8xm6n7p8q9r0s1t2v3w4x5",
    agentId: SAMPLE_AGENT,
    framework: "soc2",
    reportId: "rpt_01jd8xk5m6n7p8q9r0s1t2v3w4",
    expiresAt: "2027-11-01T00:00:00.000Z",
  }),
  "certification.revoked": () => ({
    certificationId: "crt_01jd8xm6n7p8q9r0s1t2v3w4x5",
    agentId: SAMPLE_AGENT,
    framework: "soc2",
    reportId: "rpt_01jd8xk5m6n7p8q9r0s1t2v3w4",
    reason: "agent_suspended",
  }),
  "mcp.tool.called": () => ({
    agentId: SAMPLE_AGENT,
    server: "github",
    tool: "create_issue",
    action: "mcp.github.create_issue",
    guardEventId: "evt_01jd8xq7r8s9t0v1w2x3y4z5a6",
    durationMs: 184,
    isError: false,
    contentItems: 1,
    resultBytes: 412,
    redactions: [],
  }),
  "mcp.tool.denied": () => ({
    agentId: SAMPLE_AGENT,
    server: "github",
    tool: "delete_repository",
    action: "mcp.github.delete_repository",
    reason: "policy_denied",
    reasons: [
      {
        code: "POLICY_DENY",
        message: "Repositories are never deleted by agents",
        policyId: "pol_01jd8xh3k4m5n6p7q8r9s0t1v2",
        ruleId: "no-delete",
      },
    ],
    guardEventId: "evt_01jd8xq7r8s9t0v1w2x3y4z5a7",
  }),
  "mcp.definition.flagged": () => ({
    agentId: SAMPLE_AGENT,
    server: "weather",
    tool: "forecast",
    findings: [{ kind: "definition_changed", detail: "the description changed since first seen" }],
    definitionHash: "9f2c4b1e8a7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e3d2c1b",
    firstSeenHash: "1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d2e3f4a5b6c7d8e9f0a1b2c",
  }),
  "mcp.result.redacted": () => ({
    agentId: SAMPLE_AGENT,
    server: "github",
    tool: "get_file",
    action: "mcp.github.get_file",
    redactions: [{ kind: "credential", rule: "aws_access_key", count: 1 }],
  }),
}

/**
 * What {@link sampleEvent} may override: envelope fields, `data` fields (merged over the sample's),
 * and `metadata` fields.
 *
 * @example
 * ```ts
 * import type { SampleEventOverrides } from "@agentgov/connector-sdk/testing"
 *
 * const o: SampleEventOverrides<"badge.earned"> = { workspaceId: "ws_acme", data: { tier: "gold" } }
 * ```
 */
export interface SampleEventOverrides<N extends string = string> {
  readonly id?: string
  readonly timestamp?: string
  readonly workspaceId?: string
  readonly data?: N extends SystemEventName | EventAlias
    ? Partial<SystemEventDataMap[SystemWebhookEvent<N>["type"]]>
    : Readonly<Record<string, unknown>>
  readonly metadata?: Partial<DeliveryMetadata>
}

/**
 * The event {@link sampleEvent} returns for `type`.
 *
 * @example
 * ```ts
 * import type { SampleEvent } from "@agentgov/connector-sdk/testing"
 *
 * type E = SampleEvent<"enforcement.issued"> // WebhookEvent<"enforcement.created">
 * ```
 */
export type SampleEvent<N extends string> = N extends SystemEventName | EventAlias
  ? SystemWebhookEvent<N>
  : CustomWebhookEvent

/**
 * A valid event envelope of `type`, with realistic `data` for every system event (an alias gives
 * its canonical type) and empty `data` for a custom type. Fresh `evt_…`/`dlv_…` ids each call.
 *
 * @example
 * ```ts
 * import { sampleEvent } from "@agentgov/connector-sdk/testing"
 *
 * const event = sampleEvent("approval.requested", { data: { action: "deploy.production" } })
 * expect(formatForSlack(event)).toContain("deploy.production")
 * ```
 */
export const sampleEvent = <N extends string>(type: N, overrides: SampleEventOverrides<N> = {}): SampleEvent<N> => {
  const canonical = canonicalEventName(type)
  const base = Object.hasOwn(sampleData, canonical) ? sampleData[canonical as SystemEventName]() : {}
  const deliveryId = overrides.metadata?.deliveryId ?? newId("dlv")
  // the key order of the service's envelope
  return {
    id: overrides.id ?? newId("evt"),
    type: canonical,
    timestamp: overrides.timestamp ?? new Date().toISOString(),
    workspaceId: overrides.workspaceId ?? "ws_01jd8xcj9k0m1n2p3q4r5s6t7v",
    data: { ...base, ...overrides.data },
    metadata: {
      deliveryId,
      webhookId: overrides.metadata?.webhookId ?? "whk_01jd8xem1n2p3q4r5s6t7v8w9x",
      attempt: overrides.metadata?.attempt ?? 1,
    },
  } as unknown as SampleEvent<N>
}

/**
 * Options of {@link signDelivery}.
 *
 * @example
 * ```ts
 * import type { SignDeliveryOptions } from "@agentgov/connector-sdk/testing"
 *
 * const options: SignDeliveryOptions = { secret: "whsec_test", event: "badge.earned", legacy: false }
 * ```
 */
export interface SignDeliveryOptions {
  /** The signing secret; several give several `v1=` signatures, as during a rotation. */
  readonly secret: string | ReadonlyArray<string>
  /** The envelope to send, as is. */
  readonly envelope?: AnyWebhookEvent | Readonly<Record<string, unknown>>
  /** Or an event type, for a {@link sampleEvent} of it (default `"agent.registered"`), or an event to send as is. */
  readonly event?: string | AnyWebhookEvent
  /** Unix seconds (or a Date). Default now. */
  readonly timestamp?: number | Date
  /** `X-SVC-Webhook-Id`. Default the envelope's `metadata.deliveryId`, else a fresh `dlv_…`. */
  readonly webhookId?: string
  /**
   * The legacy `X-SVC-Signature`: `true` (default) sends it beside the current headers, as the
   * service does (D9); `false` leaves it out; `"only"` sends nothing else, as an old sender would.
   */
  readonly legacy?: boolean | "only"
}

/**
 * A signed delivery: the body and headers to POST.
 *
 * @example
 * ```ts
 * import type { SignedDelivery } from "@agentgov/connector-sdk/testing"
 *
 * const post = (url: string, d: SignedDelivery) => fetch(url, { method: "POST", headers: d.headers, body: d.body })
 * ```
 */
export interface SignedDelivery {
  /** The raw body (compact JSON of the envelope). */
  readonly body: string
  /** Header names as the service writes them. */
  readonly headers: Readonly<Record<string, string>>
  readonly envelope: AnyWebhookEvent
  readonly webhookId: string
  /** Unix seconds. */
  readonly timestamp: number
}

/**
 * Signs a delivery exactly as the service does: `Content-Type`, `X-SVC-Webhook-Id`,
 * `X-SVC-Webhook-Timestamp` (Unix seconds), `X-SVC-Webhook-Signature`
 * (`v1=<hex HMAC-SHA256(secret, "<id>.<timestamp>.<body>")>`, space-separated for several
 * secrets) and the legacy `X-SVC-Signature` (`<hex HMAC-SHA256(secret, body)>`).
 *
 * @example
 * ```ts
 * import { signDelivery } from "@agentgov/connector-sdk/testing"
 *
 * const { body, headers } = signDelivery({ secret: "whsec_test", event: "approval.requested" })
 * const res = await fetch("http://127.0.0.1:3000/webhooks", { method: "POST", headers, body })
 * expect(res.status).toBe(202)
 * ```
 */
export const signDelivery = (options: SignDeliveryOptions): SignedDelivery => {
  const secrets = typeof options.secret === "string" ? [options.secret] : [...options.secret]
  if (secrets.length === 0) throw new TypeError("signDelivery: at least one secret is needed")
  const envelope = (options.envelope ??
    (typeof options.event === "object"
      ? options.event
      : sampleEvent(options.event ?? "agent.registered"))) as AnyWebhookEvent
  const body = JSON.stringify(envelope)
  const timestamp =
    options.timestamp instanceof Date
      ? Math.floor(options.timestamp.getTime() / 1000)
      : (options.timestamp ?? Math.floor(Date.now() / 1000))
  const metadataId = (envelope as { metadata?: { deliveryId?: unknown } }).metadata?.deliveryId
  const webhookId = options.webhookId ?? (typeof metadataId === "string" ? metadataId : newId("dlv"))
  const hmac = (secret: string, ...parts: Array<string>) => {
    const h = createHmac("sha256", Buffer.from(secret, "utf8"))
    for (const part of parts) h.update(part, "utf8")
    return h.digest("hex")
  }
  const legacy = options.legacy ?? true
  const headers: Record<string, string> = { "Content-Type": "application/json" }
  if (legacy !== "only") {
    headers[WEBHOOK_HEADERS.id] = webhookId
    headers[WEBHOOK_HEADERS.timestamp] = String(timestamp)
    headers[WEBHOOK_HEADERS.signature] = secrets
      .map((s) => `v1=${hmac(s, `${webhookId}.${timestamp}.`, body)}`)
      .join(" ")
  }
  if (legacy !== false) headers[WEBHOOK_HEADERS.legacySignature] = secrets.map((s) => hmac(s, body)).join(" ")
  return { body, headers, envelope, webhookId, timestamp }
}
