import { loadMigrations } from "@agentgov/db"
import { describe, expect, it } from "vitest"
import { tokenizeV1 } from "./foldV1.ts"
import { tokenizeV2 } from "./foldV2.ts"
import { storeBefore } from "./storeBefore.ts"

/**
 * Migration 0028 labels each text already registered with the normalisation its rows hold: 1 (to fingerprint
 * again) when the text holds a code point versions 1 and 2 fold differently, else 2 (its rows are the same).
 */

const MIGRATION = "0028_content_text_fold"
const migration = () => loadMigrations().find((m) => m.version === MIGRATION)!.sql
const store = storeBefore(MIGRATION)

/** Every code point (outside ASCII, which no version changes) whose words differ between the two versions. */
const changed = (() => {
  const out: Array<number> = []
  for (let cp = 0x80; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue
    const ch = String.fromCodePoint(cp)
    const v1 = tokenizeV1(ch)
      .map((t) => t.word)
      .join(" ")
    const v2 = tokenizeV2(ch)
      .map((t) => t.word)
      .join(" ")
    if (v1 !== v2) out.push(cp)
  }
  return out
})()

const storeText = (id: string, text: string) =>
  store.sql()`INSERT INTO content_items (id, workspace_id, kind, title, media_type, asset, sha256, words, fingerprint_window,
      minhash, watermarked, created_by, created_at)
    VALUES (${id}, 'ws_old', 'text', ${id}, 'text/plain; charset=utf-8', ${Buffer.from(text).toString("base64")}, '',
      3, 8, '[]', false, 'test', now())`

describe(`migration ${MIGRATION}`, () => {
  it("lists exactly the code points the two versions fold differently", () => {
    const list = /~ '\[(.*)\]'/.exec(migration())![1]!
    const pattern = new RegExp(
      `[${list.replace(/\\U([0-9A-F]{8})|\\u([0-9A-F]{4})/g, (_, a, b) => `\\u{${(a ?? b).replace(/^0+/, "")}}`)}]`,
      "u",
    )
    const listed: Array<number> = []
    for (let cp = 0x80; cp <= 0x10ffff; cp++)
      if (!(cp >= 0xd800 && cp <= 0xdfff) && pattern.test(String.fromCodePoint(cp))) listed.push(cp)
    expect(listed).toEqual(changed)
    // The families of the outside review are among them.
    for (const ch of "օսհցոᴀʙᴄɢʜɪʟɴꜱʏҮԀԚԜӀϳ") expect(changed, ch).toContain(ch.codePointAt(0))
  })

  it("labels 1 the texts holding one of them (PostgreSQL reads the list alike), 2 the others; images none", async () => {
    const expected = new Map<string, number | null>()
    for (const cp of changed) {
      await storeText(`cnt_changed_${cp}`, `plain words ${String.fromCodePoint(cp)} and more`)
      expected.set(`cnt_changed_${cp}`, 1)
      // The code points either side, when not changed themselves, leave a text as it was.
      for (const near of [cp - 1, cp + 1])
        if (!changed.includes(near) && !expected.has(`cnt_near_${near}`) && !(near >= 0xd800 && near <= 0xdfff)) {
          await storeText(`cnt_near_${near}`, `plain words ${String.fromCodePoint(near)} and more`)
          expected.set(`cnt_near_${near}`, 2)
        }
    }
    // Latin, and lookalikes version 1 already folded.
    await storeText("cnt_latin", "The committee met on Tuesday")
    expected.set("cnt_latin", 2)
    await storeText("cnt_cyrillic", "Тhе соmmіttее, ΑΒΕ and ё")
    expected.set("cnt_cyrillic", 2)
    await store.sql()`INSERT INTO content_items (id, workspace_id, kind, title, media_type, asset, sha256, phash, dhash,
        mirror_phash, mirror_dhash, watermarked, created_by, created_at)
      VALUES ('cnt_image', 'ws_old', 'image', 'image', 'image/png', '', '', '0', '0', '0', '0', false, 'test', now())`
    expected.set("cnt_image", null)

    await store.sql().unsafe(migration())

    const rows = await store.sql()<Array<{ id: string; fingerprint_fold: number | null }>>`
      SELECT id, fingerprint_fold FROM content_items`
    expect(new Map(rows.map((r) => [r.id, r.fingerprint_fold]))).toEqual(expected)
    await expect(store.sql()`UPDATE content_items SET fingerprint_fold = 2 WHERE id = 'cnt_image'`).rejects.toThrow(
      /content_items_fingerprint_fold/,
    )
  })
})
