import type { Channels, Sharp } from "sharp"
import { loadSharp } from "./loadSharp.ts"
import { hash32 } from "./textFingerprint.ts"

/**
 * An invisible, blind image watermark carrying a content id (decision D15).
 *
 * Scheme: the image's luma is read on a canonical 256×256 grid (whatever the image's size, so a resized
 * copy reads on the same grid), cut into 1,024 8×8 blocks. Each block carries one bit in the order of two
 * low DCT coefficients, (1,2) above (2,1) for a one: informed embedding pushes the pair apart by a margin
 * only where the image does not already say the bit, so the image itself is no noise to the reader, and
 * an order (unlike a magnitude) survives blur and contrast changes, and brightness moves only the DC term.
 * The change is drawn on the canonical grid, scaled up to the image's size and added equally to R, G and
 * B (so it is all luma).
 *
 * Payload: the id's 26 base-32 characters (130 bits) and a CRC-16 of them, 146 bits, encoded by a
 * convolutional code (constraint length 7, rate 1/3, the generators 133/171/165 octal of LTE and 802.11)
 * whose 456 coded bits are each carried twice: 912 blocks, scattered by a fixed permutation and whitened
 * by a fixed pseudo-random sequence (so a blank image reads no id). Decoding is soft-decision Viterbi
 * over the blocks' coefficient differences; the CRC confirms the id, and the share of blocks that agree
 * with the re-encoded id is the confidence.
 */

const SIZE = 256
const BLOCK = 8
const PER_ROW = SIZE / BLOCK
const BLOCK_COUNT = PER_ROW * PER_ROW
const ID_CHARS = 26
const ID_BITS = ID_CHARS * 5
const PAYLOAD_BITS = ID_BITS + 16
/** The encoder's memory: six bits, flushed by six zero bits after the payload. */
const MEMORY = 6
const GENERATORS = [0o133, 0o171, 0o165] as const
const CODED_BITS = (PAYLOAD_BITS + MEMORY) * GENERATORS.length
const COPIES = Math.floor(BLOCK_COUNT / CODED_BITS)
/** Smallest side we watermark: below it the canonical grid is finer than the image. */
export const MIN_WATERMARK_SIDE = 256
/** The margin pushed between the two coefficients (orthonormal DCT of 0–255 luma). */
const MARGIN = 14
const CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"
const ID_PATTERN = /^cnt_[0-9a-hjkmnp-tv-z]{26}$/

/** Block of each (bit, repeat) slot: a fixed shuffle, so the repeats of a bit are spread over the image. */
const SLOTS: ReadonlyArray<number> = (() => {
  const order = Array.from({ length: BLOCK_COUNT }, (_, i) => i)
  let seed = 0x5eed1234
  for (let i = order.length - 1; i > 0; i--) {
    seed = hash32(String(i), seed)
    const j = seed % (i + 1)
    ;[order[i], order[j]] = [order[j]!, order[i]!]
  }
  return order.slice(0, CODED_BITS * COPIES)
})()
const WHITEN: ReadonlyArray<number> = SLOTS.map((_, i) => hash32(`wm-${i}`) & 1)

const C = (u: number, x: number) => (u === 0 ? Math.SQRT1_2 : 1) * Math.cos(((2 * x + 1) * u * Math.PI) / 16) * 0.5
/** The two 8×8 basis images whose order carries the bit (orthonormal). */
const BASIS_A = Array.from({ length: 64 }, (_, i) => C(1, i >> 3) * C(2, i & 7))
const BASIS_B = Array.from({ length: 64 }, (_, i) => C(2, i >> 3) * C(1, i & 7))

const parity = (x: number) => {
  let p = 0
  while (x) {
    p ^= x & 1
    x >>= 1
  }
  return p
}

/** The convolutional code's output for the payload and its six flushing zeros. */
const encode = (bits: ReadonlyArray<number>): Array<number> => {
  const out: Array<number> = []
  let reg = 0
  for (const b of [...bits, ...new Array<number>(MEMORY).fill(0)]) {
    reg = ((reg << 1) | b) & 0x7f
    for (const g of GENERATORS) out.push(parity(reg & g))
  }
  return out
}

