import type sharpModule from "sharp"

let loaded: Promise<typeof sharpModule> | undefined

/**
 * sharp, loaded at its first use rather than when the server starts: it brings libvips and its libraries,
 * memory that an instance which never registers or scans an image has no use for.
 */
export const loadSharp = (): Promise<typeof sharpModule> => {
  loaded ??= import("sharp").then((m) => m.default)
  return loaded
}

/**
 * How many images this process works on at once (decoding, hashing, watermarking, reading or signing a manifest).
 * One image under the 40-megapixel limit takes hundreds of MiB while decoded (a 40 MP registration peaked at 750 MB
 * RSS in the outside review of 2026-11-29), so requests beyond these wait their turn instead of adding up to more
 * memory than the machine has. sharp's own thread pool runs each one on several threads.
 */
export const IMAGE_SLOTS = 2
let busy = 0
let peak = 0
const waiting: Array<() => void> = []

/** Runs `work` in one of the IMAGE_SLOTS, waiting (first come, first served) for one to free up. */
export const withImageSlot = async <A>(work: () => Promise<A>): Promise<A> => {
  if (busy < IMAGE_SLOTS) busy++
  else await new Promise<void>((resolve) => waiting.push(resolve))
  peak = Math.max(peak, busy)
  try {
    return await work()
  } finally {
    // The slot passes straight to the next in line, if any.
    const next = waiting.shift()
    if (next) next()
    else busy--
  }
}

/** The most image works that ran at once in this process since the last call (and resets it): for tests. */
export const takeImageSlotsPeak = (): number => {
  const seen = peak
  peak = busy
  return seen
}
