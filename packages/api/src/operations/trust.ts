import {
  Adjustment,
  AgentIdParam,
  Badge,
  BadgeNotFound,
  BadgeQuery,
  BadgeVerification,
  CreateAdjustment,
  Reputation,
  ReputationQuery,
  TrustScore,
  TrustService,
  VerifyBadge,
} from "@agentgov/domain"
import { Effect, Exit, Schema } from "effect"
import { defineOperation, type FastHandler } from "../Operation.ts"
import { BODY_SCHEMA } from "./common.ts"

const tag = "Trust"

const PUBLIC_NOTE =
  "Public (no credential, D1): it reveals only the agent's name, tier and score, and answers an unknown, deregistered, suspended or sub-`bronze` agent alike. Rate limited per client address."

/** `idAnd` for a path parameter named `agentId`. */
const agentIdAnd = <F extends Schema.Struct.Fields>(body: Schema.Struct<F>) =>
  Schema.Struct({ ...AgentIdParam.fields, ...body.fields }).annotate({ [BODY_SCHEMA]: body })

/**
 * The public badge from the trust module's cache, outside the runtime (TrustService.cachedBadge): a README's
 * image is fetched far more often than the agent changes. A miss (nothing cached, or cached too long ago) takes
 * the handler, which answers alike. The cache is read after the I/O already received (setImmediate), so that
 * an announcement of the agent's change that arrived with the request is applied first, as on the runtime.
 */
const badgeFromCache = TrustService.use((s) =>
  Effect.succeed<FastHandler<{ readonly agentId: string }, Badge>>(({ agentId }) => {
    if (s.cachedBadge(agentId, Date.now()) === undefined) return undefined
    return new Promise<Exit.Exit<Badge, BadgeNotFound>>((resolve) =>
      setImmediate(() => {
        const found = s.cachedBadge(agentId, Date.now())
        if (found === undefined) resolve(Effect.runPromiseExit(s.badge(agentId)))
        else resolve(found === null ? Exit.fail(new BadgeNotFound({ agentId })) : Exit.succeed(found))
      }),
    )
  }),
)

export const trustOperations = [
  defineOperation({
    name: "trust.score",
    method: "GET",
    path: "/trust/score/:agentId",
    scope: "trust:read",
    orScope: "agents:read",
    tag,
    summary: "Get an agent's trust score",
    description:
      "The composite score 0–1000 (D12) with its components, each 0–1000 with its weight and the numbers it used (`detail`). Kept current by the trust worker from the audit trail (never recomputed on read); `computedAt` says when. Also with scope `agents:read`. Formulas: docs/trust.md.",
    errors: ["AGENT_NOT_FOUND"],
    input: AgentIdParam,
    output: TrustScore,
    handler: (input, actor) => TrustService.use((s) => s.score(actor, input.agentId)),
  }),
  defineOperation({
    name: "trust.reputation",
    method: "GET",
    path: "/agents/:id/reputation",
    scope: "agents:read",
    tag,
    summary: "Get an agent's reputation",
    description:
      "The score and tier, the counts of evidence behind them since registration, and the announced scores over time (`history`, oldest first) for charts.",
    errors: ["AGENT_NOT_FOUND"],
    input: ReputationQuery,
    output: Reputation,
    handler: (input, actor) => TrustService.use((s) => s.reputation(actor, input.id, input.limit)),
  }),
  defineOperation({
    name: "trust.adjust",
    method: "POST",
    path: "/trust/score/:agentId/adjustments",
    scope: "trust:write",
    tag,
    summary: "Adjust an agent's trust score",
    description:
      "An operator's adjustment: `delta` points (−1000..1000, not 0) added to the weighted sum, shown as the `operator_adjustment` component. Recorded as evidence on the audit trail (`trust.score.adjusted`); the trust worker applies it within moments and announces the change (`trust.score.changed`).",
    successStatus: 201,
    errors: ["AGENT_NOT_FOUND", "AGENT_DEREGISTERED"],
    input: agentIdAnd(CreateAdjustment),
    output: Adjustment,
    handler: ({ agentId, ...input }, actor) => TrustService.use((s) => s.adjust(actor, agentId, input)),
  }),
  defineOperation({
    name: "trust.badgeData",
    method: "GET",
    path: "/trust/badges/:agentId",
    scope: null,
    public: true,
    tag,
    summary: "Get an agent's badge data",
    description: `The badge as JSON (D13), with its signature (a compact JWS verifiable offline against /.well-known/jwks.json). ${PUBLIC_NOTE}`,
    errors: ["BADGE_NOT_FOUND"],
    input: AgentIdParam,
    output: Badge,
    handler: (input) => TrustService.use((s) => s.badge(input.agentId)),
    fast: badgeFromCache,
  }),
  defineOperation({
    name: "trust.badge",
    method: "GET",
    path: "/badge/:agentId",
    scope: null,
    public: true,
    tag,
    summary: "Get an agent's trust badge (SVG or JSON)",
    description: `Over REST an SVG image (\`image/svg+xml\`; the default, or \`?format=svg\`) to embed in a README, or the JSON (\`Accept: application/json\` or \`?format=json\`); with \`Cache-Control\` and \`ETag\` (send \`If-None-Match\` for a 304). No badge: JSON 404 \`BADGE_NOT_FOUND\`, SVG 404 with a grey "not verified" image. The SVG carries the JWS in its \`<metadata>\`. ${PUBLIC_NOTE}`,
    errors: ["BADGE_NOT_FOUND"],
    input: BadgeQuery,
    output: Badge,
    handler: (input) => TrustService.use((s) => s.badge(input.agentId)),
    fast: badgeFromCache,
  }),
  defineOperation({
    name: "trust.badgeStatus",
    method: "GET",
    path: "/badge/:agentId/verify",
    scope: null,
    public: true,
    tag,
    summary: "Check an agent's current badge",
    description: `Whether the agent holds a badge now, and its tier and score: \`valid\` false with \`reason: no_badge\` when it holds none. ${PUBLIC_NOTE}`,
    input: AgentIdParam,
    output: BadgeVerification,
    handler: (input) => TrustService.use((s) => s.verifyCurrent(input.agentId)),
  }),
  defineOperation({
    name: "trust.verifyBadge",
    method: "POST",
    path: "/badge/:agentId/verify",
    scope: null,
    public: true,
    tag,
    summary: "Verify a badge someone presents",
    description: `\`badge\`: the badge's JSON (the object \`GET /badge/:agentId?format=json\` answers, with or without its \`{ok, data}\` envelope, or that JSON as text), its SVG, or the JWS alone. \`valid\`: the signature is the service's (a key of its JWKS; one retired since still verifies, as SDK tokens do, until the badge expires), it has not expired, and it is this agent's; else \`reason\` is \`malformed\`, \`unknown_key\`, \`bad_signature\` (also a JSON badge whose fields differ from what was signed), \`expired\` or \`other_agent\`. \`current\`: what the badge shows holds now: the agent holds that tier, and every certification it names is in force. Changes nothing. ${PUBLIC_NOTE}`,
    input: agentIdAnd(VerifyBadge),
    output: BadgeVerification,
    sdkArgument: "badge",
    ignoresIdempotencyKey: true,
    handler: ({ agentId, badge }) => TrustService.use((s) => s.verify(agentId, badge)),
  }),
]