/** Soft-decision Viterbi: the payload whose codeword correlates best with `soft` (positive reads as 1). */
const viterbi = (soft: Float64Array): Array<number> => {
  const STATES = 1 << MEMORY
  const steps = PAYLOAD_BITS + MEMORY
  let metric = new Float64Array(STATES).fill(Number.NEGATIVE_INFINITY)
  metric[0] = 0
  const from: Array<Uint8Array> = []
  for (let t = 0; t < steps; t++) {
    const next = new Float64Array(STATES).fill(Number.NEGATIVE_INFINITY)
    const back = new Uint8Array(STATES)
    for (let state = 0; state < STATES; state++) {
      const m = metric[state]!
      if (m === Number.NEGATIVE_INFINITY) continue
      for (let b = 0; b < (t >= PAYLOAD_BITS ? 1 : 2); b++) {
        const reg = ((state << 1) | b) & 0x7f
        let gain = 0
        GENERATORS.forEach((g, k) => {
          const v = soft[t * GENERATORS.length + k]!
          gain += parity(reg & g) ? v : -v
        })
        const to = reg & (STATES - 1)
        if (m + gain > next[to]!) {
          next[to] = m + gain
          back[to] = state
        }
      }
    }
    from.push(back)
    metric = next
  }
  const bits: Array<number> = []
  let state = 0
  for (let t = steps - 1; t >= 0; t--) {
    bits.push(state & 1)
    state = from[t]![state]!
  }
  return bits.reverse().slice(0, PAYLOAD_BITS)
}

const crc16 = (bits: ReadonlyArray<number>): Array<number> => {
  let crc = 0xffff
  for (const b of bits) {
    const top = ((crc >> 15) & 1) ^ b
    crc = (crc << 1) & 0xffff
    if (top) crc ^= 0x1021
  }
  return Array.from({ length: 16 }, (_, i) => (crc >> (15 - i)) & 1)
}

const payloadOf = (contentId: string): Array<number> => {
  if (!ID_PATTERN.test(contentId)) throw new Error(`not a content id: ${contentId}`)
  const bits: Array<number> = []
  for (const ch of contentId.slice(4)) {
    const v = CROCKFORD.indexOf(ch)
    for (let i = 4; i >= 0; i--) bits.push((v >> i) & 1)
  }
  return [...bits, ...crc16(bits)]
}

/** The soft value of each block: coefficient (1,2) minus (2,1). */
const blockDifferences = (grid: Float64Array): Float64Array => {
  const out = new Float64Array(BLOCK_COUNT)
  for (let b = 0; b < BLOCK_COUNT; b++) {
    const ox = (b % PER_ROW) * BLOCK
    const oy = Math.floor(b / PER_ROW) * BLOCK
    let a = 0
    let c = 0
    for (let i = 0; i < 64; i++) {
      const v = grid[(oy + (i >> 3)) * SIZE + ox + (i & 7)]!
      a += v * BASIS_A[i]!
      c += v * BASIS_B[i]!
    }
    out[b] = a - c
  }
  return out
}

/** Luma on the canonical grid, as the reader sees it. */
const canonicalLuma = async (image: Buffer | Sharp): Promise<Float64Array> => {
  // A Sharp instance is used as given, not cloned: a clone copies its raw input buffer. An image is read as it is
  // displayed (its EXIF orientation applied), as the mark was drawn: a copy saved on its side with the tag that
  // turns it upright carries the mark on its side.
  const s = Buffer.isBuffer(image) ? (await loadSharp())(image, { limitInputPixels: 40_000_000 }).rotate() : image
  const raw = await s
    .flatten({ background: "#ffffff" })
    .greyscale()
    .resize(SIZE, SIZE, { fit: "fill", fastShrinkOnLoad: false })
    .raw()
    .toBuffer()
  return Float64Array.from(raw)
}

