import { readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { fileURLToPath } from "node:url"
import { type FakeAnswer, type FakeRequest, startScriptedFake, type VendorFake } from "@agentgov/connector-testing"
import { Ajv } from "ajv"

/**
 * A fake of a Teams Workflows webhook ("Post to a channel when a webhook request is received") on
 * loopback. As the service does, it answers 202 to an accepted message, 404 to an unknown flow, 413
 * to a body over Teams' 28 KB message limit, 400 to a body that is not a message with one Adaptive
 * Card attachment (or whose card is not valid Adaptive Card 1.5, checked here against the vendored
 * schema), and 429 with `Retry-After` when throttled.
 */

export const FLOW_PATH = "/workflows/6f1c/triggers/manual/paths/invoke"
export const FLOW_QUERY = "?api-version=1&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig=fake-signature"
export const MAX_MESSAGE_BYTES = 28 * 1024

const schemaPath = fileURLToPath(
  new URL("../../../tooling/connector-testing/schemas/adaptive-card-1.5.subset.json", import.meta.url),
)
export const cardSchema = JSON.parse(readFileSync(schemaPath, "utf8"))
export const validateCard = new Ajv({ allErrors: true, strict: false }).compile(cardSchema)

/**
 * Microsoft's own Adaptive Cards library (npm `adaptivecards`, the JavaScript renderer's object model) as a second
 * check: the card parsed as version 1.5, and every parse and validation event it reports (an unknown element or
 * action, a value a property does not take, a required property missing) is a problem. No registry package ships
 * the official JSON schema file, so the vendored subset stays; this checks against the real object model.
 */
const AdaptiveCards = createRequire(import.meta.url)("adaptivecards/dist/adaptivecards.js")
export const officialCardProblems = (card: unknown): Array<string> => {
  const context = new AdaptiveCards.SerializationContext(AdaptiveCards.Versions.v1_5)
  const parsed = new AdaptiveCards.AdaptiveCard()
  parsed.parse(card, context)
  const events: Array<{ message: string }> = Array.from({ length: context.eventCount }, (_, i) => context.getEventAt(i))
  return [...events, ...parsed.validateProperties().validationEvents].map((e) => e.message)
}

export interface TeamsFake extends VendorFake {
  /** Accepted cards. */
  readonly cards: Array<any>
  /** Accepted request bodies' sizes in bytes. */
  readonly sizes: Array<number>
  readonly requests: ReadonlyArray<FakeRequest>
}

/** What a reader sees on a card: every TextBlock, every fact, every action's title and target. */
export const visibleText = (card: any): string => {
  const out: Array<string> = []
  const walk = (el: any) => {
    if (el.type === "TextBlock") out.push(el.text)
    if (el.type === "FactSet") for (const f of el.facts) out.push(f.title, f.value)
    for (const child of el.items ?? []) walk(child)
  }
  for (const el of card.body ?? []) walk(el)
  for (const a of card.actions ?? []) out.push(a.title ?? "", a.url ?? "")
  return out.join("\n")
}

const bad = (message: string): FakeAnswer => ({
  status: 400,
  body: { error: { code: "InvalidRequestContent", message } },
})

export const startTeamsFake = async (): Promise<TeamsFake> => {
  const cards: Array<any> = []
  const sizes: Array<number> = []
  const answer = (r: FakeRequest): FakeAnswer => {
    if (r.method !== "POST" || r.url !== `${FLOW_PATH}${FLOW_QUERY}`)
      return { status: 404, body: { error: { code: "WorkflowNotFound", message: "The workflow was not found." } } }
    const size = Buffer.byteLength(r.raw)
    if (size > MAX_MESSAGE_BYTES)
      return { status: 413, body: { error: { code: "MessageSizeTooBig", message: "The message is too large." } } }
    if (!String(r.headers["content-type"]).startsWith("application/json")) return bad("content-type must be JSON")
    let body: any
    try {
      body = JSON.parse(r.raw)
    } catch {
      return bad("the body is not JSON")
    }
    const attachment = body?.attachments?.[0]
    if (body?.type !== "message" || body.attachments.length !== 1) return bad("expected a message with one attachment")
    if (attachment.contentType !== "application/vnd.microsoft.card.adaptive") return bad("not an Adaptive Card")
    if (!validateCard(attachment.content)) return bad(`invalid card: ${JSON.stringify(validateCard.errors)}`)
    const problems = officialCardProblems(attachment.content)
    if (problems.length > 0) return bad(`invalid card: ${problems.join("; ")}`)
    cards.push(attachment.content)
    sizes.push(size)
    return { status: 202 }
  }
  const { http, attempts, failNext } = await startScriptedFake(answer, {
    rateLimit: (seconds) => ({
      status: 429,
      headers: { "retry-after": String(seconds) },
      body: { error: { code: "TooManyRequests", message: "Rate limit is exceeded." } },
    }),
    refuse: () => bad("Bad Request"),
  })
  return {
    url: `${http.url}${FLOW_PATH}${FLOW_QUERY}`,
    cards,
    sizes,
    requests: http.requests,
    accepted: () => cards.map(visibleText),
    attempts,
    failNext,
    close: http.close,
  }
}
