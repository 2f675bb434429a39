/**
 * Text fingerprints (decision D15): a normaliser that undoes the cheap tricks used to hide a copy, then
 * winnowed word k-gram hashes (for partial copies, kept in an inverted index) and a MinHash signature
 * (for whole-document near-duplicates).
 *
 * Normalisation, per code point: NFKC (full-width and ligature forms fold to their plain letters), then
 * diacritics dropped (NFD without combining marks), common Armenian, Cyrillic and Greek lookalikes and the Latin
 * small capitals mapped to the Latin letter they imitate (a capital through its small letter), case folded. Format characters (`\p{Cf}`: zero-width space, joiners, soft
 * hyphen, BOM, bidi marks) and the invisible Hangul fillers are dropped. Words are runs of letters and digits; everything else is a
 * separator, so whitespace and punctuation differences fold away. In the scripts written without spaces between
 * words (Han, Hiragana, Katakana, Thai, Lao, Khmer, Myanmar: SPACELESS) each letter is a word of its own, so a
 * shingle there is 5 characters (fold version 3). Each word keeps the offsets of the original text it came from,
 * so matches are reported as spans of the texts as sent.
 */

/** Lookalikes of Latin letters from other scripts (the confusables most used to dodge filters). */
const CONFUSABLES: Readonly<Record<string, string>> = {
  // Cyrillic
  а: "a",
  в: "b",
  е: "e",
  ё: "e",
  к: "k",
  м: "m",
  н: "h",
  о: "o",
  р: "p",
  с: "c",
  т: "t",
  у: "y",
  х: "x",
  ѕ: "s",
  і: "i",
  ї: "i",
  ј: "j",
  ԁ: "d",
  ԛ: "q",
  ԝ: "w",
  һ: "h",
  ӏ: "l",
  ь: "b",
  г: "r",
  А: "a",
  В: "b",
  Е: "e",
  К: "k",
  М: "m",
  Н: "h",
  О: "o",
  Р: "p",
  С: "c",
  Т: "t",
  У: "y",
  Х: "x",
  Ѕ: "s",
  І: "i",
  Ј: "j",
  // Greek
  α: "a",
  β: "b",
  ε: "e",
  ι: "i",
  κ: "k",
  ν: "v",
  ο: "o",
  ρ: "p",
  τ: "t",
  υ: "u",
  χ: "x",
  ω: "w",
  Α: "a",
  Β: "b",
  Ε: "e",
  Ζ: "z",
  Η: "h",
  Ι: "i",
  Κ: "k",
  Μ: "m",
  Ν: "n",
  Ο: "o",
  Ρ: "p",
  Τ: "t",
  Υ: "y",
  Χ: "x",
  // Latin lookalikes outside ASCII that NFKC keeps
  ı: "i",
  ȷ: "j",
  ɡ: "g",
  ɑ: "a",
  ʀ: "r",
  // Added in FOLD_VERSION 2 (2026-11-29). Armenian, Cyrillic and Greek: the single-letter "MA" entries of Unicode's
  // confusables.txt (UTS #39 skeletons) for these letters, lower-cased; a capital whose small letter is listed
  // is folded through it (see foldSlow).
  Օ: "o",
  Ս: "u",
  Տ: "s",
  ա: "w",
  գ: "q",
  զ: "q",
  հ: "h",
  ո: "n",
  ռ: "n",
  ս: "u",
  ց: "g",
  ք: "f",
  օ: "o",
  ү: "y",
  ѵ: "v",
  ѡ: "w",
  ҽ: "e",
  Ԍ: "g",
  ϳ: "j",
  Ϳ: "j",
  // Latin small capitals: each is named LATIN LETTER SMALL CAPITAL <X> in UnicodeData.txt and folds to <x>
  // (there is none of X). NFKC keeps them; their modifier forms (ᶦ, ᶫ, ᶰ, ᶸ, 𐞄, …) become them.
  ᴀ: "a",
  ʙ: "b",
  ᴄ: "c",
  ᴅ: "d",
  ᴇ: "e",
  ꜰ: "f",
  ɢ: "g",
  ʜ: "h",
  ɪ: "i",
  ᴊ: "j",
  ᴋ: "k",
  ʟ: "l",
  ᴍ: "m",
  ɴ: "n",
  ᴏ: "o",
  ᴘ: "p",
  ꞯ: "q",
  ꜱ: "s",
  ᴛ: "t",
  ᴜ: "u",
  ᴠ: "v",
  ᴡ: "w",
  ʏ: "y",
  ᴢ: "z",
}