/** Where each of `n` pixels falls between two canonical-grid samples of the bilinear upscale, and its weight. */
const axisOf = (n: number) => {
  const lo = new Int32Array(n)
  const hi = new Int32Array(n)
  const w = new Float64Array(n)
  const scale = SIZE / n
  for (let i = 0; i < n; i++) {
    const f = Math.min(Math.max((i + 0.5) * scale - 0.5, 0), SIZE - 1)
    lo[i] = Math.floor(f)
    hi[i] = Math.min(lo[i]! + 1, SIZE - 1)
    w[i] = f - lo[i]!
  }
  return { lo, hi, w }
}

/**
 * Adds the canonical-grid change `total`, upscaled bilinearly to the image's size (rounded to float32) and
 * times `scale`, equally to the colour channels of `pixels`; answers the new pixels and their squared error.
 * One pass: a row of the grid interpolated across the image's width serves every image row between its
 * two samples, so the upscaled change is never held whole.
 */
const addChange = (
  pixels: Buffer,
  total: Float64Array,
  scale: number,
  image: { readonly width: number; readonly height: number; readonly channels: number },
  axes: { readonly x: ReturnType<typeof axisOf>; readonly y: ReturnType<typeof axisOf> },
): { readonly data: Buffer; readonly squaredError: number } => {
  const { width, height, channels } = image
  const colour = colourChannels(channels)
  const next = Buffer.from(pixels)
  const rows: [Float64Array, Float64Array] = [new Float64Array(width), new Float64Array(width)]
  const rowOf = [-1, -1]
  const across = (gridRow: number, into: 0 | 1) => {
    if (rowOf[into] === gridRow) return
    const out = rows[into]
    const base = gridRow * SIZE
    const { lo, hi, w } = axes.x
    for (let x = 0; x < width; x++) {
      const wx = w[x]!
      out[x] = (1 - wx) * total[base + lo[x]!]! + wx * total[base + hi[x]!]!
    }
    rowOf[into] = gridRow
  }
  const change = new Int32Array(width)
  const rounded = new Float32Array(width)
  let se = 0
  for (let y = 0; y < height; y++) {
    // The two cached rows swap roles as y crosses a grid row: keep them keyed by grid row, not by slot.
    const lo = axes.y.lo[y]!
    const hi = axes.y.hi[y]!
    if (rowOf[1] === lo && rowOf[0] !== lo) {
      ;[rows[0], rows[1]] = [rows[1], rows[0]]
      ;[rowOf[0], rowOf[1]] = [rowOf[1]!, rowOf[0]!]
    }
    across(lo, 0)
    across(hi, 1)
    const wy = axes.y.w[y]!
    const a = rows[0]
    const b = rows[1]
    if (scale === 1) {
      // The float32 rounding by a store, and Math.round as floor(v + 0.5), exact for a float32 v: a third
      // less time than the expression below, the same values.
      for (let x = 0; x < width; x++) rounded[x] = (1 - wy) * a[x]! + wy * b[x]!
      for (let x = 0; x < width; x++) change[x] = Math.floor(rounded[x]! + 0.5)
    } else for (let x = 0; x < width; x++) change[x] = Math.round(Math.fround((1 - wy) * a[x]! + wy * b[x]!) * scale)
    let k = y * width * channels
    for (let x = 0; x < width; x++, k += channels) {
      // Math.round(p + d) is p + Math.round(d) for an integer p: one rounding a pixel, not one a channel.
      const r = change[x]!
      if (r === 0) continue
      for (let c = 0; c < colour; c++) {
        const before = pixels[k + c]!
        const v = before + r
        const after = v < 0 ? 0 : v > 255 ? 255 : v
        next[k + c] = after
        se += (after - before) * (after - before)
      }
    }
  }
  return { data: next, squaredError: se }
}

