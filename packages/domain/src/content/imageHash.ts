import type { Metadata } from "sharp"
import { loadSharp } from "./loadSharp.ts"

/**
 * Perceptual hashes of images (decision D15): a 64-bit DCT hash (pHash) and a 64-bit difference hash
 * (dHash), of the image and of its mirror, after trimming uniform borders (so a letterboxed or padded copy
 * hashes like the original). Hashes travel as 16 hex digits.
 */

/** Pixels we decode at most: a larger image is refused before it is decoded (a decompression bomb). */
export const MAX_INPUT_PIXELS = 40_000_000

export const IMAGE_MEDIA_TYPES = { jpeg: "image/jpeg", png: "image/png", webp: "image/webp" } as const
export type ImageFormat = keyof typeof IMAGE_MEDIA_TYPES

export interface ImageHashes {
  readonly phash: string
  readonly dhash: string
  readonly mirrorPhash: string
  readonly mirrorDhash: string
}

const N = 32
/** cos((2x+1)uπ/2N) for the 32-point DCT, u < 8 (only the low frequencies are kept). */
const COS = Array.from({ length: 8 }, (_, u) =>
  Array.from({ length: N }, (_, x) => Math.cos(((2 * x + 1) * u * Math.PI) / (2 * N))),
)

const bitsToHex = (bits: ReadonlyArray<boolean>): string => {
  let hex = ""
  for (let i = 0; i < 64; i += 4)
    hex += ((bits[i]! ? 8 : 0) | (bits[i + 1]! ? 4 : 0) | (bits[i + 2]! ? 2 : 0) | (bits[i + 3]! ? 1 : 0)).toString(16)
  return hex
}

/** pHash: the 8×8 lowest DCT frequencies of a 32×32 grey thumbnail, each bit above or below their median. */
export const phashOf = (grey32: Uint8Array): string => {
  const coeffs: Array<number> = []
  for (let u = 0; u < 8; u++)
    for (let v = 0; v < 8; v++) {
      let sum = 0
      for (let y = 0; y < N; y++) {
        const cy = COS[u]![y]!
        for (let x = 0; x < N; x++) sum += grey32[y * N + x]! * cy * COS[v]![x]!
      }
      coeffs.push(sum)
    }
  // The DC term says only how bright the image is: leave it out of the median.
  const sorted = coeffs.slice(1).sort((a, b) => a - b)
  const median = (sorted[31]! + sorted[32]!) / 2
  return bitsToHex(coeffs.map((c, i) => (i === 0 ? false : c > median)))
}

/** dHash: is each pixel of a 9×8 grey thumbnail brighter than its right neighbour. */
export const dhashOf = (grey9x8: Uint8Array): string => {
  const bits: Array<boolean> = []
  for (let y = 0; y < 8; y++) for (let x = 0; x < 8; x++) bits.push(grey9x8[y * 9 + x]! > grey9x8[y * 9 + x + 1]!)
  return bitsToHex(bits)
}

/** Bits that differ between two 16-hex-digit hashes. */
export const hamming = (a: string, b: string): number => {
  let d = 0
  for (let i = 0; i < 16; i += 8) {
    let x = (Number.parseInt(a.slice(i, i + 8), 16) ^ Number.parseInt(b.slice(i, i + 8), 16)) >>> 0
    while (x) {
      x &= x - 1
      d++
    }
  }
  return d
}

/** Decoded pixels, as sharp's raw input takes them. */
interface Pixels {
  readonly data: Buffer
  readonly raw: { readonly width: number; readonly height: number; readonly channels: 1 | 2 | 3 | 4 }
}

/**
 * A grey thumbnail of the pixels, mirrored or not. Each thumbnail starts from the decoded pixels, not from a
 * clone of one Sharp instance: a clone copies its input buffer, and an encoded input is decoded again by each.
 */
