import { loadMigrations } from "@agentgov/db"
import { describe, expect, it } from "vitest"
import { FOLD_VERSION, normalizeText } from "../../src/content/textFingerprint.ts"
import { tokenizeV2 } from "./foldV2.ts"
import { storeBefore } from "./storeBefore.ts"

/**
 * Migration 0030 labels 3 each text registered under fold version 2 whose words are the same under version 3 (it
 * holds no code point whose fold holds a letter of a script written without spaces), and leaves the others at 2,
 * to be fingerprinted again when the service starts.
 */

const MIGRATION = "0030_content_text_spaceless"
const migration = () => loadMigrations().find((m) => m.version === MIGRATION)!.sql
const store = storeBefore(MIGRATION)

/**
 * Every code point (outside ASCII, which no version changes) that versions 2 and 3 cut differently between two Latin
 * letters: version 3 cuts a letter of those scripts from the word around it, version 2 kept it inside.
 */
const changed = (() => {
  const out: Array<number> = []
  for (let cp = 0x80; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue
    const text = `a${String.fromCodePoint(cp)}b`
    const v2 = tokenizeV2(text)
      .map((t) => t.word)
      .join(" ")
    if (v2 !== normalizeText(text)) out.push(cp)
  }
  return out
})()

/** Texts to store, inserted together by `storeAll` (one statement: there are some 100,000). */
const pending: Array<{ id: string; text: string; fold: number | null }> = []
const storeText = (id: string, text: string, fold: number | null) => {
  pending.push({ id, text, fold })
}
const storeAll = () =>
  store.sql()`INSERT INTO content_items (id, workspace_id, kind, title, media_type, asset, sha256, words,
      fingerprint_window, fingerprint_fold, minhash, watermarked, created_by, created_at)
    SELECT id, 'ws_old', 'text', id, 'text/plain; charset=utf-8', asset, '', 3, 8, fold, '[]', false, 'test', now()
    FROM unnest(${pending.map((p) => p.id)}::text[], ${pending.map((p) => Buffer.from(p.text).toString("base64"))}::text[],
      ${pending.map((p) => p.fold)}::smallint[]) AS t(id, asset, fold)`

describe(`migration ${MIGRATION}`, () => {
  it("lists exactly the code points the two versions cut differently", () => {
    expect(FOLD_VERSION).toBe(3)
    const list = /~ '\[(.*)\]'/.exec(migration())![1]!
    const pattern = new RegExp(
      `[${list.replace(/\\U([0-9A-F]{8})|\\u([0-9A-F]{4})/g, (_, a, b) => `\\u{${(a ?? b).replace(/^0+/, "")}}`)}]`,
      "u",
    )
    const listed: Array<number> = []
    for (let cp = 0x80; cp <= 0x10ffff; cp++)
      if (!(cp >= 0xd800 && cp <= 0xdfff) && pattern.test(String.fromCodePoint(cp))) listed.push(cp)
    expect(listed).toEqual(changed)
    // Han (BMP and astral), kana (half-width too), Thai, Lao, Khmer, Myanmar, and what NFKC folds into them.
    for (const ch of "中国𠀀ひらカナｱーภາកမ㍿⼀🈀々〇") expect(changed, ch).toContain(ch.codePointAt(0))
    // Scripts written with spaces are not among them.
    for (const ch of "éжαաא한ㄱअ") expect(changed, ch).not.toContain(ch.codePointAt(0))
  })

  it("labels 3 the texts of version 2 holding none of them (PostgreSQL reads the list alike), keeps the others", async () => {
    const expected = new Map<string, number | null>()
    const isChanged = new Set(changed)
    for (const cp of changed) {
      storeText(`cnt_changed_${cp}`, `plain words ${String.fromCodePoint(cp)} and more`, 2)
      expected.set(`cnt_changed_${cp}`, 2)
      // The code points either side, when not changed themselves, leave a text as it was.
      for (const near of [cp - 1, cp + 1])
        if (!isChanged.has(near) && !expected.has(`cnt_near_${near}`) && !(near >= 0xd800 && near <= 0xdfff)) {
          storeText(`cnt_near_${near}`, `plain words ${String.fromCodePoint(near)} and more`, 2)
          expected.set(`cnt_near_${near}`, 3)
        }
    }
    storeText("cnt_latin", "The committee met on Tuesday", 2)
    expected.set("cnt_latin", 3)
    storeText("cnt_korean", "서울은 한국의 수도이다", 2)
    expected.set("cnt_korean", 3)
    storeText("cnt_chinese", "The committee met in 北京 on Tuesday", 2)
    expected.set("cnt_chinese", 2)
    // Version 1 stays 1 (fingerprinted again whatever it holds); the benchmark's seeded texts stay NULL.
    storeText("cnt_v1_latin", "ᴛʜᴇ committee", 1)
    expected.set("cnt_v1_latin", 1)
    storeText("cnt_v1_chinese", "北京", 1)
    expected.set("cnt_v1_chinese", 1)
    storeText("cnt_seeded", "seeded text 1", null)
    expected.set("cnt_seeded", null)
    await storeAll()
    await store.sql()`INSERT INTO content_items (id, workspace_id, kind, title, media_type, asset, sha256, phash, dhash,
        mirror_phash, mirror_dhash, watermarked, created_by, created_at)
      VALUES ('cnt_image', 'ws_old', 'image', 'image', 'image/png', '', '', '0', '0', '0', '0', false, 'test', now())`
    expected.set("cnt_image", null)

    await store.sql().unsafe(migration())

    const rows = await store.sql()<Array<{ id: string; fingerprint_fold: number | null }>>`
      SELECT id, fingerprint_fold FROM content_items`
    expect(new Map(rows.map((r) => [r.id, r.fingerprint_fold]))).toEqual(expected)
  }, 120_000)
})