/**
 * The version of the normalisation registered texts were fingerprinted with (`content_items.fingerprint_fold`):
 * 1 until 2026-11-29, 2 since the Armenian lookalikes, the Latin small capitals and a few more Cyrillic and Greek
 * letters were added to CONFUSABLES and capitals began to fold through their small letter, 3 since the letters of
 * the SPACELESS scripts are words of their own (the same day, fourth pass: a paragraph of Chinese or Japanese was
 * a handful of "words" cut at its punctuation, and a copy differing anywhere in a clause lost that clause). Texts
 * stored under an older version are fingerprinted again by a background worker the service starts (ContentService),
 * as their rows would not be found by a copy folded the new way; until then a scan looks them up cut the old way
 * (`tokenizeLegacy`).
 */
export const FOLD_VERSION = 3

/**
 * Letters (after folding) of the scripts written without spaces between words, each cut as a word of its own:
 * Han (with 々, 〆, 〇 and the other letters whose script extensions include it), Hiragana, Katakana (ー among
 * them; half-width forms fold to these by NFKC), Thai, Lao, Khmer, Myanmar. A word of these scripts is not
 * found by where spaces are; a dictionary segmenter (`Intl.Segmenter`) would find it, but its cuts follow the
 * ICU data of the Node that runs it, and a stored fingerprint must be cut the same way by every later version,
 * so the unit is the character: deterministic, a shingle of 5 characters, and a reported run of 12
 * (MIN_SPAN_WORDS) a clause (CNKI's common plagiarism rule counts 13 characters). Korean is written with spaces
 * and keeps its words.
 */
const SPACELESS = /[\p{scx=Han}\p{scx=Hiragana}\p{scx=Katakana}\p{scx=Thai}\p{scx=Lao}\p{scx=Khmer}\p{scx=Myanmar}]/u
/** Thai (U+0E00) is the first of them: anything below is cut by spaces. */
const isSpaceless = (c: string): boolean => c.charCodeAt(0) >= 0x0e00 && SPACELESS.test(c)

/**
 * Characters dropped: format characters (`\p{Cf}`), and the Hangul fillers, letters (`\p{Lo}`) that render as
 * nothing: one between every two letters hid a copy entirely (U+FFA0, the half-width filler, is U+3164 after NFKC).
 */
const FORMAT = /[\p{Cf}\u115f\u1160\u3164\uffa0]/u
const MARK = /\p{M}/gu
const WORD_CHAR = /[\p{L}\p{N}]/u

/** One normalised word and where it came from in the original text (UTF-16 offsets, end exclusive). */
export interface Token {
  readonly word: string
  readonly start: number
  readonly end: number
}

const foldSlow = (ch: string): string => {
  if (FORMAT.test(ch)) return ""
  let out = ""
  // A capital not listed folds as its small letter does (Ԁ as ԁ, Ü as u): the capitals listed look like another
  // Latin letter than their small one does (Greek Η is H, η is not h).
  for (const c of ch.normalize("NFKC").normalize("NFD").replace(MARK, "")) {
    const lower = c.toLowerCase()
    out += CONFUSABLES[c] ?? (lower.length === c.length ? (CONFUSABLES[lower] ?? lower) : lower)
  }
  return out.toLowerCase()
}

