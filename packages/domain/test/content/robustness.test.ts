import sharp from "sharp"
import { describe, expect, it } from "vitest"
import { hamming, hashImage, IMAGE_RADIUS } from "../../src/content/imageHash.ts"
import {
  candidateFingerprints,
  copiedSpans,
  coverage,
  distinctCount,
  fingerprintText,
  LEGACY_WINDOW,
  MIN_SPAN_WORDS,
  SCAN_WINDOW,
  SHINGLE_WORDS,
  shingleHashes,
  tokenize,
  tokenizeWalk,
  WINDOW,
  winnow,
} from "../../src/content/textFingerprint.ts"
import { detectWatermark, embedWatermark, PSNR_FLOOR } from "../../src/content/watermark.ts"
import { newId } from "../../src/shared/ids.ts"
import { rng, scene } from "./corpus.ts"

const SYLLABLES = "ka lo mi ne ru sa te vo zu ba di fe go hu ji pa qui ro si tu wa xe yo ze".split(" ")
const vocabulary = (() => {
  const r = rng(1)
  return Array.from({ length: 5000 }, () =>
    Array.from({ length: 2 + Math.floor(r() * 3) }, () => SYLLABLES[Math.floor(r() * SYLLABLES.length)]).join(""),
  )
})()
const words = (r: () => number, n: number) => Array.from({ length: n }, () => vocabulary[Math.floor(r() * 5000)]!)
const sentence = (ws: ReadonlyArray<string>) =>
  ws.map((w, i) => (i % 11 === 10 ? `${w}.` : i % 7 === 3 ? `${w},` : w)).join(" ")

/**
 * Does `candidate` contain a reported copy of `registered` (as the scan decides it: spans over the threshold).
 * By default each side is winnowed as the service does (WINDOW); `windows` winnows them otherwise, to compare
 * with rows stored under LEGACY_WINDOW.
 */
const detects = (
  candidate: string,
  registered: string,
  windows: { readonly candidate: number; readonly registered: number } = { candidate: WINDOW, registered: WINDOW },
) => {
  const c = candidateFingerprints(candidate)
  const cFingerprints = winnow(c.shingles, windows.candidate)
  const rTokens = tokenize(registered)
  const rFingerprints = winnow(shingleHashes(rTokens.map((t) => t.word)), windows.registered)
  const byHash = new Map<number, Array<number>>()
  for (const f of rFingerprints) byHash.set(f.hash, [...(byHash.get(f.hash) ?? []), f.pos])
  const seeds = cFingerprints.flatMap((f) => (byHash.get(f.hash) ?? []).map((p) => [f.pos, p] as const))
  const spans = copiedSpans(c.tokens, rTokens, seeds)
  return {
    spans,
    found: coverage(
      spans.map((s) => s.registered),
      rTokens.length,
    ),
  }
}

