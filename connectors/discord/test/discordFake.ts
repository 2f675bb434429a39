import { type FakeAnswer, type FakeRequest, startScriptedFake, type VendorFake } from "@agentgov/connector-testing"

/**
 * A fake of Discord's "Execute Webhook" endpoint (`POST /api/v10/webhooks/{id}/{token}`) on
 * loopback, holding to what Discord documents: 404 `Unknown Webhook` (10015) for a deleted
 * webhook, 401 `Invalid Webhook Token` (50027), 400 `Invalid Form Body` (50035) past the embed
 * limits (10 embeds; title 256, description 4,096, 25 fields of 256/1,024, footer 2,048, 6,000
 * characters in all), 413 past the body size, and 429 with `Retry-After` and a `retry_after` body.
 */

export const WEBHOOK_ID = "112233445566778899"
export const WEBHOOK_TOKEN = "fake-token_abcDEF123"
export const MAX_BODY_BYTES = 25 * 1024 * 1024

export interface DiscordFake extends VendorFake {
  /** Accepted request bodies. */
  readonly messages: Array<any>
  readonly requests: ReadonlyArray<FakeRequest>
  /** The webhook is deleted: every later request gets 404. */
  readonly deleteWebhook: () => void
}

const err = (status: number, code: number, message: string, extra: Record<string, unknown> = {}): FakeAnswer => ({
  status,
  body: { message, code, ...extra },
})

/** Every string a reader sees: content, and each embed's title, description, fields, footer. */
export const visibleText = (body: any): string =>
  [
    body.content ?? "",
    ...(body.embeds ?? []).flatMap((e: any) => [
      e.title ?? "",
      e.description ?? "",
      e.url ?? "",
      ...(e.fields ?? []).flatMap((f: any) => [f.name, f.value]),
      e.footer?.text ?? "",
    ]),
  ].join("\n")

const embedProblem = (embeds: Array<any>): string | undefined => {
  if (embeds.length > 10) return "embeds: must be 10 or fewer in length"
  let total = 0
  for (const e of embeds) {
    if ((e.title ?? "").length > 256) return "embeds.title: must be 256 or fewer in length"
    if ((e.description ?? "").length > 4096) return "embeds.description: must be 4096 or fewer in length"
    if ((e.fields ?? []).length > 25) return "embeds.fields: must be 25 or fewer in length"
    for (const f of e.fields ?? []) {
      if (!f.name || f.name.length > 256) return "embeds.fields.name: must be between 1 and 256 in length"
      if (!f.value || f.value.length > 1024) return "embeds.fields.value: must be between 1 and 1024 in length"
    }
    if ((e.footer?.text ?? "").length > 2048) return "embeds.footer.text: must be 2048 or fewer in length"
    total +=
      (e.title ?? "").length +
      (e.description ?? "").length +
      (e.footer?.text ?? "").length +
      (e.author?.name ?? "").length +
      (e.fields ?? []).reduce((n: number, f: any) => n + f.name.length + f.value.length, 0)
  }
  if (total > 6000) return "embeds: the total of all embeds must be 6000 or fewer characters"
  return undefined
}

export const startDiscordFake = async (): Promise<DiscordFake> => {
  const messages: Array<any> = []
  let deleted = false
  let seq = 0
  const answer = (r: FakeRequest): FakeAnswer => {
    const match = /^\/api\/v10\/webhooks\/(\d+)\/([^/?]+)(\?.*)?$/.exec(r.url)
    if (r.method !== "POST" || !match) return err(404, 0, "404: Not Found")
    if (deleted || match[1] !== WEBHOOK_ID) return err(404, 10015, "Unknown Webhook")
    if (match[2] !== WEBHOOK_TOKEN) return err(401, 50027, "Invalid Webhook Token")
    if (Buffer.byteLength(r.raw) > MAX_BODY_BYTES) return err(413, 40005, "Request entity too large")
    const body = JSON.parse(r.raw)
    if (!body.content && !(body.embeds?.length > 0)) return err(400, 50006, "Cannot send an empty message")
    const problem = embedProblem(body.embeds ?? [])
    if (problem) return err(400, 50035, "Invalid Form Body", { errors: { _errors: [{ message: problem }] } })
    messages.push(body)
    return {
      status: 200,
      body: { id: String(++seq), channel_id: "1", content: body.content ?? "", embeds: body.embeds },
    }
  }
  const { http, attempts, failNext } = await startScriptedFake(answer, {
    rateLimit: (seconds) => ({
      status: 429,
      headers: {
        "retry-after": String(seconds),
        "x-ratelimit-limit": "5",
        "x-ratelimit-remaining": "0",
        "x-ratelimit-reset-after": String(seconds),
        "x-ratelimit-bucket": "fakebucket",
        "x-ratelimit-scope": "shared",
      },
      body: { message: "You are being rate limited.", retry_after: seconds, global: false },
    }),
    refuse: () => err(400, 50035, "Invalid Form Body"),
  })
  return {
    url: `${http.url}/api`,
    messages,
    requests: http.requests,
    deleteWebhook: () => {
      deleted = true
    },
    accepted: () => messages.map(visibleText),
    attempts,
    failNext,
    close: http.close,
  }
}