/** Folded code points outside ASCII, as met: a text uses few distinct ones, and folding one costs two normalisations. */
const folded = new Map<string, string>()
const FOLDED_MAX = 65_536

/** NFKC, NFD without marks, confusables and case folding leave ASCII as it is, but for its capitals. */
const foldCodePoint = (ch: string): string => {
  const code = ch.charCodeAt(0)
  if (code < 0x80) return code >= 0x41 && code <= 0x5a ? String.fromCharCode(code + 32) : ch
  let out = folded.get(ch)
  if (out === undefined) {
    out = foldSlow(ch)
    if (folded.size >= FOLDED_MAX) folded.clear()
    folded.set(ch, out)
  }
  return out
}

const isWordChar = (c: string): boolean => {
  const code = c.charCodeAt(0)
  if (code < 0x80)
    return (code >= 0x61 && code <= 0x7a) || (code >= 0x30 && code <= 0x39) || (code >= 0x41 && code <= 0x5a)
  return WORD_CHAR.test(c)
}

const NON_ASCII = /[\u0080-\uffff]/

/**
 * The normalised words of `text`, each with its original offsets. Text in ASCII alone (no format character,
 * mark, lookalike or SPACELESS letter there; folding only lowers capitals) is cut by character code, words sliced from the text,
 * which gives the same words as the character-by-character walk (the test compares them) in a fraction of its
 * time.
 */
export const tokenize = (text: string): Array<Token> => {
  if (NON_ASCII.test(text)) return tokenizeWalk(text)
  const tokens: Array<Token> = []
  let start = -1
  let upper = false
  for (let i = 0; i <= text.length; i++) {
    const code = i < text.length ? text.charCodeAt(i) : 0
    const lower = (code >= 0x61 && code <= 0x7a) || (code >= 0x30 && code <= 0x39)
    const capital = code >= 0x41 && code <= 0x5a
    if (lower || capital) {
      if (start < 0) start = i
      if (capital) upper = true
    } else if (start >= 0) {
      const word = text.slice(start, i)
      tokens.push({ word: upper ? word.toLowerCase() : word, start, end: i })
      start = -1
      upper = false
    }
  }
  return tokens
}

/**
 * `tokenize` character by character, for any text. `spaceless: false` cuts the SPACELESS letters as fold version 2
 * did (inside the words around them, at spaces and punctuation only): see `tokenizeLegacy`.
 */
export const tokenizeWalk = (text: string, spaceless = true): Array<Token> => {
  const tokens: Array<Token> = []
  let word = ""
  let start = -1
  let end = -1
  let i = 0
  for (const ch of text) {
    const folded = foldCodePoint(ch)
    if (folded === "") {
      // A format character inside a word neither splits it nor ends it.
      i += ch.length
      continue
    }
    for (const c of folded) {
      if (isWordChar(c)) {
        if (spaceless && isSpaceless(c)) {
          // A word of its own, ending the one before (SPACELESS); every letter a character folds to (㍿ is
          // 株式会社) has that character's offsets.
          if (start >= 0) tokens.push({ word, start, end })
          tokens.push({ word: c, start: i, end: i + ch.length })
          word = ""
          start = -1
          continue
        }
        if (start < 0) start = i
        word += c
        end = i + ch.length
      } else if (start >= 0) {
        tokens.push({ word, start, end })
        word = ""
        start = -1
      }
    }
    i += ch.length
  }
  if (start >= 0) tokens.push({ word, start, end })
  return tokens
}

/**
 * A text's words as fold version 2 cut them (every version's fold of a code point but the SPACELESS cut, which
 * version 3 added; the test compares it with a frozen copy of version 2): what the rows and MinHash of a text still
 * at an older `fingerprint_fold` were computed from, until the refold worker (ContentService) fingerprints it again.
 * A scan meanwhile looks such a text up, and verifies it, with the candidate cut the same way.
 */
export const tokenizeLegacy = (text: string): Array<Token> =>
  NON_ASCII.test(text) ? tokenizeWalk(text, false) : tokenize(text)