describe("text fingerprints, measured on a generated corpus", () => {
  const r = rng(42)
  const documents = Array.from({ length: 60 }, () => sentence(words(r, 400 + Math.floor(r() * 400))))

  it("finds ≥ 95% of 10% excerpts embedded in four times as much unrelated text, with the spans in both texts", () => {
    let found = 0
    let trials = 0
    for (const doc of documents) {
      const ws = doc.split(" ")
      const length = Math.ceil(ws.length / 10)
      const start = Math.floor(r() * (ws.length - length))
      const excerpt = ws.slice(start, start + length).join(" ")
      const before = sentence(words(r, length * 2))
      const after = sentence(words(r, length * 2))
      const candidate = `${before} ${excerpt} ${after}`
      const { spans } = detects(candidate, doc)
      trials++
      if (spans.length > 0) {
        found++
        const longest = spans.reduce((a, b) =>
          b.candidate[1] - b.candidate[0] > a.candidate[1] - a.candidate[0] ? b : a,
        )
        expect(longest.candidate[1] - longest.candidate[0]).toBeGreaterThanOrEqual(length - 2)
      }
    }
    const recall = found / trials
    console.info(`text recall on 10% excerpts: ${found}/${trials}`)
    expect(recall).toBeGreaterThanOrEqual(0.95)
  })

  it("reports ≤ 0.1% false positives between unrelated documents", () => {
    let pairs = 0
    let positives = 0
    for (let i = 0; i < documents.length; i++)
      for (let j = i + 1; j < documents.length; j++) {
        pairs++
        if (detects(documents[i]!, documents[j]!).spans.length > 0) positives++
      }
    console.info(`text false positives: ${positives}/${pairs}`)
    expect(pairs).toBe(1770)
    expect(positives / pairs).toBeLessThanOrEqual(0.001)
  })

  it("zero-width characters, homoglyphs, full-width forms, case and spacing do not hide a copy", () => {
    const doc = documents[0]!
    const excerpt = doc.split(" ").slice(50, 110).join(" ")
    const disguised = [...excerpt]
      .map((ch, i) => {
        if (ch === "a") return "а" // Cyrillic a
        if (ch === "o") return "ο" // Greek omicron
        if (ch === "e" && i % 2 === 0) return "Е" // Cyrillic capital Ie
        if (ch === " " && i % 3 === 0) return " \u200b\u00a0 "
        if (i % 5 === 0) return `${ch}\u200d`
        if (ch === "s") return "ｓ" // full width
        return ch
      })
      .join("")
    expect(disguised).not.toContain(excerpt.slice(0, 20))
    const candidate = `${sentence(words(r, 200))} ${disguised} ${sentence(words(r, 200))}`
    const { spans } = detects(candidate, doc)
    expect(spans.length).toBeGreaterThan(0)
    const words60 = spans.reduce((n, s) => n + s.candidate[1] - s.candidate[0], 0)
    expect(words60).toBeGreaterThanOrEqual(58)
    // The span points at the disguised text as sent.
    const { tokens } = fingerprintText(candidate)
    const s = spans[0]!
    expect(candidate.slice(tokens[s.candidate[0]]!.start, tokens[s.candidate[1] - 1]!.end)).toContain("\u200b")
  })

  it("the Hangul fillers, letters that render as nothing, do not hide a copy", () => {
    // Review "content": U+3164 (or U+115F, U+1160, U+FFA0) between every two letters left no word of the copy equal.
    const doc = documents[1]!
    const excerpt = doc.split(" ").slice(20, 80).join(" ")
    for (const filler of ["\u3164", "\u115f", "\u1160", "\uffa0"]) {
      const disguised = excerpt.replace(/([a-z])(?=[a-z])/g, `$1${filler}`)
      expect(disguised).not.toContain(excerpt.slice(0, 12))
      const { spans } = detects(`${sentence(words(r, 100))} ${disguised} ${sentence(words(r, 100))}`, doc)
      expect(
        spans.reduce((n, s) => n + s.candidate[1] - s.candidate[0], 0),
        filler,
      ).toBeGreaterThanOrEqual(58)
    }
  })

  it("windows of 8 find exactly the spans windows of 4 found, storing and sending fewer; rows stored at 4 answer alike", () => {
    expect(WINDOW + SHINGLE_WORDS - 1).toBe(MIN_SPAN_WORDS)
    expect(SCAN_WINDOW).toBe(WINDOW)
    const g = rng(77)
    let kept = 0
    let keptBefore = 0
    let spansSeen = 0
    for (let n = 0; n < 200; n++) {
      const doc = documents[n % documents.length]!.split(" ")
      // Copied runs of every length around the shortest reported (12 words), some with a word changed inside.
      const length = MIN_SPAN_WORDS - 4 + Math.floor(g() * 40)
      const start = Math.floor(g() * (doc.length - length))
      const run = doc.slice(start, start + length)
      if (g() < 0.3) run[Math.floor(g() * length)] = "zzedited"
      const candidate = `${sentence(words(g, Math.floor(g() * 60)))} ${run.join(" ")} ${sentence(words(g, Math.floor(g() * 60)))}`
      const registered = doc.join(" ")
      const now = detects(candidate, registered).spans
      // Both sides at 4 (every 8-word run shares a fingerprint), and the scan against a text stored before.
      expect(now).toEqual(detects(candidate, registered, { candidate: LEGACY_WINDOW, registered: LEGACY_WINDOW }).spans)
      expect(now).toEqual(detects(candidate, registered, { candidate: WINDOW, registered: LEGACY_WINDOW }).spans)
      spansSeen += now.length
      kept += fingerprintText(registered).fingerprints.length
      keptBefore += winnow(shingleHashes(tokenize(registered).map((t) => t.word)), LEGACY_WINDOW).length
    }
    expect(spansSeen).toBeGreaterThan(100)
    // Density 2/(w+1): 2/9 against 2/5.
    expect(kept).toBeLessThan(keptBefore * 0.65)
  })

  it("ASCII text is cut into the same words, with the same offsets, as the character-by-character walk", () => {
    const g = rng(21)
    const alphabet = "abcXYZ019 \t\n.,;:'\"-_()[]{}!?/\\@#~`^\u0000\u007f"
    const texts = [
      ...documents.slice(0, 5),
      "",
      "   ",
      "Trailing",
      "MiXeD CaSe 42abc, x.y_z",
      ...Array.from({ length: 300 }, () =>
        Array.from({ length: Math.floor(g() * 80) }, () => alphabet[Math.floor(g() * alphabet.length)]).join(""),
      ),
    ]
    for (const text of texts) expect(tokenize(text), JSON.stringify(text)).toEqual(tokenizeWalk(text))
    // Any other character takes the walk.
    expect(tokenize("Ｓtraße")).toEqual(tokenizeWalk("Ｓtraße"))
  })

  it("a shared phrase shorter than the minimum span is not a copy", () => {
    const phrase = words(rng(9), MIN_SPAN_WORDS - 2).join(" ")
    const a = `${sentence(words(r, 100))} ${phrase} ${sentence(words(r, 100))}`
    const b = `${sentence(words(r, 100))} ${phrase} ${sentence(words(r, 100))}`
    expect(detects(a, b).spans).toEqual([])
  })

  it("counts distinct shingle hashes as a Set does: duplicates, 0, the largest 32-bit values, any length", () => {
    const g = rng(17)
    for (const n of [0, 1, 2, 3, 100, 10_000]) {
      const values = Array.from({ length: n }, () => Math.floor(g() * 4_294_967_296))
      // Repeats, and the edges: 0 (the table's empty slot) and 2^32 − 1.
      for (let i = 0; i < n / 3; i++) values[Math.floor(g() * n)] = values[Math.floor(g() * n)]!
      if (n >= 3) values.splice(0, 3, 0, 0, 4_294_967_295)
      expect(distinctCount(values)).toBe(new Set(values).size)
    }
    expect(distinctCount(candidateFingerprints(sentence(words(r, 2_000))).shingles)).toBeGreaterThan(1_900)
  })
})

