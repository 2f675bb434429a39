import sharp from "sharp"
import { afterAll, beforeAll, expect, it } from "vitest"
import { AgentGov, AgentGovError } from "../src/index.ts"
import { startTestServer, type TestServer } from "./helpers.ts"

let t: TestServer
let client: AgentGov
beforeAll(async () => {
  t = await startTestServer()
  client = new AgentGov({ apiKey: t.key, baseUrl: t.url, maxRetries: 0 })
})
afterAll(async () => t?.close())

const ARTICLE = Array.from({ length: 60 }, (_, i) => `word${i} alpha${i % 7} beta${(i * 3) % 11}`).join(" ")

it("registers, scans, reads the asset and the watermark, and files a takedown through the SDK", async () => {
  const text = await client.content.register({ kind: "text", title: "article", text: ARTICLE })
  expect(text.fingerprint.algorithm).toBe("winnow-5w8-minhash64")
  const scan = await client.content.scan({ text: `Preface here. ${ARTICLE.slice(0, 300)} and more.` })
  expect(scan.matches[0]).toMatchObject({ contentId: text.id, method: "text-winnowing" })
  const one = await client.content.scan({ contentId: text.id, text: "unrelated words only" })
  expect(one.matches).toEqual([])
  const got = await client.content.get(text.id)
  expect(got.matches?.[0]?.id).toBe(scan.matches[0]!.id)

  const png = await sharp({ create: { width: 320, height: 320, channels: 3, background: "#3a7" } })
    .composite([
      { input: Buffer.from('<svg width="320" height="320"><circle cx="120" cy="140" r="80" fill="#e52"/></svg>') },
    ])
    .png()
    .toBuffer()
  const image = await client.content.register({
    kind: "image",
    title: "logo",
    data: png.toString("base64"),
    watermark: true,
  })
  const asset = await client.content.asset(image.id)
  expect(asset.contentType).toBe("image/png")
  const read = await client.content.detectWatermark(Buffer.from(asset.data).toString("base64"))
  expect(read).toMatchObject({ found: true, contentId: image.id, registered: true })

  const notice = await client.content.takedowns.create(text.id, {
    matchId: scan.matches[0]!.id!,
    targetUrl: "https://copy.example/a",
    recipient: "abuse@copy.example",
  })
  expect(notice.status).toBe("pending")
  expect((await client.content.takedowns.list(text.id).toArray()).map((n) => n.id)).toEqual([notice.id])
  const missing = await client.content.get("cnt_00000000000000000000000000").catch((e) => e)
  expect(missing).toBeInstanceOf(AgentGovError)
  expect(missing.code).toBe("CONTENT_NOT_FOUND")
})
