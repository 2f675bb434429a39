import type { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  FOLD_VERSION,
  fingerprintText,
  minHashOf,
  normalizeText,
  shingleHashes,
  tokenize,
  tokenizeWalk,
} from "../../src/content/textFingerprint.ts"
import { type Actor, Authenticator, ContentService, WorkspaceService } from "../../src/index.ts"
import { newId } from "../../src/shared/ids.ts"
import { type DomainTestRuntime, makeDomainRuntime, type R } from "../runtime.ts"
import { ARTICLE } from "./corpus.ts"
import { fingerprintsV2, tokenizeV2 } from "./foldV2.ts"

/**
 * Texts in scripts written without spaces between words (fourth pass, 2026-11-29): version 2 cut words at spaces and
 * punctuation only, so a clause of Chinese or Japanese was one "word" and a copy differing anywhere in a clause lost
 * it; a Japanese paragraph copied with one character changed matched nothing. Version 3 cuts each of their letters
 * as a word.
 */

let env: DomainTestRuntime
const make = async (name: string): Promise<Actor> => {
  const { apiKey } = await env.run(WorkspaceService.use((s) => s.create(null, { name, environment: "live" })))
  return env.run(Authenticator.use((a) => a.authenticate(apiKey.apiKey)))
}
beforeAll(async () => {
  env = await makeDomainRuntime()
})
afterAll(async () => env?.dispose())
const run = <A, E>(effect: Effect.Effect<A, E, R>): Promise<A> => env.run(effect)
const content = <A, E>(f: (s: ContentService["Service"]) => Effect.Effect<A, E, R>) => ContentService.use(f)

const ZH =
  "长江是亚洲第一长河，也是世界第三长河，全长约六千三百公里。它发源于青藏高原的唐古拉山脉，自西向东流经青海、西藏、" +
  "四川、云南、重庆、湖北、湖南、江西、安徽、江苏和上海等十一个省级行政区，最后注入东海。长江流域面积约一百八十万平方" +
  "公里，约占中国陆地总面积的五分之一。流域内气候温和，雨量充沛，土地肥沃，自古以来就是中国经济最发达的地区之一。长江" +
  "中下游平原河网密布，湖泊众多，被誉为鱼米之乡。三峡工程是世界上规模最大的水电站，它在防洪、发电和航运等方面发挥着" +
  "重要作用。近年来，国家实施长江经济带发展战略，坚持生态优先、绿色发展，推动沿江城市协调发展。"
const ZH_SHORT =
  "黄山位于安徽省南部，以奇松、怪石、云海、温泉和冬雪闻名于世，被称为天下第一奇山。明代旅行家徐霞客曾两次登临黄山，" +
  "留下了五岳归来不看山，黄山归来不看岳的赞叹。每年春秋两季，来自世界各地的游客络绎不绝，山上的日出和晚霞景色壮观，" +
  "令人流连忘返。"
const JA =
  "富士山は静岡県と山梨県にまたがる活火山で、標高は三千七百七十六メートルあり、日本で最も高い山です。その美しい円錐形の" +
  "姿は古くから多くの芸術作品に描かれ、葛飾北斎の富嶽三十六景はとりわけ有名です。二千十三年には富士山は信仰の対象と" +
  "芸術の源泉として世界文化遺産に登録されました。毎年七月から九月の登山シーズンには、国内外から数多くの登山者が山頂を" +
  "目指して訪れます。山頂から眺めるご来光は格別で、多くの人々がその瞬間を見るために夜通し登り続けます。"
const JA_OTHER =
  "京都は千年以上にわたって日本の都として栄えた歴史ある街で、市内には清水寺や金閣寺をはじめとする数多くの寺院や神社が" +
  "残っています。春には桜、秋には紅葉が街を彩り、毎年世界中から大勢の観光客が訪れます。祇園祭は七月に行われる京都を" +
  "代表する祭りで、豪華な山鉾が街を巡行する様子は圧巻です。"