/** Colour samples of a pixel of `channels`: grey or RGB, with or without alpha (which the mark leaves alone). */
const colourChannels = (channels: number): 1 | 3 => (channels >= 3 ? 3 : 1)

const psnrOfError = (squaredError: number, samples: number, peak = 255): number =>
  squaredError === 0 ? Number.POSITIVE_INFINITY : 10 * Math.log10((peak * peak) / (squaredError / samples))

/**
 * The change the mark made to 8-bit pixels (`before` to `after`), carried onto the same image's 16-bit samples: each
 * colour sample moves by 257 times its 8-bit sample's change (one 8-bit step of 65,535), so the reader, which sees
 * the image at 8 bits, reads what was fitted, and the low bits of every sample are kept. Answers the new samples and
 * their squared error in 16-bit units.
 */
const carryChange16 = (
  wide: Uint16Array,
  wideChannels: number,
  before: Buffer,
  after: Buffer,
  channels: number,
): { readonly data: Uint16Array; readonly squaredError: number } => {
  const next = Uint16Array.from(wide)
  const colour = colourChannels(wideChannels)
  const narrowColour = colourChannels(channels)
  const pixels = wide.length / wideChannels
  let se = 0
  for (let p = 0, k = 0, n = 0; p < pixels; p++, k += wideChannels, n += channels)
    for (let c = 0; c < colour; c++) {
      // A grey 16-bit image drawn on an RGB 8-bit copy: the mark is luma, the same on each of its channels.
      const j = n + Math.min(c, narrowColour - 1)
      const d = after[j]! - before[j]!
      if (d === 0) continue
      const v = wide[k + c]! + d * 257
      const out = v < 0 ? 0 : v > 65535 ? 65535 : v
      next[k + c] = out
      se += (out - wide[k + c]!) * (out - wide[k + c]!)
    }
  return { data: next, squaredError: se }
}

/** The least PSNR a watermarked image has (dB): the change stays below what the eye sees. */
export const PSNR_FLOOR = 40.2
/** The PSNR a mark is strengthened towards when the image takes it cheaply. */
const PSNR_TARGET = 40.8

export interface Watermarked {
  /** The watermarked image, in the format it came in. */
  readonly data: Buffer
  /** Peak signal-to-noise ratio of the watermarked pixels against the original's, in dB. */
  readonly psnr: number
}

interface Raster {
  readonly pixels: Buffer
  readonly width: number
  readonly height: number
  readonly channels: Channels
  readonly axes: { readonly x: ReturnType<typeof axisOf>; readonly y: ReturnType<typeof axisOf> }
  /** Colour samples, the PSNR's denominator. */
  readonly samples: number
}

const rasterOf = (pixels: Buffer, width: number, height: number, channels: Channels): Raster => ({
  pixels,
  width,
  height,
  channels,
  axes: { x: axisOf(width), y: axisOf(height) },
  samples: width * height * colourChannels(channels),
})

/**
 * The shorter side of the working copy the mark is fitted on. Fitting reads the canonical grid after every
 * round; on a large image that is a full-size resize per round. A copy whose sides are at least twice the
 * grid's reads the same grid to within rounding (a downscale of a downscale), and a final round on the
 * full image tops up what the copy missed.
 */
const WORKING_SIDE = 2 * SIZE

/**
 * Embeds `contentId` into the image; answers the image re-encoded in its format (PNG stays lossless, and a 16-bit
 * PNG stays 16-bit: the mark is fitted at 8 bits, as the reader sees it, and carried onto the 16-bit samples).
 */
