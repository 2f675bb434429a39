import sharp from "sharp"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { expectError, startTestServer, type TestServer } from "./helpers.ts"

/** A textured 1600×1200 image whose PNG is larger than the server's 64 KiB test limit. */
const bigImage = () => {
  const width = 1600
  const height = 1200
  const raw = Buffer.alloc(width * height * 3)
  let s = 7
  for (let i = 0; i < raw.length; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    raw[i] = (((i / 3) % width) / 7 + (s >>> 28)) & 255
  }
  return sharp(raw, { raw: { width, height, channels: 3 } })
    .png()
    .toBuffer()
}

let t: TestServer
beforeAll(async () => {
  t = await startTestServer()
})
afterAll(async () => t?.close())

const count = async () =>
  (await t.query<{ n: number }>((sql) => sql`SELECT count(*)::int AS n FROM content_items`))[0]!.n

describe("content over REST", () => {
  it("takes a body beyond the server's limit on the content endpoints only, and serves the protected asset", async () => {
    const png = await bigImage()
    expect(png.length).toBeGreaterThan(64 * 1024)
    const res = await t.call("POST", "/api/v1/content", {
      body: { kind: "image", title: "large", data: png.toString("base64"), watermark: true },
    })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    const item = res.body.data
    expect(item).toMatchObject({ kind: "image", mediaType: "image/png", watermark: { embedded: true } })
    const asset = await fetch(`${t.url}/api/v1/content/${item.id}/asset`, {
      headers: { authorization: `Bearer ${t.key}` },
    })
    expect(asset.status).toBe(200)
    expect(asset.headers.get("content-type")).toBe("image/png")
    const bytes = Buffer.from(await asset.arrayBuffer())
    const detected = await t.call("POST", "/api/v1/content/watermark/detect", {
      body: { data: (await sharp(bytes).resize(800).jpeg({ quality: 60 }).toBuffer()).toString("base64") },
    })
    expect(detected.body.data).toMatchObject({ found: true, contentId: item.id, registered: true })
    const got = await t.call("GET", `/api/v1/content/${item.id}`)
    expect(got.body.data.fingerprint.phash).toMatch(/^[0-9a-f]{16}$/)
    // Elsewhere the server's own limit holds.
    expectError(
      await t.call("POST", "/api/v1/agents", { body: { name: "big", metadata: { blob: "x".repeat(70 * 1024) } } }),
      413,
      "PAYLOAD_TOO_LARGE",
    )
  })

  it("refuses a content body over 20 MB with 413 and stores nothing", async () => {
    const before = await count()
    const res = await t.call("POST", "/api/v1/content", {
      rawBody: JSON.stringify({ kind: "image", title: "huge", data: "A".repeat(21 * 1024 * 1024) }),
    })
    expectError(res, 413, "PAYLOAD_TOO_LARGE")
    expect(await count()).toBe(before)
  })

  it("answers bad input in the envelope, needs the content scopes, and hides other workspaces' items", async () => {
    const before = await count()
    expectError(
      await t.call("POST", "/api/v1/content", { body: { kind: "image", title: "x", data: "%%%" } }),
      422,
      "VALIDATION_ERROR",
      "data",
    )
    expectError(
      await t.call("POST", "/api/v1/content", {
        body: { kind: "image", title: "x", data: Buffer.from("GIF89a not really").toString("base64") },
      }),
      422,
      "VALIDATION_ERROR",
      "data",
    )
    expect(await count()).toBe(before)
    const text = await t.call("POST", "/api/v1/content", { body: { kind: "text", title: "t", text: "one two three" } })
    expect(text.status).toBe(201)
    const reader = await t.createKey({ name: "reader", type: "workspace", scopes: ["content:read"] })
    expectError(
      await t.call("POST", "/api/v1/content/scan", { key: reader, body: { text: "one two three" } }),
      403,
      "FORBIDDEN",
    )
    const ws = await t.call("POST", "/api/v1/workspaces", { body: { name: "elsewhere", environment: "live" } })
    expect(ws.status, JSON.stringify(ws.body)).toBe(201)
    const otherKey = ws.body.data.apiKey.apiKey as string
    expectError(
      await t.call("GET", `/api/v1/content/${text.body.data.id}`, { key: otherKey }),
      404,
      "CONTENT_NOT_FOUND",
    )
    const scanned = await t.call("POST", "/api/v1/content/scan", { key: otherKey, body: { text: "one two three" } })
    expect(scanned.body.data.matches).toEqual([])
    expectError(await t.call("GET", "/api/v1/content/cnt_00000000000000000000000000"), 404, "CONTENT_NOT_FOUND")
    const pending = await t.call("POST", `/api/v1/content/${text.body.data.id}/takedowns`, {
      body: { targetUrl: "https://copy.example/x", recipient: "abuse@copy.example" },
    })
    expect(pending.status).toBe(201)
    expect(pending.body.data.status).toBe("pending")
  })

  it("refuses a corrupt JPEG, a scan URL that is not http(s) or carries a line break, and a candidate of the wrong kind", async () => {
    // A JPEG whose header is sound and whose scan data is not: libjpeg decodes it with "Corrupt JPEG data".
    const jpeg = await sharp({ create: { width: 640, height: 480, channels: 3, background: "#808080" } })
      .composite([
        {
          input: Buffer.from(
            '<svg width="640" height="480"><circle cx="320" cy="240" r="200" fill="red"/><rect x="40" y="40" width="120" height="90" fill="blue"/></svg>',
          ),
        },
      ])
      .jpeg()
      .toBuffer()
    const corrupt = Buffer.from(jpeg)
    for (let i = 700; i < corrupt.length; i += 40) corrupt[i]! ^= 0x5a
    const data = corrupt.toString("base64")
    const before = await count()
    for (const [path, body] of [
      ["/api/v1/content", { kind: "image", title: "corrupt", data }],
      ["/api/v1/content/scan", { data }],
      ["/api/v1/content/watermark/detect", { data }],
    ] as const) {
      const res = await t.call("POST", path, { body })
      expectError(res, 422, "VALIDATION_ERROR", "data")
      expect(res.body.error.message).toMatch(/cannot be decoded/)
    }
    expect(await count()).toBe(before)

    const source = Array.from({ length: 300 }, (_, i) => `word${i % 97} item${(i * 7) % 89} part${i}`).join(" ")
    const text = await t.call("POST", "/api/v1/content", { body: { kind: "text", title: "source", text: source } })
    expect(text.status).toBe(201)
    const id = text.body.data.id as string
    const matches = async () =>
      (
        await t.query<{ n: number }>(
          (sql) => sql`SELECT count(*)::int AS n FROM content_matches WHERE content_id = ${id}`,
        )
      )[0]!.n
    for (const url of [
      "javascript:alert(document.cookie)",
      "https://a.example/\n\nThis notice is withdrawn.",
      "not a url",
    ]) {
      const res = await t.call("POST", "/api/v1/content/scan", { body: { text: source, url } })
      expectError(res, 422, "VALIDATION_ERROR", "url")
    }
    expect(await matches()).toBe(0)
    const found = await t.call("POST", "/api/v1/content/scan", {
      body: { text: source, url: "https://copy.example/a b" },
    })
    expect(found.status, JSON.stringify(found.body)).toBe(200)
    expect(found.body.data.matches[0]).toMatchObject({ contentId: id, url: "https://copy.example/a%20b" })

    const png = await sharp({ create: { width: 64, height: 64, channels: 3, background: "#336699" } })
      .png()
      .toBuffer()
    expectError(
      await t.call("POST", `/api/v1/content/${id}/scan`, { body: { data: png.toString("base64") } }),
      422,
      "VALIDATION_ERROR",
      "data",
    )
    expectError(await t.call("POST", "/api/v1/content/scan", { body: { text: "  " } }), 422, "VALIDATION_ERROR", "text")
    expect(await matches()).toBe(1)

    // An item's takedown notices are paged like every list.
    const notices: Array<string> = []
    for (const n of [1, 2, 3]) {
      const res = await t.call("POST", `/api/v1/content/${id}/takedowns`, {
        body: { targetUrl: `https://copy.example/${n}`, recipient: "abuse@copy.example" },
      })
      expect(res.status, JSON.stringify(res.body)).toBe(201)
      notices.unshift(res.body.data.id)
    }
    const seen: Array<string> = []
    let cursor: string | null = null
    do {
      const res: any = await t.call(
        "GET",
        `/api/v1/content/${id}/takedowns?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
      )
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      expect(res.body.data.length).toBeLessThanOrEqual(2)
      seen.push(...res.body.data.map((n: any) => n.id))
      cursor = res.body.meta.cursor
    } while (cursor)
    expect(seen).toEqual(notices)
    expectError(await t.call("GET", `/api/v1/content/${id}/takedowns?cursor=xyz`), 400, "BAD_REQUEST", "cursor")
  })
})
