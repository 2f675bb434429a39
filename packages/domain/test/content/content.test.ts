import { createPrivateKey } from "node:crypto"
import { type AddressInfo, createServer, type Socket } from "node:net"
import { Context, Effect, Exit, Layer } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import sharp from "sharp"
import { SMTPServer } from "smtp-server"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { C2PA_SEALED_AAD } from "../../src/content/C2paSigner.ts"
import { IMAGE_SLOTS, takeImageSlotsPeak } from "../../src/content/loadSharp.ts"
import { detectWatermark } from "../../src/content/watermark.ts"
import {
  type Actor,
  Authenticator,
  C2paSigner,
  ContentService,
  ContentSettings,
  EventService,
  issueCredential,
  MasterKey,
  readManifest,
  signManifest,
  TAKEDOWNS_PER_DAY,
  TEXT_LOOKUP_SQL,
  WorkspaceService,
} from "../../src/index.ts"
import { seal } from "../../src/keys/sealed.ts"
import { type DomainTestRuntime, makeDomainRuntime, type R } from "../runtime.ts"
import { ARTICLE, scene } from "./corpus.ts"

let env: DomainTestRuntime
let actor: Actor
let other: Actor
beforeAll(async () => {
  env = await makeDomainRuntime()
  const make = async (name: string) => {
    const { apiKey } = await env.run(WorkspaceService.use((s) => s.create(null, { name, environment: "live" })))
    return env.run(Authenticator.use((a) => a.authenticate(apiKey.apiKey)))
  }
  actor = await make("publisher")
  other = await make("stranger")
})
afterAll(async () => env?.dispose())
const run = <A, E>(effect: Effect.Effect<A, E, R>): Promise<A> => env.run(effect)
const fail = <A, E>(effect: Effect.Effect<A, E, R>): Promise<E> => env.failure(effect)
const content = <A, E>(f: (s: ContentService["Service"]) => Effect.Effect<A, E, R>) => ContentService.use(f)
const rows = (table: string) =>
  run(SqlClient.SqlClient.use((sql) => sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql(table)}`)).then(
    (r) => r[0]!.n,
  )
const counts = async () => ({
  items: await rows("content_items"),
  blocks: await rows("content_image_hashes"),
  fingerprints: await rows("content_text_fingerprints"),
  matches: await rows("content_matches"),
})
const eventsOf = async (type: string) =>
  (await run(EventService.use((s) => s.list(actor, { types: [type], limit: 100 } as never)))).data

describe("registering and scanning texts", () => {
  it("registers a text, finds a disguised partial copy with spans in both texts, records the match once above threshold", async () => {
    const item = await run(content((s) => s.register(actor, { kind: "text", title: "Harbour report", text: ARTICLE })))
    expect(item.id).toMatch(/^cnt_/)
    expect(item.fingerprint).toMatchObject({ algorithm: "winnow-5w8-minhash64", words: 107 })
    const registered = await eventsOf("content.registered")
    expect(registered.at(0)?.data).toMatchObject({ contentId: item.id, mediaType: "text/plain", watermarked: false })

    const copied = ARTICLE.slice(ARTICLE.indexOf("A compromise"), ARTICLE.indexOf("The council"))
      .replaceAll("o", "ο")
      .replaceAll(" ", " \u200b")
    const candidate = `Blog post. I think the town should do something different entirely. ${copied} Anyway, that is my view.`
    const result = await run(content((s) => s.scan(actor, { text: candidate, url: "https://copy.example/post" })))
    expect(result.matches).toHaveLength(1)
    const m = result.matches[0]!
    expect(m).toMatchObject({ contentId: item.id, method: "text-winnowing", url: "https://copy.example/post" })
    expect(m.id).toMatch(/^mch_/)
    const span = m.spans![0]!
    expect(ARTICLE.slice(span.registered.start, span.registered.end)).toMatch(/^A compromise.*approaches$/)
    expect(candidate.slice(span.candidate.start, span.candidate.end)).toContain("\u200b")
    const detected = await eventsOf("content.match.detected")
    expect(detected.at(0)?.data).toMatchObject({ contentId: item.id, matchId: m.id })
    const got = await run(content((s) => s.get(actor, item.id)))
    expect(got.matches?.map((x) => x.id)).toEqual([m.id])

    // The item-scoped scan answers the same; an unrelated text matches nothing and records nothing.
    const before = await counts()
    expect((await run(content((s) => s.scan(actor, { text: "Nothing alike here at all." }, item.id)))).matches).toEqual(
      [],
    )
    expect(await counts()).toEqual(before)
  })

  it("a text repeating one phrase stores a few positions of it and scans against itself in a few runs, not N²", async () => {
    // Review "content": 5,000 × "spam" registered and scanned paired every position with every other (25,000,000
    // seeds, 4 GB and 45 s in the server, then a 500). Each hash now keeps at most 8 positions on either side.
    const text = Array.from({ length: 1_500 }, () => "spam").join(" ")
    const item = await run(content((s) => s.register(actor, { kind: "text", title: "spam", text })))
    expect(item.fingerprint).toMatchObject({ words: 1_500 })
    expect((item.fingerprint as { fingerprints: number }).fingerprints).toBeLessThanOrEqual(8)
    const result = await run(content((s) => s.scan(actor, { text: `${text} tail words` }, item.id)))
    expect(result.matches).toHaveLength(1)
    expect(result.matches[0]).toMatchObject({ contentId: item.id, similarity: 1, method: "text-winnowing" })
    // One run a diagonal seeded: the 8 first positions against the 8 first are 15 diagonals.
    expect(result.matches[0]!.spans!.length).toBeLessThanOrEqual(15)
    expect(result.matches[0]!.spans![0]).toMatchObject({ words: 1_500, registered: { start: 0, end: text.length } })
  })

  it("looks the candidate's fingerprints up by a join, never searching the list of them for each row found", async () => {
    // Review "content": `= ANY(ARRAY(…))` on a lossy hash index was rechecked row by row against the whole list
    // (not a constant, so searched linearly): a 2,000,000-character candidate spent 7.9 s of PostgreSQL in it.
    const hashes = Array.from({ length: 5_000 }, (_, i) => String(i * 7919))
    const plan = await run(
      SqlClient.SqlClient.use((sql) =>
        sql.unsafe<Record<string, string>>(`EXPLAIN ${TEXT_LOOKUP_SQL}`, [actor.workspaceId, hashes, null]),
      ),
    )
    const text = plan.map((r) => Object.values(r)[0]).join("\n")
    expect(text).toContain("content_text_fingerprints")
    expect(text).not.toMatch(/ANY/)
  })

  it("verifies a scan's candidate texts in bounded batches, finding every match", async () => {
    // Review "content3": a scan tokenised every candidate item's whole text (up to 50 of 2,000,000 characters) in
    // one go: 20 such texts sharing a phrase held the event loop 3.8 s per scan (every workspace's requests
    // waited), with all 50 texts' assets in memory at once. Each item is now loaded (at most 8 MiB of text a query)
    // and verified in turn, giving other requests a turn between items. The stall was measured from outside (6.7–9.6 s
    // before, 1.7–2.3 s after, on a loaded machine); tests assert no timings: this one holds that the 12 texts, more
    // than one batch, are all still found.
    const { apiKey } = await run(
      WorkspaceService.use((s) => s.create(null, { name: "long texts", environment: "live" })),
    )
    const owner = await run(Authenticator.use((a) => a.authenticate(apiKey.apiKey)))
    const phrase =
      "the quick brown fox jumps over the lazy dog while seven wizards quietly judge boxing matches at dawn"
    for (let k = 0; k < 12; k++) {
      const words = Array.from({ length: 25_000 }, (_, i) => `алфавит école ${(i * 7919 + k * 104729).toString(36)}`)
      await run(
        content((s) => s.register(owner, { kind: "text", title: `long ${k}`, text: `${phrase} ${words.join(" ")}` })),
      )
    }
    const result = await run(content((s) => s.scan(owner, { text: `${phrase} ${phrase}` })))
    expect(result.matches).toHaveLength(12)
  })

  it("another workspace's item is not found, and its texts are not scanned", async () => {
    const mine = await run(content((s) => s.register(actor, { kind: "text", title: "secret", text: ARTICLE })))
    expect((await fail(content((s) => s.get(other, mine.id))))._tag).toBe("ContentNotFound")
    expect((await fail(content((s) => s.scan(other, { text: ARTICLE }, mine.id))))._tag).toBe("ContentNotFound")
    expect((await fail(content((s) => s.listTakedowns(other, mine.id, {}))))._tag).toBe("ContentNotFound")
    expect((await run(content((s) => s.scan(other, { text: ARTICLE })))).matches).toEqual([])
  })
})

describe("registering and scanning images", () => {
  it("registers a watermarked image; a recompressed, downscaled copy is found by pHash and by its watermark", async () => {
    const original = await scene(7)
    const item = await run(
      content((s) =>
        s.register(actor, { kind: "image", title: "scene", data: original.toString("base64"), watermark: true }),
      ),
    )
    expect(item).toMatchObject({ mediaType: "image/jpeg", watermark: { embedded: true } })
    expect(item.watermark.psnr).toBeGreaterThanOrEqual(40)
    const asset = await run(content((s) => s.asset(actor, item.id)))
    const copy = await sharp(asset.data).resize(320).jpeg({ quality: 40 }).toBuffer()
    const result = await run(content((s) => s.scan(actor, { data: copy.toString("base64") })))
    expect(result.matches[0]).toMatchObject({ contentId: item.id, method: "phash", watermark: { contentId: item.id } })
    expect(result.matches[0]!.distance).toBeLessThanOrEqual(10)
    const mirrored = await sharp(original).flop().toBuffer()
    const viaMirror = await run(content((s) => s.scan(actor, { data: mirrored.toString("base64") }, item.id)))
    expect(viaMirror.matches[0]).toMatchObject({ contentId: item.id, method: "phash-mirror" })
    const read = await run(content((s) => s.detectWatermark(actor, copy.toString("base64"))))
    expect(read).toMatchObject({ found: true, contentId: item.id, registered: true })
    // Another workspace reads the id but does not hold it.
    expect(await run(content((s) => s.detectWatermark(other, copy.toString("base64"))))).toMatchObject({
      registered: false,
    })
    expect((await run(content((s) => s.scan(other, { data: copy.toString("base64") })))).matches).toEqual([])
  })

  it("works on at most IMAGE_SLOTS images at once: eight registrations and scans at once take turns", async () => {
    // A workspace of its own: the other cases scan for these scenes.
    const { apiKey } = await env.run(
      WorkspaceService.use((s) => s.create(null, { name: "slots", environment: "live" })),
    )
    const own = await env.run(Authenticator.use((a) => a.authenticate(apiKey.apiKey)))
    const images = await Promise.all([11, 12, 13, 14].map((n) => scene(n)))
    takeImageSlotsPeak()
    const done = await Promise.all([
      ...images.map((img, i) =>
        run(content((s) => s.register(own, { kind: "image", title: `slot ${i}`, data: img.toString("base64") }))),
      ),
      ...images.map((img) => run(content((s) => s.scan(own, { data: img.toString("base64") })))),
    ])
    expect(done).toHaveLength(8)
    const peak = takeImageSlotsPeak()
    expect(peak).toBeGreaterThanOrEqual(1)
    expect(peak).toBeLessThanOrEqual(IMAGE_SLOTS)
  })

  it("refuses a watermark that does not read back (a logo on a transparent background) and stores nothing", async () => {
    // Review "content": such a PNG was registered `watermark: {embedded: true}` though its own asset read no id:
    // the reader flattens on white, and the change under transparent pixels shows nothing.
    const side = 512
    const raw = Buffer.alloc(side * side * 4)
    for (let y = 0; y < side; y++)
      for (let x = 0; x < side; x++) {
        const i = (y * side + x) * 4
        const inside = (x - 256) ** 2 + (y - 256) ** 2 < 180 ** 2
        raw[i] = inside ? (x * 3 + y * 5) & 255 : 0
        raw[i + 1] = inside ? (x * 7) & 255 : 0
        raw[i + 2] = inside ? (y * 3) & 255 : 0
        raw[i + 3] = inside ? 255 : 0
      }
    const logo = await sharp(raw, { raw: { width: side, height: side, channels: 4 } })
      .png()
      .toBuffer()
    // Whether the mark reads back depends on the id's bits: for about 6% of ids it does on this logo (18 of 300, before
    // and after the 16-bit change), and then the item is registered, its asset reading its id. That is the rule this
    // case holds, for each attempt; the first refusal (within five ids, all but certainly) shows the other side.
    let refused: unknown
    for (let attempt = 0; attempt < 5 && refused === undefined; attempt++) {
      const before = await counts()
      const exit = await env.rt.runPromiseExit(
        content((s) =>
          s.register(actor, { kind: "image", title: "logo", data: logo.toString("base64"), watermark: true }),
        ),
      )
      if (Exit.isSuccess(exit)) {
        expect(exit.value.watermark).toMatchObject({ embedded: true })
        const asset = await run(content((s) => s.asset(actor, exit.value.id)))
        expect((await detectWatermark(asset.data))?.contentId).toBe(exit.value.id)
        continue
      }
      const error = Exit.findErrorOption(exit)
      refused = error._tag === "Some" ? error.value : undefined
      expect(refused).toMatchObject({ _tag: "InvalidInput", field: "watermark" })
      expect(await counts()).toEqual(before)
    }
    expect(refused).toBeDefined()
    // Without a watermark it registers.
    const plain = await run(
      content((s) => s.register(actor, { kind: "image", title: "logo", data: logo.toString("base64") })),
    )
    expect(plain.watermark).toEqual({ embedded: false })
  })

  it("refuses a watermark on an animated image rather than answer a still one, and keeps it as sent without", async () => {
    // Review "content": an animated WebP registered with `watermark: true` came back as its first frame alone.
    const frames = Buffer.concat([
      await sharp(await scene(15))
        .raw()
        .toBuffer(),
      await sharp(await scene(16))
        .raw()
        .toBuffer(),
    ])
    const { width, height } = await sharp(await scene(15)).metadata()
    const animated = await sharp(frames, {
      raw: { width: width!, height: height! * 2, channels: 3, pageHeight: height! },
    })
      .webp({ loop: 0 })
      .toBuffer()
    expect((await sharp(animated).metadata()).pages).toBe(2)
    const before = await counts()
    expect(
      await fail(
        content((s) =>
          s.register(actor, { kind: "image", title: "anim", data: animated.toString("base64"), watermark: true }),
        ),
      ),
    ).toMatchObject({ _tag: "InvalidInput", field: "watermark" })
    expect(await counts()).toEqual(before)
    const kept = await run(
      content((s) => s.register(actor, { kind: "image", title: "anim", data: animated.toString("base64") })),
    )
    expect((await run(content((s) => s.asset(actor, kept.id)))).data.equals(animated)).toBe(true)
  })

  it("keeps a 16-bit PNG 16-bit when watermarking it, its low bits untouched but for the mark", async () => {
    // Review "content": the watermarked asset of a 16-bit PNG came back 8-bit, its low byte silently dropped.
    const { data, info } = await sharp(await scene(17))
      .raw()
      .toBuffer({ resolveWithObject: true })
    // Genuine 16-bit samples: the low byte is not a copy of the high one (as an 8-bit image widened would be).
    const deep = new Uint16Array(data.length)
    for (let i = 0; i < data.length; i++) deep[i] = data[i]! * 256 + ((i * 37) % 251)
    const png16 = await sharp(deep, { raw: { width: info.width, height: info.height, channels: 3 } })
      .toColourspace("rgb16")
      .png()
      .toBuffer()
    expect((await sharp(png16).metadata()).depth).toBe("ushort")
    const item = await run(
      content((s) =>
        s.register(actor, { kind: "image", title: "deep", data: png16.toString("base64"), watermark: true }),
      ),
    )
    expect(item).toMatchObject({ mediaType: "image/png", watermark: { embedded: true } })
    expect(item.watermark.psnr).toBeGreaterThanOrEqual(40)
    const asset = (await run(content((s) => s.asset(actor, item.id)))).data
    expect(await sharp(asset).metadata()).toMatchObject({ depth: "ushort", width: info.width, height: info.height })
    const out = await sharp(asset).toColourspace("rgb16").raw({ depth: "ushort" }).toBuffer()
    const marked = new Uint16Array(out.buffer, out.byteOffset, out.length / 2)
    // The mark moves a sample by whole 8-bit steps (257 of 65,535); what it leaves alone keeps its low byte.
    let kept = 0
    let squared = 0
    for (let i = 0; i < deep.length; i++) {
      if (marked[i] === deep[i]) kept++
      squared += ((marked[i]! - deep[i]!) / 257) ** 2
    }
    expect(kept / deep.length).toBeGreaterThan(0.3)
    expect(10 * Math.log10((255 * 255) / (squared / deep.length))).toBeGreaterThanOrEqual(40)
    expect(await run(content((s) => s.detectWatermark(actor, asset.toString("base64"))))).toMatchObject({
      found: true,
      contentId: item.id,
    })
  })

  it("reads an EXIF-rotated photo as it is displayed: its size, its hashes, its watermark and a rotated copy's", async () => {
    // Review "content": a photo stored on its side with EXIF orientation 6 was recorded with the stored width and
    // height (480×640 for a 640×480 picture), and a copy of a watermarked asset saved the same way read no mark.
    const upright = await scene(18)
    const onItsSide = await sharp(upright).rotate(-90).withMetadata({ orientation: 6 }).jpeg({ quality: 92 }).toBuffer()
    expect(await sharp(onItsSide).metadata()).toMatchObject({ width: 480, height: 640, orientation: 6 })
    const kept = await run(
      content((s) => s.register(actor, { kind: "image", title: "side", data: onItsSide.toString("base64") })),
    )
    expect(kept.fingerprint).toMatchObject({ width: 640, height: 480 })
    // Kept as sent, orientation and all: it displays as before.
    expect((await run(content((s) => s.asset(actor, kept.id)))).data.equals(onItsSide)).toBe(true)
    // The upright copy is the same picture: the same hashes.
    const found = await run(content((s) => s.scan(actor, { data: upright.toString("base64") }, kept.id)))
    expect(found.matches[0]).toMatchObject({ contentId: kept.id, method: "phash" })
    expect(found.matches[0]!.distance).toBeLessThanOrEqual(2)

    const marked = await run(
      content((s) =>
        s.register(actor, { kind: "image", title: "side", data: onItsSide.toString("base64"), watermark: true }),
      ),
    )
    expect(marked.fingerprint).toMatchObject({ width: 640, height: 480 })
    // The mark is drawn on the picture as displayed, and the asset carries it upright, with no orientation left.
    const asset = (await run(content((s) => s.asset(actor, marked.id)))).data
    const shown = await sharp(asset).metadata()
    expect([shown.width, shown.height, shown.orientation]).toEqual([640, 480, undefined])
    // A copy saved on its side again, with the tag that turns it upright, reads the mark.
    const copy = await sharp(asset).rotate(90).withMetadata({ orientation: 8 }).jpeg({ quality: 90 }).toBuffer()
    expect(await run(content((s) => s.detectWatermark(actor, copy.toString("base64"))))).toMatchObject({
      found: true,
      contentId: marked.id,
    })
  })

  it("an image registered after the workspace's first scan is found; another workspace's under the same tag is not", async () => {
    // The publisher's index is already copied into this process (the test above scanned): a later registration
    // reaches the copy through the sync before the next scan (imageIndex.ts, migration 0024).
    const mine = await scene(13)
    const registered = await run(
      content((s) => s.register(actor, { kind: "image", title: "mine", data: mine.toString("base64") })),
    )
    const myCopy = (await sharp(mine).resize(320).jpeg({ quality: 70 }).toBuffer()).toString("base64")
    expect((await run(content((s) => s.scan(actor, { data: myCopy })))).matches[0]).toMatchObject({
      contentId: registered.id,
      method: "phash",
    })
    // The multi-index keys rows by a 32-bit hash of the workspace id (migration 0021): two workspaces may share
    // it. Give the stranger's image rows under the publisher's tag, as such a pair's registration would write
    // them, and scan as the publisher.
    const original = await scene(11)
    const theirs = await run(
      content((s) => s.register(other, { kind: "image", title: "theirs", data: original.toString("base64") })),
    )
    await run(
      SqlClient.SqlClient.use(
        (sql) =>
          sql`INSERT INTO content_image_hashes (content_id, mirror, hash, tag)
            SELECT content_id, mirror, hash, hashtext(${actor.workspaceId}) FROM content_image_hashes
            WHERE content_id = ${theirs.id}`,
      ),
    )
    const copy = (await sharp(original).resize(320).jpeg({ quality: 70 }).toBuffer()).toString("base64")
    expect((await run(content((s) => s.scan(actor, { data: copy })))).matches.map((m) => m.contentId)).not.toContain(
      theirs.id,
    )
    // The probe did meet its rows (they carry the publisher's tag): the items' own workspace kept them out.
    const found = await run(
      SqlClient.SqlClient.use(
        (sql) =>
          sql<{
            n: number
          }>`SELECT count(*)::int AS n FROM content_image_hashes WHERE tag = hashtext(${actor.workspaceId}) AND content_id = ${theirs.id}`,
      ),
    )
    expect(found[0]!.n).toBe(2)
  })

  it("refuses bad base64, a non-image labelled as one, a decompression bomb and a text sent as data; stores nothing", async () => {
    const before = await counts()
    const register = (data: string) =>
      fail(content((s) => s.register(actor, { kind: "image", title: "x", data, watermark: true })))
    const bad = await register("not base64!!")
    expect(bad).toMatchObject({ _tag: "InvalidInput", field: "data", message: "is not valid base64" })
    const pdf = await register(Buffer.from("%PDF-1.4 not an image").toString("base64"))
    expect(pdf).toMatchObject({ _tag: "InvalidInput", field: "data" })
    const gif = await sharp({ create: { width: 32, height: 32, channels: 3, background: "red" } })
      .gif()
      .toBuffer()
    expect(await register(gif.toString("base64"))).toMatchObject({ message: expect.stringContaining("gif") })
    // 8,000 × 6,000 pixels of one colour: a small PNG that would decode to 144 MB, over the 40-megapixel limit.
    const bomb = await sharp({
      create: { width: 8_000, height: 6_000, channels: 3, background: "white" },
      limitInputPixels: false,
    })
      .png({ compressionLevel: 9 })
      .toBuffer()
    expect(bomb.length).toBeLessThan(2_000_000)
    expect(await register(bomb.toString("base64"))).toMatchObject({
      field: "data",
      message: expect.stringContaining("more than"),
    })
    const small = await sharp({ create: { width: 64, height: 64, channels: 3, background: "blue" } })
      .png()
      .toBuffer()
    expect(await register(small.toString("base64"))).toMatchObject({ field: "watermark" })
    expect(
      await fail(content((s) => s.register(actor, { kind: "text", title: "t", text: "words", watermark: true }))),
    ).toMatchObject({ field: "watermark" })
    expect(
      await fail(content((s) => s.register(actor, { kind: "text", title: "t", text: "\u200b \u200d" }))),
    ).toMatchObject({
      field: "text",
    })
    expect(await fail(content((s) => s.scan(actor, { data: "@@@" })))).toMatchObject({ field: "data" })
    expect(await counts()).toEqual(before)
  })
})

describe("C2PA", () => {
  it("signs a manifest c2pa-rs validates (Trusted with the service's CA as anchor); a modified byte breaks its hard binding", async () => {
    const original = await scene(11)
    const item = await run(
      content((s) =>
        s.register(actor, {
          kind: "image",
          title: "signed",
          data: original.toString("base64"),
          watermark: true,
          c2pa: true,
        }),
      ),
    )
    expect(item).toMatchObject({ c2pa: { signed: true, source: "issued" }, watermark: { embedded: true } })
    expect((await eventsOf("content.registered")).at(0)?.data).toMatchObject({ contentId: item.id, c2pa: true })
    const { data } = await run(content((s) => s.asset(actor, item.id)))
    const { anchorsPem } = await run(C2paSigner.use((s) => s.signing))
    const untrusted = await readManifest(data, "image/jpeg", undefined)
    expect(untrusted).toMatchObject({ present: true, valid: true, state: "Valid" })
    const trusted = await readManifest(data, "image/jpeg", anchorsPem)
    expect(trusted).toMatchObject({
      present: true,
      valid: true,
      state: "Trusted",
      author: actor.workspaceId,
      softBinding: item.id,
      failures: [],
    })
    expect(trusted.actions).toContain("c2pa.created")
    // The watermark survives the manifest: it is still read from the signed asset.
    expect((await run(content((s) => s.detectWatermark(actor, data.toString("base64"))))).contentId).toBe(item.id)

    // One byte of the image data changed (inside the JPEG's entropy-coded data, before its end marker).
    const modified = Buffer.from(data)
    modified[modified.length - 100] = modified[modified.length - 100]! ^ 0x01
    const broken = await readManifest(modified, "image/jpeg", anchorsPem)
    expect(broken).toMatchObject({ present: true, valid: false, state: "Invalid" })
    expect(broken.failures).toContain("assertion.dataHash.mismatch")

    const scanned = await run(content((s) => s.scan(actor, { data: data.toString("base64") })))
    expect(scanned.c2pa).toMatchObject({ present: true, valid: true, state: "Trusted" })
    expect(scanned.matches[0]).toMatchObject({ contentId: item.id })
    const scannedBroken = await run(content((s) => s.scan(actor, { data: modified.toString("base64") })))
    expect(scannedBroken.c2pa).toMatchObject({ present: true, valid: false })
    const plain = await run(content((s) => s.scan(actor, { data: original.toString("base64") })))
    expect(plain.c2pa).toEqual({ present: false })
  })

  it("signs a small image sent as base64 (decoded into Node's shared pool) over its own bytes", async () => {
    // Review "content3": the asset was handed to c2pa-rs as the whole ArrayBuffer behind its Buffer; a small upload is
    // decoded into Node's shared buffer pool, so c2pa-rs read the pool from its start (other requests' bytes): a
    // 500 ("Could not parse input JPEG"), or a manifest signed over whatever image lay there.
    const small = await sharp(await scene(19))
      .resize(96, 96)
      .jpeg()
      .toBuffer()
    const data = small.toString("base64")
    // The case: the decoded bytes are a view into a larger buffer.
    expect(Buffer.from(data, "base64").buffer.byteLength).toBeGreaterThan(small.length)
    const item = await run(content((s) => s.register(actor, { kind: "image", title: "small", data, c2pa: true })))
    const { data: asset } = await run(content((s) => s.asset(actor, item.id)))
    const { anchorsPem } = await run(C2paSigner.use((s) => s.signing))
    expect(await readManifest(asset, "image/jpeg", anchorsPem)).toMatchObject({ present: true, valid: true })
    const pixels = async (b: Buffer) => sharp(b).raw().toBuffer()
    expect((await pixels(asset)).equals(await pixels(small))).toBe(true)
  })

  it("never fetches a remote manifest an image names (dcterms:provenance): a scan made no request of its own", async () => {
    // Review "content3": c2pa-rs follows an XMP `dcterms:provenance` URL to a remote manifest by default, so a
    // scanned JPEG or WebP made the server GET any address it named (loopback, a metadata service): an SSRF.
    const requests: Array<string> = []
    const listener = createServer((socket) => {
      socket.once("data", (d) => requests.push(d.toString("latin1").split("\r\n")[0]!))
      socket.end("HTTP/1.1 200 OK\r\nContent-Type: application/c2pa\r\nContent-Length: 4\r\n\r\nnope")
    })
    await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve))
    const { port } = listener.address() as AddressInfo
    const xmp = `<?xpacket begin="\ufeff" id="W5M0MpCehiHzreSzNTczkc9d"?><x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description rdf:about="" xmlns:dcterms="http://purl.org/dc/terms/" dcterms:provenance="http://127.0.0.1:${port}/internal/secret.c2pa"/></rdf:RDF></x:xmpmeta><?xpacket end="w"?>`
    try {
      for (const format of ["jpeg", "webp"] as const) {
        const image = await sharp(await scene(18))
          [format]()
          .withXmp(xmp)
          .toBuffer()
        const scanned = await run(content((s) => s.scan(actor, { data: image.toString("base64") })))
        expect(scanned.c2pa.valid ?? false).toBe(false)
      }
      await new Promise((resolve) => setTimeout(resolve, 200))
      expect(requests).toEqual([])
    } finally {
      listener.close()
    }
  })

  it("reports a manifest whose assertion c2pa-rs cannot decode as present and invalid, not a 500", async () => {
    // Review "content": the map of the soft binding's `scope` given a wrong length (CBOR 0xa2 → 0xa5) made c2pa-rs
    // load no active manifest, and reading its assertions threw (a 500 on the scan).
    const original = await scene(12)
    const item = await run(
      content((s) =>
        s.register(actor, {
          kind: "image",
          title: "c",
          data: original.toString("base64"),
          watermark: true,
          c2pa: true,
        }),
      ),
    )
    const { data } = await run(content((s) => s.asset(actor, item.id)))
    const at = data.indexOf("escope", 0, "latin1") - 1
    expect(data[at]).toBe(0xa2)
    const forged = Buffer.from(data)
    forged[at] = 0xa5
    const { anchorsPem } = await run(C2paSigner.use((s) => s.signing))
    const reading = await readManifest(forged, "image/jpeg", anchorsPem)
    expect(reading).toMatchObject({ present: true, valid: false, state: "Invalid" })
    expect(reading.failures!.length).toBeGreaterThan(0)
    const scanned = await run(content((s) => s.scan(actor, { data: forged.toString("base64") })))
    expect(scanned.c2pa).toMatchObject({ present: true, valid: false, state: "Invalid" })
  })

  /** A signer as a (re)started instance builds it, reading the row (not the runtime's, which keeps its copy). */
  const freshSigner = () =>
    Effect.scoped(Layer.build(Layer.fresh(C2paSigner.layer))).pipe(
      Effect.map((ctx) => Context.get(ctx, C2paSigner)),
    ) as unknown as Effect.Effect<C2paSigner["Service"], never, R>

  it("renews an issued signing certificate with a year or less left, keeping the earlier CA as an anchor", async () => {
    // Review "content": the issued certificate lives 2 years and was never replaced. Past its end c2pa-rs refuses
    // to sign with it (every `c2pa: true` registration a 500) and every manifest it signed reads `expired`.
    type Row = { id: string; ca_pem: string; cert_pem: string; sealed_key: string; created_at: Date }
    await run(C2paSigner.use((s) => s.signing))
    const [saved] = await run(SqlClient.SqlClient.use((sql) => sql<Row>`SELECT * FROM c2pa_credentials`))
    const old = await issueCredential("agentgov", new Date(Date.now() - 731 * 86_400_000))
    const { key: master } = await run(
      MasterKey.use((m) => Effect.succeed(m)) as unknown as Effect.Effect<{ key: Buffer }, never, R>,
    )
    const write = (r: { ca: string; cert: string; sealed: string }) =>
      run(
        SqlClient.SqlClient.use(
          (sql) =>
            sql`UPDATE c2pa_credentials SET ca_pem = ${r.ca}, cert_pem = ${r.cert}, sealed_key = ${r.sealed}
              WHERE id = 'service'`,
        ),
      )
    await write({ ca: old.caPem, cert: old.certPem, sealed: seal(master, C2PA_SEALED_AAD("service"), old.keyPkcs8) })
    try {
      // A signer as a (re)started instance builds it, reading the row.
      const signer = await run(freshSigner())
      const { credential, anchorsPem } = await run(signer.signing)
      const [row] = await run(SqlClient.SqlClient.use((sql) => sql<Row>`SELECT * FROM c2pa_credentials`))
      expect(row!.cert_pem).not.toBe(old.certPem)
      expect(anchorsPem).toBe(row!.ca_pem)
      expect(anchorsPem).toContain(old.caPem.trim())
      expect(anchorsPem!.indexOf(old.caPem.trim())).toBeGreaterThan(0)
      const signed = await signManifest(await scene(14), "image/jpeg", credential, {
        title: "t",
        author: actor.workspaceId,
        contentId: "cnt_01m8k4g1qr9n8pgknvejmj1q66",
        watermarked: false,
      })
      expect(await readManifest(signed, "image/jpeg", anchorsPem)).toMatchObject({ state: "Trusted", failures: [] })
      // Another instance reading the renewed row keeps it (nothing left to renew).
      const again = await run(freshSigner())
      expect((await run(again.signing)).anchorsPem).toBe(row!.ca_pem)
    } finally {
      await write({ ca: saved!.ca_pem, cert: saved!.cert_pem, sealed: saved!.sealed_key })
    }
  })

  it("an operator's certificate out of its validity is a 409 naming it, not a 500, and nothing is stored", async () => {
    const expired = await issueCredential("operator", new Date(Date.now() - 800 * 86_400_000))
    const keyPem = createPrivateKey({ key: expired.keyPkcs8, format: "der", type: "pkcs8" })
      .export({ format: "pem", type: "pkcs8" })
      .toString()
    const operator = {
      smtpUrl: undefined,
      from: "t@localhost",
      c2paCertPem: `${expired.certPem}\n${expired.caPem}`,
      c2paKeyPem: keyPem,
    }
    // A content service as an instance configured with that credential builds it.
    const service = (await run(
      Effect.scoped(
        Layer.build(Layer.fresh(ContentService.layer).pipe(Layer.provide(Layer.fresh(C2paSigner.layer)))),
      ).pipe(
        Effect.map((ctx) => Context.get(ctx, ContentService)),
        Effect.provideService(ContentSettings, operator),
      ) as unknown as Effect.Effect<ContentService["Service"], never, R>,
    )) as ContentService["Service"]
    const before = await counts()
    const refused = await fail(
      service.register(actor, { kind: "image", title: "t", data: (await scene(15)).toString("base64"), c2pa: true }),
    )
    expect(refused).toMatchObject({ _tag: "StateConflict", code: "C2PA_CREDENTIAL_INVALID" })
    expect((refused as { message: string }).message).toContain("AGENTGOV_C2PA_CERT")
    expect(await counts()).toEqual(before)
  })

  it("keeps the service's signing key sealed, and signs texts never", async () => {
    const [row] = await run(
      SqlClient.SqlClient.use((sql) => sql<{ sealed_key: string; ca_pem: string }>`SELECT * FROM c2pa_credentials`),
    )
    expect(row!.ca_pem).toContain("BEGIN CERTIFICATE")
    expect(row!.sealed_key).toMatch(/^v1\./)
    expect(row!.sealed_key).not.toContain("PRIVATE KEY")
    expect(
      await fail(content((s) => s.register(actor, { kind: "text", title: "t", text: "some words", c2pa: true }))),
    ).toMatchObject({ field: "c2pa" })
  })
})

describe("takedowns", () => {
  it("refuses a recipient holding a control or format character, which the mail's header and envelope differ on", async () => {
    // Review "content3": "a\u0001b@x.example" and "a\u0085b@x.example" passed the address check; nodemailer drops
    // the character from the To header but sends it in RCPT TO, and U+202E shows the address reversed.
    const item = await run(content((s) => s.register(actor, { kind: "text", title: "recipients", text: ARTICLE })))
    for (const recipient of ["a\u0001b@x.example", "a\u007fb@x.example", "a\u0085b@x.example", "a\u202eb@x.example"]) {
      const e = await fail(
        content((s) => s.createTakedown(actor, item.id, { targetUrl: "https://z.example/c", recipient })),
      )
      expect(e).toMatchObject({ _tag: "InvalidInput", field: "recipient" })
    }
    expect(await run(content((s) => s.listTakedowns(actor, item.id, {})))).toMatchObject({ data: [] })
    const ok = await run(
      content((s) =>
        s.createTakedown(actor, item.id, { targetUrl: "https://z.example/c", recipient: "légal@exämple.de" }),
      ),
    )
    expect(ok.recipient).toBe("légal@exämple.de")
  })

  it("takes at most TAKEDOWNS_PER_DAY notices from a workspace in any 24 hours, then 429 with when to retry", async () => {
    // Each notice is an e-mail the service sends, as itself, to an address the caller names: a leaked key must not
    // make it a mailer. The workspace's earlier notices are recorded rows (sent within the day, and one before it).
    const { apiKey } = await run(WorkspaceService.use((s) => s.create(null, { name: "mailer", environment: "live" })))
    const mailer = await run(Authenticator.use((a) => a.authenticate(apiKey.apiKey)))
    const item = await run(content((s) => s.register(mailer, { kind: "text", title: "limited", text: ARTICLE })))
    const now = Date.now()
    const insert = (n: number, agoMs: number) =>
      run(
        SqlClient.SqlClient.use(
          (sql) => sql`INSERT INTO content_takedowns (id, workspace_id, content_id, target_url, recipient, notice,
              status, created_at)
            SELECT 'tkd_limit_' || ${agoMs} || '_' || i, ${mailer.workspaceId}, ${item.id}, 'https://z.example/c',
              'abuse@z.example', 'n', 'sent', ${new Date(now - agoMs).toISOString()}::timestamptz
            FROM generate_series(1, ${n}) i`,
        ),
      )
    await insert(1, 25 * 3_600_000)
    await insert(TAKEDOWNS_PER_DAY - 1, 3_600_000)
    const submit = () =>
      content((s) => s.createTakedown(mailer, item.id, { targetUrl: "https://z.example/c", recipient: "a@z.example" }))
    await run(submit())
    const refused = await fail(submit())
    expect(refused).toMatchObject({ _tag: "TakedownLimitReached", limit: TAKEDOWNS_PER_DAY })
    // The oldest notice of the window leaves it in 23 hours.
    expect((refused as { retryAfterSeconds: number }).retryAfterSeconds).toBeGreaterThan(22 * 3600)
    expect((refused as { retryAfterSeconds: number }).retryAfterSeconds).toBeLessThanOrEqual(23 * 3600)
    const stored = await run(
      SqlClient.SqlClient.use(
        (sql) =>
          sql<{
            n: number
          }>`SELECT count(*)::int AS n FROM content_takedowns WHERE workspace_id = ${mailer.workspaceId}`,
      ),
    )
    expect(stored[0]!.n).toBe(TAKEDOWNS_PER_DAY + 1)
    // Another workspace is not held by this one's notices.
    const elsewhere = await run(content((s) => s.register(other, { kind: "text", title: "free", text: ARTICLE })))
    await run(
      content((s) =>
        s.createTakedown(other, elsewhere.id, { targetUrl: "https://z.example/c", recipient: "a@z.example" }),
      ),
    )
  })

  it("quotes the item's title in the notice so that a line break in it writes no line of its own", async () => {
    // Review "content": a title registered as "Report\n\nThis notice is withdrawn." printed that line in the
    // notice e-mailed to the recipient, as a scan's URL could before (docs/security.md).
    const item = await run(
      content((s) =>
        s.register(actor, { kind: "text", title: "Report\r\n\r\nThis notice is withdrawn.", text: ARTICLE }),
      ),
    )
    const t = await run(
      content((s) => s.createTakedown(actor, item.id, { targetUrl: "https://z.example/c", recipient: "a@z.example" })),
    )
    const lines = t.notice.split(/\r?\n|\r/)
    expect(lines.filter((l) => l.startsWith("This notice is withdrawn."))).toEqual([])
    expect(lines.find((l) => l.includes(item.id))).toContain('"Report\\r\\n\\r\\nThis notice is withdrawn."')
  })

  it("records a takedown before its notice goes out, and a stalled SMTP server fails the notice, not the takedown", async () => {
    // Review "content": an SMTP server that accepts the connection and never answers (or greets and then goes
    // silent) held the takedown request for nodemailer's defaults (30 s for a greeting, 10 min of a silent
    // socket), and nothing was recorded until it let go.
    const sockets: Array<Socket> = []
    let connected: () => void = () => undefined
    let greet = false
    const server = createServer((socket) => {
      sockets.push(socket)
      socket.on("error", () => undefined)
      if (greet) socket.write("220 stall.example ESMTP\r\n")
      connected()
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const smtpUrl = `smtp://127.0.0.1:${(server.address() as AddressInfo).port}`
    try {
      const item = await run(content((s) => s.register(actor, { kind: "text", title: "Stalled", text: ARTICLE })))
      const takedown = (settings: { smtpUrl: string; from: string; smtpTimeoutMs: number }) =>
        run(
          content((s) =>
            s.createTakedown(actor, item.id, { targetUrl: "https://s.example/a", recipient: "abuse@s.example" }),
          ).pipe(Effect.provideService(ContentSettings, settings)),
        )
      const listed = async () => (await run(content((s) => s.listTakedowns(actor, item.id, {})))).data

      // Recorded (and its event emitted) before the notice is sent: while the server holds the connection, the
      // takedown is listed `pending`. The server then hangs up, and the notice is `failed`.
      const arrived = new Promise<void>((resolve) => {
        connected = resolve
      })
      const held = takedown({ smtpUrl, from: "t@localhost", smtpTimeoutMs: 60_000 })
      await arrived
      const whileHeld = await listed()
      expect(whileHeld).toHaveLength(1)
      expect(whileHeld[0]).toMatchObject({ status: "pending", error: null, sentAt: null })
      expect((await eventsOf("content.takedown.submitted")).at(0)?.data).toMatchObject({
        takedownId: whileHeld[0]!.id,
      })
      for (const s of sockets.splice(0)) s.destroy()
      const hungUp = await held
      expect(hungUp).toMatchObject({ id: whileHeld[0]!.id, status: "failed", sentAt: null })

      // Accepted and never answered: bounded by the greeting's time-out.
      connected = () => undefined
      const silent = await takedown({ smtpUrl, from: "t@localhost", smtpTimeoutMs: 300 })
      expect(silent).toMatchObject({ status: "failed", sentAt: null })
      expect(silent.error).toMatch(/ETIMEDOUT|timed out/)
      // Greeted and then silent: bounded by the socket's time-out.
      greet = true
      const greeted = await takedown({ smtpUrl, from: "t@localhost", smtpTimeoutMs: 300 })
      expect(greeted).toMatchObject({ status: "failed", sentAt: null })
      expect(greeted.error).toMatch(/ETIMEDOUT|timed out/)
      expect((await listed()).map((t) => [t.id, t.status])).toEqual([
        [greeted.id, "failed"],
        [silent.id, "failed"],
        [hungUp.id, "failed"],
      ])
    } finally {
      for (const s of sockets) s.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  })

  it("sends the notice with its evidence to a real SMTP server, and keeps it pending without one", async () => {
    const received: Array<{ to: string; body: string }> = []
    const server = new SMTPServer({
      authOptional: true,
      disabledCommands: ["STARTTLS"],
      onData(stream, session, callback) {
        let body = ""
        stream.on("data", (c: Buffer) => {
          body += c.toString()
        })
        stream.on("end", () => {
          received.push({ to: session.envelope.rcptTo.map((r) => r.address).join(","), body })
          callback()
        })
      },
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const port = (server.server.address() as AddressInfo).port
    try {
      const item = await run(content((s) => s.register(actor, { kind: "text", title: "Harbour", text: ARTICLE })))
      const scanned = await run(
        content((s) =>
          s.scan(actor, { text: `Intro words. ${ARTICLE.slice(0, 400)} outro`, url: "https://x.example/a" }, item.id),
        ),
      )
      const matchId = scanned.matches[0]!.id!
      const settings = { smtpUrl: `smtp://127.0.0.1:${port}`, from: "agentgov <legal@publisher.example>" }
      const sent = await run(
        content((s) =>
          s.createTakedown(actor, item.id, { matchId, targetUrl: "https://x.example/a", recipient: "abuse@x.example" }),
        ).pipe(Effect.provideService(ContentSettings, settings)),
      )
      expect(sent).toMatchObject({ status: "sent", matchId, recipient: "abuse@x.example" })
      expect(received).toHaveLength(1)
      expect(received[0]!.to).toBe("abuse@x.example")
      expect(received[0]!.body).toContain(item.id)
      expect(received[0]!.body).toContain("copied span")
      expect((await eventsOf("content.takedown.submitted")).at(0)?.data).toMatchObject({
        contentId: item.id,
        takedownId: sent.id,
        matchId,
      })

      const pending = await run(
        content((s) =>
          s.createTakedown(actor, item.id, { targetUrl: "https://y.example/b", recipient: "a@y.example" }),
        ),
      )
      expect(pending.status).toBe("pending")
      expect(received).toHaveLength(1)
      expect((await run(content((s) => s.listTakedowns(actor, item.id, {})))).data.map((t) => t.id)).toEqual([
        pending.id,
        sent.id,
      ])

      const bad = await fail(
        content((s) =>
          s.createTakedown(actor, item.id, { targetUrl: "javascript:alert(1)", recipient: "a@y.example" }),
        ),
      )
      expect(bad).toMatchObject({ field: "targetUrl" })
      expect(
        await fail(
          content((s) =>
            s.createTakedown(actor, item.id, {
              matchId: "mch_nope",
              targetUrl: "https://y.example",
              recipient: "a@y.example",
            }),
          ),
        ),
      ).toMatchObject({ field: "matchId" })
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  })
})