export const embedWatermark = async (input: Buffer, contentId: string): Promise<Watermarked> => {
  const sharp = await loadSharp()
  const coded = encode(payloadOf(contentId))
  const base = sharp(input, { limitInputPixels: 40_000_000 }).rotate()
  const meta = await sharp(input).metadata()
  const { data: pixels, info } = await base.raw().toBuffer({ resolveWithObject: true })
  const { width, height, channels } = info
  if (width < MIN_WATERMARK_SIDE || height < MIN_WATERMARK_SIDE)
    throw new RangeError(`a watermark needs at least ${MIN_WATERMARK_SIDE}×${MIN_WATERMARK_SIDE} pixels`)
  const full = rasterOf(pixels, width, height, channels)
  const shrink = Math.min(width, height) / WORKING_SIDE
  const working =
    shrink < 2
      ? full
      : await sharp(pixels, { raw: { width, height, channels } })
          .resize(Math.round(width / shrink), Math.round(height / shrink), { fit: "fill" })
          .raw()
          .toBuffer({ resolveWithObject: true })
          .then(({ data, info: i }) => rasterOf(data, i.width, i.height, i.channels))

  const seenOf = async (image: Raster, current: Buffer) =>
    blockDifferences(
      await canonicalLuma(
        sharp(current, { raw: { width: image.width, height: image.height, channels: image.channels } }),
      ),
    )
  const originalSeen = new Map<Raster, Float64Array>()
  /**
   * Fits the change on `image` so that every block reads its bit by `margin`: `rounds` times, measure what
   * the reader sees and push the blocks that fall short; from `start` (a change already fitted) if given.
   */
  const mark = async (image: Raster, margin: number, rounds: number, start?: Float64Array) => {
    const total = start ? Float64Array.from(start) : new Float64Array(SIZE * SIZE)
    let current: Buffer = image.pixels
    let squaredError = 0
    if (start) ({ data: current, squaredError } = addChange(image.pixels, total, 1, image, image.axes))
    // Scaling up and back down blurs the change a little: measure what the reader sees and top it up.
    for (let round = 0; round < rounds; round++) {
      let seen = start === undefined && round === 0 ? originalSeen.get(image) : undefined
      if (!seen) {
        seen = await seenOf(image, current)
        if (start === undefined && round === 0) originalSeen.set(image, seen)
      }
      const step = new Float64Array(SIZE * SIZE)
      let short = 0
      SLOTS.forEach((block, slot) => {
        const want = coded[slot % CODED_BITS]! ^ WHITEN[slot]! ? 1 : -1
        const needed = want * margin - seen[block]!
        if ((want > 0 && needed <= 0) || (want < 0 && needed >= 0)) return
        short++
        // Split the push between the two coefficients: (1,2) by +needed/2, (2,1) by -needed/2; 1.15 is a
        // little over, for what the scaling blurs away.
        const ox = (block % PER_ROW) * BLOCK
        const oy = Math.floor(block / PER_ROW) * BLOCK
        for (let i = 0; i < 64; i++) {
          const k = (oy + (i >> 3)) * SIZE + ox + (i & 7)
          step[k] = step[k]! + (needed / 2) * (BASIS_A[i]! - BASIS_B[i]!) * 1.15
        }
      })
      if (short === 0) break
      for (let i = 0; i < total.length; i++) total[i] = total[i]! + step[i]!
      ;({ data: current, squaredError } = addChange(image.pixels, total, 1, image, image.axes))
    }
    return { total, current, psnr: psnrOfError(squaredError, image.samples) }
  }
  let marked = await mark(working, MARGIN, 3)
  // An image that took the mark cheaply gets a stronger one, up to the PSNR target: robustness costs
  // nothing the eye sees below it.
  let margin = MARGIN
  for (let round = 0; round < 2 && marked.psnr > PSNR_TARGET + 0.3; round++) {
    const stronger = await mark(working, margin * 10 ** ((marked.psnr - PSNR_TARGET) / 20), 3)
    if (stronger.psnr < PSNR_FLOOR) break
    margin *= 10 ** ((marked.psnr - PSNR_TARGET) / 20)
    marked = stronger
  }
  // On the full image: what the working copy fitted, topped up by one measured round.
  if (working !== full) marked = await mark(full, margin, 1, marked.total)
  let { current, psnr } = marked
  // Scale the whole change down to the floor: a weaker mark rather than a visible one. The pixels are rounded and
  // clipped to 0–255, so the error does not scale exactly with the change: scale again until it is under the
  // floor (one scaling left a textured disc on black at 40.04 dB).
  for (let scale = 1, round = 0; psnr < PSNR_FLOOR && round < 8; round++) {
    scale *= 10 ** ((psnr - PSNR_FLOOR) / 20) * (round === 0 ? 1 : 0.98)
    const weaker = addChange(pixels, marked.total, scale, full, full.axes)
    current = weaker.data
    psnr = psnrOfError(weaker.squaredError, full.samples)
  }
  if (meta.format === "png" && meta.depth === "ushort") {
    // A 16-bit PNG: its samples as they are (not through sRGB at 8 bits), oriented as the 8-bit copy was.
    const grey = meta.space === "grey16" || meta.space === "b-w"
    const wide = await sharp(input, { limitInputPixels: 40_000_000 })
      .rotate()
      .toColourspace(grey ? "grey16" : "rgb16")
      .raw({ depth: "ushort" })
      .toBuffer({ resolveWithObject: true })
    if (wide.info.width === width && wide.info.height === height) {
      const samples = new Uint16Array(wide.data.buffer, wide.data.byteOffset, wide.data.length / 2)
      const carried = carryChange16(samples, wide.info.channels, pixels, current, channels)
      const data = await sharp(carried.data, { raw: { width, height, channels: wide.info.channels } })
        .toColourspace(grey ? "grey16" : "rgb16")
        .png()
        .toBuffer()
      return {
        data,
        psnr: psnrOfError(carried.squaredError, width * height * colourChannels(wide.info.channels), 65535),
      }
    }
  }
  const out = sharp(current, { raw: { width, height, channels } })
  const data =
    meta.format === "jpeg"
      ? await out.jpeg({ quality: 95, chromaSubsampling: "4:4:4" }).toBuffer()
      : meta.format === "webp"
        ? await out.webp({ quality: 95 }).toBuffer()
        : await out.png().toBuffer()
  return { data, psnr }
}