const greyThumb = async (pixels: Pixels, width: number, height: number, mirror: boolean) => {
  const sharp = await loadSharp()
  const image = sharp(pixels.data, { raw: pixels.raw })
  return new Uint8Array(
    await (mirror ? image.flop() : image)
      .greyscale()
      .resize(width, height, { fit: "fill", kernel: "lanczos3" })
      .raw()
      .toBuffer(),
  )
}

/**
 * The longer side of the copy the hashes are computed on. The thumbnails are 32×32 and 9×8: a copy this size
 * gives them the same pixels to within rounding, and trimming it (a median filter and a scan of every pixel
 * in libvips) costs a tenth of trimming a 2 MP original. A JPEG is shrunk while it is decoded.
 */
export const HASH_SIDE = 512

/**
 * The image's pixels, at most HASH_SIDE on a side, with uniform borders trimmed, or as it is when it is uniform
 * throughout (nothing left to trim to). Decoded once: the trim works on the decoded copy.
 */
const trimmed = async (input: Buffer): Promise<Pixels> => {
  const sharp = await loadSharp()
  const { data, info } = await sharp(input, { limitInputPixels: MAX_INPUT_PIXELS })
    .rotate()
    .flatten({ background: "#ffffff" })
    .resize(HASH_SIDE, HASH_SIDE, { fit: "inside", withoutEnlargement: true })
    .raw()
    .toBuffer({ resolveWithObject: true })
  const decoded: Pixels = { data, raw: { width: info.width, height: info.height, channels: info.channels } }
  try {
    const cut = await sharp(data, { raw: decoded.raw })
      .trim({ threshold: 12 })
      .raw()
      .toBuffer({ resolveWithObject: true })
    if (cut.info.width >= 16 && cut.info.height >= 16)
      return { data: cut.data, raw: { width: cut.info.width, height: cut.info.height, channels: cut.info.channels } }
  } catch {
    // A uniform image has nothing but border: hash it as it is.
  }
  return decoded
}

export const hashImage = async (input: Buffer): Promise<ImageHashes> => {
  const pixels = await trimmed(input)
  const [phash, dhash, mirrorPhash, mirrorDhash] = await Promise.all([
    greyThumb(pixels, N, N, false).then(phashOf),
    greyThumb(pixels, 9, 8, false).then(dhashOf),
    greyThumb(pixels, N, N, true).then(phashOf),
    greyThumb(pixels, 9, 8, true).then(dhashOf),
  ])
  return { phash, dhash, mirrorPhash, mirrorDhash }
}

/** Multi-index hashing: the 64 bits as four 16-bit blocks. */
export const BLOCKS = 4
/** Largest pHash distance that counts as the same image (unrelated images sit near 32). */
export const IMAGE_RADIUS = 10
/**
 * Per-block search radii. Split IMAGE_RADIUS = 4·r + a (r = 2, a = 2): if two hashes are within
 * IMAGE_RADIUS, one of the first a + 1 blocks is within r bits of its counterpart or one of the others
 * within r − 1 (were the first three ≥ r + 1 and the last ≥ r apart, the distance would be ≥ 4r + a + 1).
 * So blocks 0–2 are probed at radius 2 (137 values each) and block 3 at radius 1 (17): 428 exact lookups,
 * not the 548 of radius 2 throughout.
 */
export const BLOCK_RADII: ReadonlyArray<number> = (() => {
  const r = Math.floor(IMAGE_RADIUS / BLOCKS)
  const a = IMAGE_RADIUS - BLOCKS * r
  return Array.from({ length: BLOCKS }, (_, i) => (i <= a ? r : r - 1))
})()

export const blocksOf = (hex: string): Array<number> =>
  Array.from({ length: BLOCKS }, (_, i) => Number.parseInt(hex.slice(i * 4, i * 4 + 4), 16))

/** A 64-bit hash (16 hex digits) as the signed `bigint` column stores it. */
export const hashColumn = (hex: string): string => BigInt.asIntN(64, BigInt(`0x${hex}`)).toString()

