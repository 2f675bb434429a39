import { loadMigrations } from "@agentgov/db"
import { describe, expect, it } from "vitest"
import { LEGACY_WINDOW, shingleHashes, tokenize, WINDOW, winnow } from "../../src/content/textFingerprint.ts"
import { rng } from "./corpus.ts"
import { storeBefore } from "./storeBefore.ts"

/**
 * Migration 0025 labels each text already registered with the winnowing window its stored fingerprints show:
 * the rows of a store made before it, written by the code of the time (window 4) and of the day after (window 8).
 */

const MIGRATION = "0025_content_text_window"
const store = storeBefore(MIGRATION)

/** `n` random made-up words. */
const text = (seed: number, n: number) => {
  const r = rng(seed)
  return Array.from({ length: n }, () =>
    Array.from({ length: 2 + Math.floor(r() * 3) }, () =>
      "kalominerusatevozu".slice(2 * Math.floor(r() * 9)).slice(0, 2),
    ).join(""),
  ).join(" ")
}

/** A text item as the code of the time stored it: its words and its fingerprints kept with `window`. */
const storeText = async (id: string, text: string, window: number) => {
  const words = tokenize(text).map((t) => t.word)
  const kept = winnow(shingleHashes(words), window)
  await store.sql()`INSERT INTO content_items (id, workspace_id, kind, title, media_type, asset, sha256, words, minhash,
      watermarked, created_by, created_at)
    VALUES (${id}, 'ws_old', 'text', ${id}, 'text/plain; charset=utf-8', '', '', ${words.length}, '[]', false, 'test',
      now())`
  for (const f of kept)
    await store.sql()`INSERT INTO content_text_fingerprints (workspace_id, hash, content_id, pos)
      VALUES ('ws_old', ${f.hash}, ${id}, ${f.pos})`
  return kept.length
}

describe(`migration ${MIGRATION}`, () => {
  it("names the window of every stored text from its fingerprints' gaps; images have none", async () => {
    const expected = new Map<string, number>()
    // Texts of 12 to ~400 words, each stored once per window: the label must follow the rows, never the length.
    for (let i = 0; i < 40; i++) {
      const words = text(i + 1, 12 + ((i * 37) % 400))
      expect(await storeText(`cnt_w4_${i}`, words, LEGACY_WINDOW)).toBeGreaterThan(0)
      expected.set(`cnt_w4_${i}`, LEGACY_WINDOW)
      await storeText(`cnt_w8_${i}`, words, WINDOW)
      expected.set(`cnt_w8_${i}`, WINDOW)
    }
    // Too short for a shingle: no fingerprints, where both windows keep the same (nothing); named the older.
    await storeText("cnt_short", "three short words", LEGACY_WINDOW)
    expected.set("cnt_short", LEGACY_WINDOW)
    await store.sql()`INSERT INTO content_items (id, workspace_id, kind, title, media_type, asset, sha256, phash, dhash,
        mirror_phash, mirror_dhash, watermarked, created_by, created_at)
      VALUES ('cnt_image', 'ws_old', 'image', 'image', 'image/png', '', '', '0', '0', '0', '0', false, 'test', now())`

    await store.sql().unsafe(loadMigrations().find((m) => m.version === MIGRATION)!.sql)

    const rows = await store.sql()<Array<{ id: string; fingerprint_window: number | null }>>`
      SELECT id, fingerprint_window FROM content_items ORDER BY id`
    const labelled = new Map(rows.map((r) => [r.id, r.fingerprint_window]))
    expect(labelled.get("cnt_image")).toBeNull()
    labelled.delete("cnt_image")
    expect(labelled).toEqual(expected)
    // A text must now say its window; an image must not have one.
    await expect(store.sql()`UPDATE content_items SET fingerprint_window = NULL WHERE id = 'cnt_w8_0'`).rejects.toThrow(
      /content_items_fingerprint_window/,
    )
    await expect(store.sql()`UPDATE content_items SET fingerprint_window = 8 WHERE id = 'cnt_image'`).rejects.toThrow(
      /content_items_fingerprint_window/,
    )
  })
})