const TH =
  "กรุงเทพมหานครเป็นเมืองหลวงและนครที่มีประชากรมากที่สุดของประเทศไทย เป็นศูนย์กลางการปกครอง การศึกษา การคมนาคมขนส่ง " +
  "การเงินการธนาคาร การพาณิชย์ การสื่อสาร และความเจริญของประเทศ ตั้งอยู่บนสามเหลี่ยมปากแม่น้ำเจ้าพระยา " +
  "มีแม่น้ำเจ้าพระยาไหลผ่านและแบ่งเมืองออกเป็นสองฝั่ง คือ ฝั่งพระนครและฝั่งธนบุรี"

const edit = (text: string, from: string, to: string) => {
  expect(text).toContain(from)
  return text.replace(from, to)
}

/** A copy with one character (or a short word) changed in the middle, per text. */
const EDITED: ReadonlyArray<readonly [string, string, string]> = [
  ["ZH", ZH, edit(ZH, "雨量充沛", "雨水充沛")],
  ["ZH_SHORT", ZH_SHORT, edit(ZH_SHORT, "络绎不绝", "纷至沓来")],
  ["JA", JA, edit(JA, "格別で", "特別で")],
  ["TH", TH, edit(TH, "ประชากร", "ผู้คน")],
]

describe("words of scripts written without spaces", () => {
  it("cuts each of their letters as a word, with its offsets; other scripts keep their words", () => {
    expect(normalizeText("iPhone15发布了。富士山は、コンピューター！ ｱｲｳ ㍿ 〇々 한국어 문장 Ünïcode")).toBe(
      // Marks are dropped as in every script (ピ as ヒ; Hangul is kept as its jamo); half-width katakana and ㍿
      // fold by NFKC.
      `iphone15 发 布 了 富 士 山 は コ ン ヒ ュ ー タ ー ア イ ウ 株 式 会 社 〇 々 ${"한국어 문장".normalize("NFD")} unicode`,
    )
    expect(tokenize("a中b㍿")).toEqual([
      { word: "a", start: 0, end: 1 },
      { word: "中", start: 1, end: 2 },
      { word: "b", start: 2, end: 3 },
      ...["株", "式", "会", "社"].map((word) => ({ word, start: 3, end: 4 })),
    ])
    // An astral ideograph is one word of two code units.
    expect(tokenize("𠀀𠀁")).toEqual([
      { word: "𠀀", start: 0, end: 2 },
      { word: "𠀁", start: 2, end: 4 },
    ])
    // Text in other scripts is cut as version 2 cut it (the English corpus through the ASCII path and the walk).
    for (const text of [
      ARTICLE,
      "Москва является столицей России",
      "Η Αθήνα είναι η πρωτεύουσα",
      "서울은 한국의 수도이다",
    ]) {
      expect(tokenize(text)).toEqual(tokenizeV2(text))
      expect(tokenizeWalk(text)).toEqual(tokenizeV2(text))
    }
  })

  it("finds a copy with a character changed, and an excerpt inside other text, as it finds English copies", async () => {
    const actor = await make("spaceless")
    for (const [title, text, copy] of EDITED) {
      const item = await run(content((s) => s.register(actor, { kind: "text", title, text })))
      const { matches } = await run(content((s) => s.scan(actor, { text: copy }, item.id)))
      expect(matches, title).toHaveLength(1)
      // Spans either side of the change (and between a phrase the text repeats, as in Thai), covering all but a
      // few characters of it.
      expect(matches[0]!.method, title).toBe("text-winnowing")
      expect(matches[0]!.spans!.length, title).toBeGreaterThanOrEqual(2)
      expect(matches[0]!.similarity, title).toBeGreaterThan(0.9)
    }
    for (const [title, text, other] of [
      ["ZH excerpt", ZH, ZH_SHORT],
      ["JA excerpt", JA, JA_OTHER],
    ] as const) {
      const item = await run(content((s) => s.register(actor, { kind: "text", title, text })))
      // From the middle of a clause to the middle of another: 100 characters after unrelated text of the language.
      const from = 45
      const excerpt = text.slice(from, from + 100)
      expect(excerpt, title).toMatch(/^\p{L}.*\p{L}$/u)
      const prefix = other.slice(0, 60)
      const candidate = `${prefix}${excerpt}${other.slice(60)}`
      const { matches } = await run(content((s) => s.scan(actor, { text: candidate }, item.id)))
      expect(matches, title).toHaveLength(1)
      expect(matches[0]!.spans, title).toHaveLength(1)
      expect(matches[0]!.spans![0], title).toMatchObject({
        candidate: { start: prefix.length, end: prefix.length + excerpt.length },
        registered: { start: from, end: from + excerpt.length },
      })
    }
  })

  it("unrelated texts of the same scripts never match each other", async () => {
    const actor = await make("unrelated")
    const texts = { ZH, ZH_SHORT, JA, JA_OTHER, TH, ARTICLE }
    const ids = new Map<string, string>()
    for (const [title, text] of Object.entries(texts)) {
      const item = await run(content((s) => s.register(actor, { kind: "text", title, text })))
      ids.set(item.id, title)
    }
    for (const [title, text] of Object.entries(texts)) {
      const { matches } = await run(content((s) => s.scan(actor, { text })))
      expect(
        matches.map((m) => [ids.get(m.contentId), m.similarity]),
        title,
      ).toEqual([[title, 1]])
    }
  })
})

