/**
 * The text normalisation of FOLD_VERSION 1 (textFingerprint.ts until 2026-11-29), kept to check migration 0028's
 * list of the code points the two versions fold differently, and to store rows as the code of that time did.
 */
import { shingleHashes, type Token, winnow } from "../../src/content/textFingerprint.ts"

/** Lookalikes of Latin letters from other scripts (the confusables most used to dodge filters). */
const CONFUSABLES_V1: Readonly<Record<string, string>> = {
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
}

const FORMAT = /[\p{Cf}\u115f\u1160\u3164\uffa0]/u
const MARK = /\p{M}/gu
const WORD_CHAR = /[\p{L}\p{N}]/u

/** One code point folded as version 1 did: the lookalike map before case folding. */
export const foldV1 = (ch: string): string => {
  if (FORMAT.test(ch)) return ""
  let out = ""
  for (const c of ch.normalize("NFKC").normalize("NFD").replace(MARK, "")) out += CONFUSABLES_V1[c] ?? c
  return out.toLowerCase()
}

/** A text's words as version 1 cut them (its character walk). */
export const tokenizeV1 = (text: string): Array<Token> => {
  const tokens: Array<Token> = []
  let word = ""
  let start = -1
  let end = -1
  let i = 0
  for (const ch of text) {
    for (const c of foldV1(ch)) {
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

/** The fingerprints version 1 stored for a text, with the window of the time (4). */
export const fingerprintsV1 = (text: string, window: number) =>
  winnow(shingleHashes(tokenizeV1(text).map((t) => t.word)), window)
