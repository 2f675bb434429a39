import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { LogLevel, WebClient } from "@slack/web-api"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { classify } from "../src/connector.ts"

/** Slack answers 429 with `Retry-After` in seconds; a proxy's (or an outage's) 429 may carry none. */
describe("slack: a 429 without a usable Retry-After", () => {
  let server: Server
  let url: string
  let header: string | undefined
  beforeAll(async () => {
    server = createServer((_req, res) => {
      res.writeHead(429, {
        "content-type": "application/json",
        ...(header === undefined ? {} : { "retry-after": header }),
      })
      res.end(JSON.stringify({ ok: false, error: "ratelimited" }))
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/`
  })
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))

  const failure = async () => {
    const client = new WebClient("xoxb-1-test", {
      slackApiUrl: url,
      retryConfig: { retries: 0 },
      rejectRateLimitedCalls: true,
      logLevel: LogLevel.ERROR,
    })
    return client.chat.postMessage({ channel: "C1", text: "x" }).then(
      () => expect.fail("Slack answered 429"),
      (error: unknown) => error,
    )
  }

  it.each([
    ["no header", undefined],
    ["an unreadable header", "soon"],
  ])("is a rate limit that pauses every delivery (%s), waiting the runtime's backoff", async (_, value) => {
    header = value
    const result = classify(await failure())
    expect(result).toMatchObject({ outcome: "retry", pauseAll: true })
    expect((result as { afterMs?: number }).afterMs).toBeUndefined()
  })

  it("keeps Slack's own Retry-After", async () => {
    header = "7"
    expect(classify(await failure())).toMatchObject({ outcome: "retry", afterMs: 7000, pauseAll: true })
  })
})