const TRANSFORMS: Record<string, (b: Buffer) => Promise<Buffer>> = {
  "resize to 50%": (b) => sharp(b).resize(320).jpeg({ quality: 85 }).toBuffer(),
  "resize to 150%": (b) => sharp(b).resize(960).png().toBuffer(),
  "JPEG quality 30": (b) => sharp(b).jpeg({ quality: 30 }).toBuffer(),
  WebP: (b) => sharp(b).webp({ quality: 75 }).toBuffer(),
  "blur (sigma 1)": (b) => sharp(b).blur(1).toBuffer(),
  "brightness +15%": (b) => sharp(b).modulate({ brightness: 1.15 }).toBuffer(),
  "darker by 25": (b) => sharp(b).linear(1, -25).toBuffer(),
}
/** What pHash survives and the watermark does not (its grid moves with any crop). */
const PHASH_ONLY: Record<string, (b: Buffer) => Promise<Buffer>> = {
  "crop 2.5% off each side": (b) => sharp(b).extract({ left: 16, top: 12, width: 608, height: 456 }).toBuffer(),
}
const FAILING: Record<string, (b: Buffer) => Promise<Buffer>> = {
  // docs/content.md said 50 / 50 at 5%; measured 27 / 50 in the outside review (6 / 12 of these scenes).
  "crop 5% off each side": (b) => sharp(b).extract({ left: 32, top: 24, width: 576, height: 432 }).toBuffer(),
  "crop 15% off each side": (b) => sharp(b).extract({ left: 96, top: 72, width: 448, height: 336 }).toBuffer(),
  "rotate 10°": (b) => sharp(b).rotate(10).toBuffer(),
}