/** The normalised text: its words joined by single spaces. */
export const normalizeText = (text: string): string =>
  tokenize(text)
    .map((t) => t.word)
    .join(" ")

/** Words per shingle. */
export const SHINGLE_WORDS = 5
/**
 * Winnowing window (in shingles), of registered texts and scanned candidates alike: any copied run of
 * WINDOW + SHINGLE_WORDS - 1 = 12 words (MIN_SPAN_WORDS, the shortest run reported) is one whole window on each
 * side, whose minimum both keep (rightmost on ties, on both sides), so it shares a fingerprint. Each text keeps
 * ~2/9 of its shingles.
 *
 * Registered texts were winnowed with LEGACY_WINDOW (4) until 2026-11-27, which kept ~2/5: every run of 8 words,
 * although no run under 12 is reported. The minimum of a window of 8 shingles inside a copied run is also the
 * minimum of a window of 4 inside it, so the rows stored then are a superset of what WINDOW keeps and are scanned
 * as they are (the test checks the spans found are the same either way).
 */
export const WINDOW = 8
/** The window registered texts were stored with before WINDOW (see there); their rows stay valid. */
export const LEGACY_WINDOW = 4
/** The candidate's window: WINDOW, named for the scan. */
export const SCAN_WINDOW = WINDOW

/** MinHash signature length. */
export const MINHASH_SIZE = 64

/** 32-bit FNV-1a over the UTF-16 code units, then a murmur finaliser for avalanche. */
export const hash32 = (s: string, seed = 0x811c9dc5): number => {
  let h = seed >>> 0
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h >>> 0
}

/** The hash of each shingle (the k words starting at each position). */
export const shingleHashes = (words: ReadonlyArray<string>): Array<number> => {
  const out: Array<number> = []
  // hash32 of the shingle's words joined by spaces, over the words themselves: no string built per position.
  for (let i = 0; i + SHINGLE_WORDS <= words.length; i++) {
    let h = 0x811c9dc5
    for (let k = i; k < i + SHINGLE_WORDS; k++) {
      if (k > i) h = Math.imul(h ^ 0x20, 0x01000193)
      const w = words[k]!
      for (let j = 0; j < w.length; j++) h = Math.imul(h ^ w.charCodeAt(j), 0x01000193)
    }
    h ^= h >>> 16
    h = Math.imul(h, 0x85ebca6b)
    h ^= h >>> 13
    h = Math.imul(h, 0xc2b2ae35)
    h ^= h >>> 16
    out.push(h >>> 0)
  }
  // A text shorter than one shingle is one shingle of what it has.
  if (out.length === 0 && words.length > 0) out.push(hash32(words.join(" ")))
  return out
}

/** A fingerprint: a shingle hash and the word position where its shingle starts. */
export interface Fingerprint {
  readonly hash: number
  readonly pos: number
}

/**
 * Winnowing (Schleimer, Wilkerson, Aiken 2003): the minimum hash of every window of WINDOW shingles,
 * rightmost on ties, each (hash, position) once. Guarantees a shared fingerprint for any shared run of
 * WINDOW + SHINGLE_WORDS - 1 words.
 */
export const winnow = (hashes: ReadonlyArray<number>, window = WINDOW): Array<Fingerprint> => {
  const out: Array<Fingerprint> = []
  if (hashes.length === 0) return out
  const w = Math.min(window, hashes.length)
  let last = -1
  for (let start = 0; start + w <= hashes.length; start++) {
    let min = start
    for (let j = start + 1; j < start + w; j++) if (hashes[j]! <= hashes[min]!) min = j
    if (min !== last) {
      out.push({ hash: hashes[min]!, pos: min })
      last = min
    }
  }
  return out
}

const MINHASH_SEEDS = Array.from({ length: MINHASH_SIZE }, (_, i) => hash32(`minhash-${i}`))

/**
 * One minimum per seeded hash over a text's shingle hashes (Broder 1997): the share of equal slots estimates
 * Jaccard.
 */