describe("texts stored under fold version 2", () => {
  it("are fingerprinted again by the refold worker, and an edited copy then finds them", async () => {
    const actor = await make("upgrade")
    const sql = (f: (sql: SqlClient.SqlClient) => Effect.Effect<unknown, unknown, never>) =>
      run(SqlClient.SqlClient.use(f) as Effect.Effect<unknown, never, R>)
    // Registered before the upgrade and left at 2 by migration 0030 (it holds Han and kana): the words,
    // fingerprints and MinHash of version 2, a clause a word.
    const stored = new Map<string, { id: string; copy: string }>()
    for (const [title, text, copy] of EDITED) {
      const id = newId("cnt")
      const words = tokenizeV2(text).map((t) => t.word)
      await sql(
        (s) => s`INSERT INTO content_items (id, workspace_id, kind, title, media_type, metadata, asset, sha256, words,
            fingerprint_window, fingerprint_fold, minhash, watermarked, created_by, created_at)
          VALUES (${id}, ${actor.workspaceId}, 'text', ${title}, 'text/plain; charset=utf-8', '{}'::jsonb,
            ${Buffer.from(text).toString("base64")}, '', ${words.length}, 8, 2,
            ${JSON.stringify(minHashOf(shingleHashes(words)))}::jsonb, false, 'test', now())`,
      )
      for (const f of fingerprintsV2(text))
        await sql(
          (s) => s`INSERT INTO content_text_fingerprints (workspace_id, hash, content_id, pos)
            VALUES (${actor.workspaceId}, ${f.hash}, ${id}, ${f.pos})`,
        )
      stored.set(title, { id, copy })
      // Cut the version 3 way, the copy shares none of the rows of version 2.
      expect((await run(content((s) => s.scan(actor, { text: copy }, id)))).matches, title).toEqual([])
    }

    // The refold worker's job (run by every instance in the background since the fifth pass, refold.test.ts).
    await run(content((s) => s.refold))
    for (const [title, text] of EDITED) {
      const { id, copy } = stored.get(title)!
      const [row] = (await sql((s) => s`SELECT fingerprint_fold, words FROM content_items WHERE id = ${id}`)) as Array<{
        fingerprint_fold: number
        words: number
      }>
      expect(row, title).toEqual({ fingerprint_fold: FOLD_VERSION, words: tokenize(text).length })
      expect(FOLD_VERSION).toBe(3)
      const item = await run(content((s) => s.get(actor, id)))
      expect(item.fingerprint, title).toMatchObject({ fingerprints: fingerprintText(text).fingerprints.length })
      const { matches } = await run(content((s) => s.scan(actor, { text: copy })))
      expect(
        matches.map((m) => [m.contentId, m.method]),
        title,
      ).toEqual([[id, "text-winnowing"]])
      expect(matches[0]!.similarity, title).toBeGreaterThan(0.9)
    }
  })
})