/**
 * The rows a registered image adds to the multi-index (`content_image_hashes`): its pHash and its mirror's.
 * Each row also gets a `seq` and the id of the transaction writing it (`xid`, migration 0024), by which the
 * servers' copies of the index (imageIndex.ts) find it.
 */
export const indexRows = (hashes: { readonly phash: string; readonly mirrorPhash: string }) => [
  { hash: hashColumn(hashes.phash), mirror: false },
  { hash: hashColumn(hashes.mirrorPhash), mirror: true },
]

/** Inserts `indexRows` (`$1` the workspace, `$2` the item, `$3` the rows as JSON). */
export const IMAGE_INDEX_INSERT_SQL = `INSERT INTO content_image_hashes (content_id, mirror, hash, tag)
  SELECT $2, r.mirror, r.hash::bigint, hashtext($1)
  FROM jsonb_to_recordset($3::text::jsonb) AS r(hash text, mirror boolean)`

/** The values the multi-index looks up for a probe pHash: per block, every value within that block's radius. */
export const probedValues = (phash: string): Array<Array<number>> =>
  blocksOf(phash).map((value, block) => neighbours(value, BLOCK_RADII[block]!))

/** Every 16-bit value within `radius` bits of `value` (137 values for radius 2, 17 for radius 1). */
export const neighbours = (value: number, radius: number): Array<number> => {
  const out = [value]
  const walk = (v: number, from: number, left: number) => {
    for (let bit = from; bit < 16; bit++) {
      const n = v ^ (1 << bit)
      out.push(n)
      if (left > 1) walk(n, bit + 1, left - 1)
    }
  }
  if (radius > 0) walk(value, 0, radius)
  return out
}

export interface DecodedImage {
  readonly format: ImageFormat
  /** As displayed, its EXIF orientation applied. */
  readonly width: number
  readonly height: number
  /** Frames of an animated WebP or PNG; 1 for a still image. */
  readonly pages: number
}

/** The format and size of what claims to be an image, or why it is not one we take. */
export const inspectImage = async (input: Buffer): Promise<DecodedImage | string> => {
  const sharp = await loadSharp()
  let meta: Metadata
  try {
    // The header only, nothing decoded: the size is checked below, before any decoding.
    meta = await sharp(input, { limitInputPixels: false }).metadata()
  } catch {
    return "is not a JPEG, PNG or WebP image"
  }
  if (meta.format !== "jpeg" && meta.format !== "png" && meta.format !== "webp")
    return `is ${meta.format ?? "an unknown format"}, not a JPEG, PNG or WebP image`
  // The size as the image is displayed: a photo stored on its side with an EXIF orientation of 5–8 shows (and is
  // hashed and watermarked, all of which auto-orient) with its sides swapped.
  const width = meta.autoOrient?.width ?? meta.width ?? 0
  const height = meta.autoOrient?.height ?? meta.height ?? 0
  if (width * height > MAX_INPUT_PIXELS)
    return `is ${width}×${height} pixels, more than the ${MAX_INPUT_PIXELS} pixels accepted`
  if (width < 16 || height < 16) return "is smaller than 16×16 pixels"
  // The header can lie about a truncated or corrupt body: decode it once, under the pixel limit, as strictly as
  // the hashing, the watermark and the scan decode it later (sharp's default, failOn "warning": libjpeg's
  // "Corrupt JPEG data" is a warning), so that what passes here decodes there too and never ends in a 500.
  try {
    await sharp(input, { limitInputPixels: MAX_INPUT_PIXELS, failOn: "warning" }).resize(8, 8).raw().toBuffer()
  } catch (e) {
    return `cannot be decoded (${e instanceof Error ? e.message.split("\n")[0] : "corrupt"})`
  }
  return { format: meta.format, width, height, pages: meta.pages ?? 1 }
}