export const minHashOf = (shingles: ReadonlyArray<number>): Array<number> => {
  const sig = new Array<number>(MINHASH_SIZE).fill(0xffffffff)
  for (const s of shingles) {
    for (let i = 0; i < MINHASH_SIZE; i++) {
      // Re-hash the shingle hash with each seed: a family of independent-enough permutations.
      let h = (s ^ MINHASH_SEEDS[i]!) >>> 0
      h = Math.imul(h ^ (h >>> 16), 0x7feb352d)
      h = Math.imul(h ^ (h >>> 15), 0x846ca68b)
      h = (h ^ (h >>> 16)) >>> 0
      if (h < sig[i]!) sig[i] = h
    }
  }
  return sig
}

/**
 * How many distinct values a list of 32-bit hashes holds: an open-addressing table in a typed array (Fibonacci
 * hashing, linear probing, 0 counted apart). A `Set` of the same 10,000 shingle hashes took ~17× as long: above
 * 2^30 each is a heap number, hashed and boxed as a double.
 */
export const distinctCount = (values: ReadonlyArray<number>): number => {
  let bits = 1
  while (1 << bits < values.length * 2) bits++
  const table = new Uint32Array(1 << bits)
  const mask = (1 << bits) - 1
  let n = 0
  let zero = 0
  for (const v of values) {
    if (v === 0) {
      zero = 1
      continue
    }
    let i = Math.imul(v, 0x9e3779b1) >>> (32 - bits)
    for (;;) {
      const x = table[i]!
      if (x === 0) {
        table[i] = v
        n++
        break
      }
      if (x === v) break
      i = (i + 1) & mask
    }
  }
  return n + zero
}

export const minHashSimilarity = (a: ReadonlyArray<number>, b: ReadonlyArray<number>): number => {
  let same = 0
  for (let i = 0; i < MINHASH_SIZE; i++) if (a[i] === b[i]) same++
  return same / MINHASH_SIZE
}

export interface TextFingerprints {
  readonly tokens: ReadonlyArray<Token>
  readonly fingerprints: ReadonlyArray<Fingerprint>
  readonly minhash: ReadonlyArray<number>
}

/**
 * A scanned candidate's words, shingle hashes and the fingerprints it looks up (winnowed with SCAN_WINDOW); cut by
 * `tokenizeLegacy` to look up the texts not yet fingerprinted again.
 */
export const candidateFingerprints = (text: string, cut: (text: string) => Array<Token> = tokenize) => {
  const tokens = cut(text)
  const shingles = shingleHashes(tokens.map((t) => t.word))
  return { tokens, shingles, fingerprints: winnow(shingles, SCAN_WINDOW) }
}

/**
 * Positions of one shingle hash a text keeps, registered (stored) and scanned (looked up) alike. A repeated
 * shingle is the rightmost minimum of every window it spans (winnowing breaks ties to the right), so a text that
 * repeats one phrase ("spam spam spam …") kept every position: N rows stored, and a scan of such a text against
 * such an item paired every position with every other (N² seeds: 5,000 words held 4 GB for 45 s). Positions
 * beyond the first of a hash add no copied run that their first occurrences do not already seed.
 */
export const MAX_POSITIONS_PER_HASH = 8

/** The fingerprints with at most MAX_POSITIONS_PER_HASH positions of each hash, the first ones. */
export const capPositions = (fingerprints: ReadonlyArray<Fingerprint>): Array<Fingerprint> => {
  const seen = new Map<number, number>()
  const out: Array<Fingerprint> = []
  for (const f of fingerprints) {
    const n = seen.get(f.hash) ?? 0
    if (n >= MAX_POSITIONS_PER_HASH) continue
    seen.set(f.hash, n + 1)
    out.push(f)
  }
  return out
}

/**
 * What a registered text stores: the candidate's fingerprints (one window for both, each hash at most
 * MAX_POSITIONS_PER_HASH times) and the MinHash of its shingles.
 */
