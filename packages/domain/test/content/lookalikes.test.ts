import type { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  FOLD_VERSION,
  fingerprintText,
  minHashOf,
  normalizeText,
  shingleHashes,
} from "../../src/content/textFingerprint.ts"
import { type Actor, Authenticator, ContentService, WorkspaceService } from "../../src/index.ts"
import { newId } from "../../src/shared/ids.ts"
import { type DomainTestRuntime, makeDomainRuntime, type R } from "../runtime.ts"
import { ARTICLE as PROSE } from "./corpus.ts"
import { fingerprintsV1, tokenizeV1 } from "./foldV1.ts"

/**
 * Lookalike families an outside review found unfolded (2026-11-29): a copy rewritten with Armenian letters, Latin
 * small capitals, or Cyrillic and Greek capitals whose small letter is a known lookalike was not matched.
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

const ARTICLE = `${PROSE} Questions about the quay, the jetty and the wharf went to the Dock Quarter's working group in writing.`

const rewrite = (text: string, letters: Readonly<Record<string, string>>) =>
  [...text].map((c) => letters[c] ?? c).join("")

/** Each family, as a copier would use it: letters of the text replaced by their lookalikes. */
const FAMILIES: Readonly<Record<string, (text: string) => string>> = {
  // Armenian small and capital letters (confusables.txt): օ ս հ ց ո ռ զ ք ա, Օ Ս Տ.
  armenian: (t) =>
    rewrite(t, { o: "օ", u: "ս", h: "հ", g: "ց", n: "ո", q: "զ", f: "ք", w: "ա", O: "Օ", U: "Ս", S: "Տ" }).replaceAll(
      "rո",
      "rռ",
    ),
  // Every letter a Latin small capital (there is none of x).
  "small capitals": (t) =>
    rewrite(t.toLowerCase(), {
      a: "ᴀ",
      b: "ʙ",
      c: "ᴄ",
      d: "ᴅ",
      e: "ᴇ",
      f: "ꜰ",
      g: "ɢ",
      h: "ʜ",
      i: "ɪ",
      j: "ᴊ",
      k: "ᴋ",
      l: "ʟ",
      m: "ᴍ",
      n: "ɴ",
      o: "ᴏ",
      p: "ᴘ",
      q: "ꞯ",
      r: "ʀ",
      s: "ꜱ",
      t: "ᴛ",
      u: "ᴜ",
      v: "ᴠ",
      w: "ᴡ",
      y: "ʏ",
      z: "ᴢ",
    }),
  // In capitals, every Latin capital with a Cyrillic lookalike replaced by it (Ү Ԁ Ԛ Ԝ Ԍ Ӏ among them).
  "cyrillic capitals": (t) =>
    rewrite(t.toUpperCase(), {
      A: "А",
      B: "В",
      C: "С",
      D: "Ԁ",
      E: "Е",
      G: "Ԍ",
      H: "Н",
      I: "І",
      J: "Ј",
      K: "К",
      L: "Ӏ",
      M: "М",
      O: "О",
      P: "Р",
      Q: "Ԛ",
      S: "Ѕ",
      T: "Т",
      W: "Ԝ",
      X: "Х",
      Y: "Ү",
    }),
  // In capitals, every Latin capital with a Greek lookalike replaced by it (Ϳ among them).
  "greek capitals": (t) =>
    rewrite(t.toUpperCase(), {
      A: "Α",
      B: "Β",
      E: "Ε",
      H: "Η",
      I: "Ι",
      J: "Ϳ",
      K: "Κ",
      M: "Μ",
      N: "Ν",
      O: "Ο",
      P: "Ρ",
      T: "Τ",
      X: "Χ",
      Y: "Υ",
      Z: "Ζ",
    }),
}

/** Genuine prose in the three scripts: folding some of their letters must not make them match other texts. */
const ARMENIAN =
  "Երևանը Հայաստանի մայրաքաղաքն է և երկրի ամենամեծ քաղաքը։ Այն գտնվում է Հրազդան գետի ափին, Արարատյան " +
  "դաշտավայրի հյուսիսարևելյան մասում։ Քաղաքի պատմությունը սկսվում է մ.թ.ա. 782 թվականից, երբ Ուրարտուի արքա " +
  "Արգիշտի Առաջինը հիմնեց Էրեբունի ամրոցը։ Այսօր Երևանը երկրի տնտեսական, մշակութային և գիտական կենտրոնն է։"
const ARMENIAN_OTHER =
  "Սևանա լիճը Հայաստանի ամենամեծ լիճն է և Կովկասի ամենամեծ քաղցրահամ ջրավազանը։ Այն գտնվում է ծովի մակերևույթից " +
  "շուրջ երկու հազար մետր բարձրության վրա, և նրա ափերին կան հին վանքեր, գյուղեր ու լողափեր, որոնք ամռանը " +
  "այցելում են հազարավոր մարդիկ ամբողջ երկրից և արտասահմանից։"
const GREEK =
  "Η Αθήνα είναι η πρωτεύουσα και η μεγαλύτερη πόλη της Ελλάδας. Βρίσκεται στην περιοχή της Αττικής και είναι " +
  "μία από τις αρχαιότερες πόλεις του κόσμου, με καταγεγραμμένη ιστορία που εκτείνεται σε περισσότερα από τρεις " +
  "χιλιάδες χρόνια. Σήμερα είναι το οικονομικό, πολιτικό και πολιτιστικό κέντρο της χώρας."