describe("image hashes and the watermark, measured on generated scenes", () => {
  const SCENES = 12

  it("pHash survives resize, recompression, blur and brightness; unrelated scenes stay apart", async () => {
    const originals = await Promise.all(Array.from({ length: SCENES }, (_, i) => scene(100 + i)))
    const hashes = await Promise.all(originals.map(hashImage))
    for (const [name, transform] of Object.entries({ ...TRANSFORMS, ...PHASH_ONLY })) {
      let kept = 0
      for (let i = 0; i < SCENES; i++) {
        const h = await hashImage(await transform(originals[i]!))
        if (hamming(h.phash, hashes[i]!.phash) <= IMAGE_RADIUS) kept++
      }
      console.info(`pHash ${name}: ${kept}/${SCENES} within ${IMAGE_RADIUS} bits`)
      expect(kept, name).toBe(SCENES)
    }
    const mirrored = await hashImage(await sharp(originals[0]!).flop().toBuffer())
    expect(hamming(mirrored.phash, hashes[0]!.mirrorPhash)).toBeLessThanOrEqual(IMAGE_RADIUS)
    let close = 0
    for (let i = 0; i < SCENES; i++)
      for (let j = i + 1; j < SCENES; j++) if (hamming(hashes[i]!.phash, hashes[j]!.phash) <= IMAGE_RADIUS) close++
    expect(close).toBe(0)
    for (const [name, transform] of Object.entries(FAILING)) {
      let kept = 0
      for (let i = 0; i < SCENES; i++)
        if (hamming((await hashImage(await transform(originals[i]!))).phash, hashes[i]!.phash) <= IMAGE_RADIUS) kept++
      // Stated in docs/content.md, measured here: these are not what pHash is for.
      console.info(`pHash ${name}: ${kept}/${SCENES} within ${IMAGE_RADIUS} bits`)
      expect(kept, name).toBeLessThan(SCENES)
    }
  })

  // 640×480 is fitted on the image itself; a 2 MP photo on a working copy at twice the grid, then topped up
  // on the full image (watermark.ts): both must carry the id through every transformation.
  it.each([
    { size: "640×480", width: 640, height: 480, samples: 4 },
    { size: "1920×1080", width: 1920, height: 1080, samples: 2 },
  ])(
    "the watermark carries the id through each transformation at ≥ 40 dB ($size), and an unmarked image reads none",
    async ({ width, height, samples }) => {
      for (let i = 0; i < samples; i++) {
        const original = await scene(200 + i, width, height)
        const id = newId("cnt")
        const marked = await embedWatermark(original, id)
        expect(marked.psnr).toBeGreaterThanOrEqual(PSNR_FLOOR)
        expect(marked.psnr).toBeGreaterThanOrEqual(40)
        expect((await detectWatermark(marked.data))?.contentId).toBe(id)
        for (const [name, transform] of Object.entries(TRANSFORMS)) {
          const read = await detectWatermark(await transform(marked.data))
          expect(read?.contentId, `${name} of scene ${i}`).toBe(id)
          expect(read!.confidence).toBeGreaterThanOrEqual(0.7)
        }
        expect(await detectWatermark(original)).toBeUndefined()
      }
      for (let i = 0; i < 20; i++) expect(await detectWatermark(await scene(300 + i))).toBeUndefined()
    },
  )

  it.each([
    { size: "640×480", width: 640, height: 480 },
    { size: "1920×1080", width: 1920, height: 1080 },
  ])(
    "a lossless (PNG) watermarked asset differs from its original by a PSNR of at least 40 dB, as decoded ($size)",
    async ({ width, height }) => {
      const original = await sharp(await scene(400, width, height))
        .png()
        .toBuffer()
      const marked = await embedWatermark(original, newId("cnt"))
      const a = await sharp(original).raw().toBuffer()
      const b = await sharp(marked.data).raw().toBuffer()
      expect(b.length).toBe(a.length)
      let se = 0
      for (let i = 0; i < a.length; i++) se += (a[i]! - b[i]!) ** 2
      const psnr = 10 * Math.log10((255 * 255) / (se / a.length))
      expect(psnr).toBeGreaterThanOrEqual(40)
      expect(psnr).toBeLessThan(60)
      // The PSNR the service records is the one measured here.
      expect(Math.abs(psnr - marked.psnr)).toBeLessThan(0.05)
    },
  )

  it("keeps the mark at or above PSNR_FLOOR where scaling it down once did not (a textured disc on black)", async () => {
    // Review "content": one scaling of the change left this image at 40.04 dB, under the 40.2 dB documented.
    const side = 512
    const raw = Buffer.alloc(side * side * 3)
    for (let y = 0; y < side; y++)
      for (let x = 0; x < side; x++)
        if ((x - 256) ** 2 + (y - 256) ** 2 < 180 ** 2)
          raw.fill((x * 3 + y * 5) & 255, (y * side + x) * 3, (y * side + x + 1) * 3)
    const png = await sharp(raw, { raw: { width: side, height: side, channels: 3 } })
      .png()
      .toBuffer()
    // A fixed id: whether a mark reads back also depends on the id's bits, and on this image one id in several
    // hundred does not (cnt_01m8khghespf2001sc92crswnf, seen in a run; register refuses such a mark with 422).
    const id = "cnt_01m8kghes7nx7kwb920zpk8trb"
    const marked = await embedWatermark(png, id)
    expect(marked.psnr).toBeGreaterThanOrEqual(PSNR_FLOOR)
    expect((await detectWatermark(marked.data))?.contentId).toBe(id)
    // The floor holds whatever the id.
    const rare = await embedWatermark(png, "cnt_01m8khghespf2001sc92crswnf")
    expect(rare.psnr).toBeGreaterThanOrEqual(PSNR_FLOOR)
  })
})
