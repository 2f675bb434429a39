/**
 * The text normalisation of FOLD_VERSION 2 (textFingerprint.ts from 2026-11-29 until the fourth pass the same day,
 * when the letters of the scripts written without spaces became words of their own), kept to check migrations
 * 0028's and 0029's lists of the code points two versions cut differently, and to store rows as the code of that
 * time did. Frozen: its fold is version 2's, whatever the current one becomes.
 */
import { capPositions, shingleHashes, type Token, winnow } from "../../src/content/textFingerprint.ts"

const CONFUSABLES_V2: Readonly<Record<string, string>> = {
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
  // is folded through it (see foldV2).
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

const FORMAT = /[\p{Cf}\u115f\u1160\u3164\uffa0]/u
const MARK = /\p{M}/gu
const WORD_CHAR = /[\p{L}\p{N}]/u

/** One code point folded as version 2 did: a capital not listed folds as its small letter does. */
export const foldV2 = (ch: string): string => {
  if (FORMAT.test(ch)) return ""
  let out = ""
  for (const c of ch.normalize("NFKC").normalize("NFD").replace(MARK, "")) {
    const lower = c.toLowerCase()
    out += CONFUSABLES_V2[c] ?? (lower.length === c.length ? (CONFUSABLES_V2[lower] ?? lower) : lower)
  }
  return out.toLowerCase()
}

/** A text's words as version 2 cut them (its character walk): runs of letters and digits, in every script. */
export const tokenizeV2 = (text: string): Array<Token> => {
  const tokens: Array<Token> = []
  let word = ""
  let start = -1
  let end = -1
  let i = 0
  for (const ch of text) {
    for (const c of foldV2(ch)) {
      if (WORD_CHAR.test(c)) {
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

/** The fingerprints version 2 stored for a text: window 8, each hash at most MAX_POSITIONS_PER_HASH times. */
export const fingerprintsV2 = (text: string) =>
  capPositions(winnow(shingleHashes(tokenizeV2(text).map((t) => t.word)), 8))