/** The most one block's reading counts for in decoding (the embedding margin). */
const SOFT_CLIP = MARGIN
/** Least share of agreeing blocks for a reading to count. */
const MIN_CONFIDENCE = 0.7
export interface WatermarkReading {
  readonly contentId: string
  /** Share of the payload's blocks that agree with the decoded id, 0.5 (chance) to 1. */
  readonly confidence: number
}

/** The content id the image carries, or undefined when none decodes (its CRC does not check). */
export const detectWatermark = async (input: Buffer): Promise<WatermarkReading | undefined> => {
  const diffs = blockDifferences(await canonicalLuma(input))
  const soft = new Float64Array(CODED_BITS)
  SLOTS.forEach((block, slot) => {
    const j = slot % CODED_BITS
    // Clipped: a block the image overpowered says so loudly, and should count no more than a marked one.
    const d = Math.max(-SOFT_CLIP, Math.min(SOFT_CLIP, diffs[block]!))
    soft[j] = soft[j]! + (WHITEN[slot] ? -d : d)
  })
  const bits = viterbi(soft)
  const idBits = bits.slice(0, ID_BITS)
  if (crc16(idBits).some((b, i) => b !== bits[ID_BITS + i])) return undefined
  let id = "cnt_"
  for (let i = 0; i < ID_CHARS; i++) {
    let v = 0
    for (let j = 0; j < 5; j++) v = (v << 1) | idBits[i * 5 + j]!
    id += CROCKFORD[v]
  }
  const coded = encode(bits)
  let agree = 0
  SLOTS.forEach((block, slot) => {
    const want = coded[slot % CODED_BITS]! ^ WHITEN[slot]! ? 1 : -1
    if (want * diffs[block]! > 0) agree++
  })
  const confidence = agree / SLOTS.length
  // A CRC-16 lets one random pattern in 65,536 through; what chance leaves is near 0.5 agreement.
  return confidence >= MIN_CONFIDENCE ? { contentId: id, confidence } : undefined
}