const RUSSIAN =
  "Москва является столицей и крупнейшим городом России. Город расположен на реке Москве в центре " +
  "Восточно-Европейской равнины и известен своей историей, архитектурой и культурой. Сегодня это важнейший " +
  "политический, экономический и научный центр страны, где живут более двенадцати миллионов человек."

describe("lookalike families", () => {
  it("folds a copy rewritten with each family to the words of the original", () => {
    for (const [family, disguise] of Object.entries(FAMILIES)) {
      const copy = disguise(ARTICLE)
      expect(copy, family).not.toBe(ARTICLE)
      expect(normalizeText(copy), family).toBe(normalizeText(ARTICLE))
    }
    // A capital listed for itself keeps its own Latin letter (Greek Η is H though η is no h).
    expect(normalizeText("ΗΝ Ω")).toBe("hn w")
  })

  it("matches a registered text scanned in a copy rewritten with each family, in full", async () => {
    const actor = await make("lookalikes")
    const item = await run(content((s) => s.register(actor, { kind: "text", title: "Harbour report", text: ARTICLE })))
    for (const [family, disguise] of Object.entries(FAMILIES)) {
      const candidate = `Reposted without credit. ${disguise(ARTICLE)} Share if you agree.`
      const { matches } = await run(content((s) => s.scan(actor, { text: candidate }, item.id)))
      expect(
        matches.map((m) => ({ contentId: m.contentId, similarity: m.similarity })),
        family,
      ).toEqual([{ contentId: item.id, similarity: 1 }])
    }
  })

  it("genuine Armenian, Greek and Russian prose matches itself only, never the other texts registered", async () => {
    const actor = await make("prose")
    const texts = { ARTICLE, ARMENIAN, ARMENIAN_OTHER, GREEK, RUSSIAN }
    const ids = new Map<string, string>()
    for (const [title, text] of Object.entries(texts)) {
      // Folding some of its letters leaves each text in its own script: most of its words keep a letter of it
      // (Greek's short words, και as kai, folded whole already before: a quarter of these).
      if (title !== "ARTICLE") {
        const words = normalizeText(text).split(" ")
        expect(words.filter((w) => /^[a-z0-9]+$/.test(w)).length / words.length, title).toBeLessThan(0.3)
      }
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

describe("texts stored under the previous normalisation", () => {
  it("are fingerprinted again by the refold worker, and a copy folded the new way then finds them", async () => {
    const actor = await make("upgrade")
    const sql = (f: (sql: SqlClient.SqlClient) => Effect.Effect<unknown, unknown, never>) =>
      run(SqlClient.SqlClient.use(f) as Effect.Effect<unknown, never, R>)
    // Registered in small capitals before the upgrade, stored as the code of the time stored it: the words,
    // fingerprints (window 4) and MinHash of version 1, which keeps small capitals as they are.
    const styled = FAMILIES["small capitals"]!(ARTICLE)
    const id = newId("cnt")
    const words = tokenizeV1(styled).map((t) => t.word)
    expect(words[0]).toBe("ᴛʜᴇ")
    const rows = fingerprintsV1(styled, 4)
    await sql(
      (s) => s`INSERT INTO content_items (id, workspace_id, kind, title, media_type, metadata, asset, sha256, words,
          fingerprint_window, fingerprint_fold, minhash, watermarked, created_by, created_at)
        VALUES (${id}, ${actor.workspaceId}, 'text', 'styled', 'text/plain; charset=utf-8', '{}'::jsonb,
          ${Buffer.from(styled).toString("base64")}, '', ${words.length}, 4, 1,
          ${JSON.stringify(minHashOf(shingleHashes(words)))}::jsonb, false, 'test', now())`,
    )
    for (const f of rows)
      await sql(
        (s) => s`INSERT INTO content_text_fingerprints (workspace_id, hash, content_id, pos)
          VALUES (${actor.workspaceId}, ${f.hash}, ${id}, ${f.pos})`,
      )
    // The plain text is a copy of it: its rows, of version 1, are not found.
    expect((await run(content((s) => s.scan(actor, { text: ARTICLE })))).matches).toEqual([])

    // The refold worker's job (run by every instance in the background since the fifth pass, refold.test.ts).
    await run(content((s) => s.refold))
    const [row] = (await sql(
      (s) => s`SELECT fingerprint_fold, fingerprint_window, words FROM content_items WHERE id = ${id}`,
    )) as Array<{ fingerprint_fold: number; fingerprint_window: number; words: number }>
    expect(row).toEqual({ fingerprint_fold: FOLD_VERSION, fingerprint_window: 8, words: words.length })
    const item = await run(content((s) => s.get(actor, id)))
    expect(item.fingerprint).toMatchObject({
      algorithm: "winnow-5w8-minhash64",
      fingerprints: fingerprintText(styled).fingerprints.length,
    })
    const { matches } = await run(content((s) => s.scan(actor, { text: ARTICLE })))
    expect(matches.map((m) => [m.contentId, m.similarity])).toEqual([[id, 1]])
    // A text stored under the current version is left as it is.
    const mine = await run(content((s) => s.register(actor, { kind: "text", title: "current", text: ARMENIAN })))
    expect(await sql((s) => s`SELECT fingerprint_fold FROM content_items WHERE id = ${mine.id}`)).toEqual([
      { fingerprint_fold: FOLD_VERSION },
    ])
  })
})