export const fingerprintText = (text: string): TextFingerprints => {
  const { tokens, shingles, fingerprints } = candidateFingerprints(text)
  return { tokens, fingerprints: capPositions(fingerprints), minhash: minHashOf(shingles) }
}

/** A copied run, in words of each text. */
export interface WordSpan {
  readonly candidate: readonly [number, number]
  readonly registered: readonly [number, number]
}

/** Shortest copied run reported, in words: shorter shared phrases are common between unrelated texts. */
export const MIN_SPAN_WORDS = 12

/**
 * The copied runs between two tokenised texts, seeded by the positions of shared fingerprints and grown
 * word by word in both directions (which also discards hash collisions: the words must be equal).
 *
 * Each run is grown once: a seed inside a run already grown on its diagonal (candidate − registered position)
 * is skipped, the end of the last run of each diagonal kept (seeds come in candidate order, so a later seed on
 * a diagonal is either inside its last run or past it). The words compared are bounded too, by
 * `budget` (by default 4 × both lengths + 100,000): only texts that repeat themselves on many diagonals (a
 * phrase over and over) reach it, and what was found by then is answered.
 */
export const copiedSpans = (
  candidate: ReadonlyArray<Token>,
  registered: ReadonlyArray<Token>,
  seeds: ReadonlyArray<readonly [number, number]>,
  budget = 4 * (candidate.length + registered.length) + 100_000,
): Array<WordSpan> => {
  const spans: Array<WordSpan> = []
  const grownTo = new Map<number, number>()
  let left = budget
  for (const [c0, r0] of [...seeds].sort((a, b) => a[0] - b[0] || a[1] - b[1])) {
    if (left <= 0) break
    const diagonal = c0 - r0
    if (c0 < (grownTo.get(diagonal) ?? -1)) continue
    if (candidate[c0]?.word !== registered[r0]?.word) continue
    let cs = c0
    let rs = r0
    while (cs > 0 && rs > 0 && candidate[cs - 1]!.word === registered[rs - 1]!.word) {
      cs--
      rs--
    }
    let ce = c0
    let re = r0
    while (ce < candidate.length && re < registered.length && candidate[ce]!.word === registered[re]!.word) {
      ce++
      re++
    }
    grownTo.set(diagonal, ce)
    left -= ce - cs
    if (ce - cs >= MIN_SPAN_WORDS) spans.push({ candidate: [cs, ce], registered: [rs, re] })
  }
  return spans
}

/**
 * The seeds of a scan against one item: each fingerprint hash the two share, every candidate position of it
 * against every registered one, at most MAX_POSITIONS_PER_HASH of each (rows stored before the cap may hold
 * more).
 */
export const seedPairs = (
  candidate: ReadonlyMap<number, ReadonlyArray<number>>,
  registered: ReadonlyMap<number, ReadonlyArray<number>>,
): Array<readonly [number, number]> => {
  const pairs: Array<readonly [number, number]> = []
  for (const [hash, at] of registered) {
    const from = candidate.get(hash)
    if (!from) continue
    // The first ones, whatever order the rows came in.
    const rs = at.length > MAX_POSITIONS_PER_HASH ? [...at].sort((a, b) => a - b).slice(0, MAX_POSITIONS_PER_HASH) : at
    for (const c of from.slice(0, MAX_POSITIONS_PER_HASH)) for (const r of rs) pairs.push([c, r] as const)
  }
  return pairs
}

/** How many positions of a text of `length` words the ranges cover. */
export const coverage = (ranges: ReadonlyArray<readonly [number, number]>, length: number): number => {
  if (length === 0) return 0
  const sorted = [...ranges].sort((a, b) => a[0] - b[0])
  let total = 0
  let end = -1
  for (const [s, e] of sorted) {
    const from = Math.max(s, end)
    if (e > from) total += e - from
    end = Math.max(end, e)
  }
  return total / length
}
