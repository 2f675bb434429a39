import { makeTestStore, type TestStore } from "@agentgov/testing"
import { Context, Effect, Exit, Layer, ManagedRuntime, Scope } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest"
import {
  FOLD_VERSION,
  fingerprintText,
  minHashOf,
  shingleHashes,
  tokenizeLegacy,
} from "../../src/content/textFingerprint.ts"
import {
  type Actor,
  Authenticator,
  C2paSigner,
  ContentService,
  ContentSettings,
  DomainLayer,
  WorkspaceService,
} from "../../src/index.ts"
import { newId } from "../../src/shared/ids.ts"
import { holdInTransaction, type R, testSettings } from "../runtime.ts"
import { fingerprintsV2, tokenizeV2 } from "./foldV2.ts"

/**
 * Texts fingerprinted under an older fold are fingerprinted again in the background (review "content", fifth
 * pass), not while the service starts: the start had waited for every one (20,000 Chinese texts held a start for
 * minutes). Until its turn, a text is looked up by its old rows, with the candidate cut as they were.
 */

let store: TestStore
let rt: ManagedRuntime.ManagedRuntime<R, never>
const run = <A, E>(effect: Effect.Effect<A, E, R>): Promise<A> => rt.runPromise(effect)
const content = <A, E>(f: (s: ContentService["Service"]) => Effect.Effect<A, E, R>) => ContentService.use(f)
const sql = <A>(f: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown, never>) =>
  run(SqlClient.SqlClient.use(f) as Effect.Effect<A, never, R>)

beforeAll(async () => {
  store = await makeTestStore()
  // This runtime's content service starts no worker: what a scan answers before the refold is seen, and the refold
  // is run by the test (`refold`) or by the instances it starts.
  const domain = DomainLayer.pipe(
    Layer.provide(Layer.succeed(ContentSettings, { ...ContentSettings.defaultValue(), refoldWorker: false })),
    Layer.provideMerge(Layer.merge(store.layer, testSettings)),
  )
  rt = ManagedRuntime.make(domain)
  await rt.runPromise(Effect.void)
}, 60_000)
afterAll(async () => {
  await rt?.dispose()
  await store?.cleanup()
})

const make = async (name: string): Promise<Actor> => {
  const { apiKey } = await run(WorkspaceService.use((s) => s.create(null, { name, environment: "live" })))
  return run(Authenticator.use((a) => a.authenticate(apiKey.apiKey)))
}

const ZH =
  "长江是亚洲第一长河，也是世界第三长河，全长约六千三百公里。它发源于青藏高原的唐古拉山脉，自西向东流经青海、西藏、" +
  "四川、云南、重庆、湖北、湖南、江西、安徽、江苏和上海等十一个省级行政区，最后注入东海。长江流域面积约一百八十万平方" +
  "公里，约占中国陆地总面积的五分之一。流域内气候温和，雨量充沛，土地肥沃，自古以来就是中国经济最发达的地区之一。长江" +
  "中下游平原河网密布，湖泊众多，被誉为鱼米之乡。三峡工程是世界上规模最大的水电站，它在防洪、发电和航运等方面发挥着" +
  "重要作用。近年来，国家实施长江经济带发展战略，坚持生态优先、绿色发展，推动沿江城市协调发展。"
/** The text with one character changed: every clause but one the same. */
const EDITED = ZH.replace("雨量充沛", "雨水充沛")

/** A text as the code of fold version 2 stored it: its words, rows (window 8) and MinHash. */
const storeV2 = async (workspaceId: string, text: string, title = "v2") => {
  const id = newId("cnt")
  const words = tokenizeV2(text).map((t) => t.word)
  await sql(
    (s) => s`INSERT INTO content_items (id, workspace_id, kind, title, media_type, metadata, asset, sha256, words,
        fingerprint_window, fingerprint_fold, minhash, watermarked, created_by, created_at)
      VALUES (${id}, ${workspaceId}, 'text', ${title}, 'text/plain; charset=utf-8', '{}'::jsonb,
        ${Buffer.from(text).toString("base64")}, '', ${words.length}, 8, 2,
        ${JSON.stringify(minHashOf(shingleHashes(words)))}::jsonb, false, 'test', now())`,
  )
  const rows = fingerprintsV2(text)
  await sql(
    (s) => s`INSERT INTO content_text_fingerprints (workspace_id, hash, content_id, pos)
      SELECT ${workspaceId}, x.hash, ${id}, x.pos
      FROM jsonb_to_recordset(${JSON.stringify(rows)}::text::jsonb) AS x(hash bigint, pos integer)`,
  )
  return id
}

const foldOf = async (ids: ReadonlyArray<string>) =>
  (
    await sql(
      (s) => s<{ id: string; fingerprint_fold: number }>`SELECT id, fingerprint_fold FROM content_items
      WHERE id = ANY(${ids as Array<string>})`,
    )
  ).map((r) => r.fingerprint_fold)

const rowsOf = async (id: string) =>
  Number(
    (
      await sql(
        (s) => s<{ n: number }>`SELECT count(*)::int AS n FROM content_text_fingerprints WHERE content_id = ${id}`,
      )
    )[0]!.n,
  )

describe("texts of an older fold", () => {
  it("are looked up cut as version 2 cut them (tokenizeLegacy), every code point alike", () => {
    for (let cp = 0x80; cp <= 0x10ffff; cp++) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue
      const text = `a${String.fromCodePoint(cp)}b c`
      const legacy = tokenizeLegacy(text)
      const v2 = tokenizeV2(text)
      if (legacy.length !== v2.length || legacy.some((t, i) => t.word !== v2[i]!.word || t.end !== v2[i]!.end))
        expect(legacy, cp.toString(16)).toEqual(v2)
    }
    for (const text of [
      ZH,
      EDITED,
      "iPhone15发布了。富士山は、コンピューター！ ｱｲｳ ㍿ 〇々 한국어 Ünïcode",
      "plain ASCII, Text.",
    ])
      expect(tokenizeLegacy(text)).toEqual(tokenizeV2(text))
  }, 180_000)

  it("are found by their old rows until fingerprinted again, then as any text", async () => {
    const actor = await make("pending")
    const id = await storeV2(actor.workspaceId, ZH)
    // The service started without waiting for it: still at 2.
    expect(await foldOf([id])).toEqual([2])

    // A copy (quoted within other text) is found by the rows of version 2, the candidate cut as they were: a clause
    // a word. Before, a text not yet fingerprinted again was found by nothing (its rows were of the other cut).
    const quoted = `转载自某网站：${ZH}（完）`
    for (const only of [undefined, id]) {
      const { matches } = await run(content((s) => s.scan(actor, { text: quoted }, only)))
      expect(
        matches.map((m) => [m.contentId, m.method, m.similarity]),
        String(only),
      ).toEqual([[id, "text-winnowing", 1]])
      for (const span of matches[0]!.spans!)
        expect(quoted.slice(span.candidate.start, span.candidate.end)).toBe(
          ZH.slice(span.registered.start, span.registered.end),
        )
    }
    // The copy edited in one clause is found as version 2 found it: the runs of 12 clauses or more either side of the
    // change, not the clauses around it.
    const before = (await run(content((s) => s.scan(actor, { text: EDITED })))).matches
    expect(before.map((m) => [m.contentId, m.spans!.length])).toEqual([[id, 2]])
    expect(before[0]!.similarity).toBeLessThan(1)
    // A text registered now is found beside it, by the current cut.
    const mine = await run(content((s) => s.register(actor, { kind: "text", title: "now", text: EDITED })))
    expect((await run(content((s) => s.scan(actor, { text: quoted })))).matches.map((m) => m.contentId).sort()).toEqual(
      [id, mine.id].sort(),
    )

    // Fingerprinted again: the current cut's rows, words and MinHash; the edited copy is now found.
    expect(await run(content((s) => s.refold))).toBe(1)
    expect(await foldOf([id])).toEqual([FOLD_VERSION])
    expect(await rowsOf(id)).toBe(fingerprintText(ZH).fingerprints.length)
    const { matches } = await run(content((s) => s.scan(actor, { text: EDITED }, id)))
    expect(matches.map((m) => [m.contentId, m.method])).toEqual([[id, "text-winnowing"]])
    expect(matches[0]!.similarity).toBeGreaterThan(0.9)
    expect(matches[0]!.similarity).toBeGreaterThan(before[0]!.similarity)
    expect((await run(content((s) => s.scan(actor, { text: quoted }, id)))).matches).toHaveLength(1)
    // Nothing is left: a second run does nothing.
    expect(await run(content((s) => s.refold))).toBe(0)
  })

  it("sets aside a text that cannot be fingerprinted again, and fingerprints the others", async () => {
    const actor = await make("poison")
    const texts = Array.from({ length: 5 }, (_, i) => `第${i}段。${ZH}`)
    const ids: Array<string> = []
    for (const text of texts) ids.push(await storeV2(actor.workspaceId, text))
    const poison = ids[2]!
    const oldRows = await rowsOf(poison)
    // The store refuses this one text's new rows, as it would a text some constraint or defect trips on.
    await sql((s) =>
      s.unsafe(`CREATE FUNCTION refold_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
          IF NEW.content_id = '${poison}' THEN RAISE EXCEPTION 'refused for the test'; END IF; RETURN NEW; END $$`),
    )
    await sql((s) =>
      s.unsafe(`CREATE TRIGGER refold_test_refuse BEFORE INSERT ON content_text_fingerprints
          FOR EACH ROW EXECUTE FUNCTION refold_test_refuse()`),
    )
    try {
      // The batch holding it fails; its texts are then taken one at a time, and it alone is set aside.
      expect(await run(content((s) => s.refold))).toBe(4)
      const folds = new Map(
        (
          await sql(
            (s) => s<{ id: string; fingerprint_fold: number }>`SELECT id, fingerprint_fold FROM content_items
              WHERE id = ANY(${ids})`,
          )
        ).map((r) => [r.id, r.fingerprint_fold]),
      )
      for (const id of ids) expect(folds.get(id), id).toBe(id === poison ? 2 : FOLD_VERSION)
      // It keeps its old rows; the others have the current cut's.
      expect(await rowsOf(poison)).toBe(oldRows)
      for (const [i, id] of ids.entries())
        if (id !== poison) expect(await rowsOf(id), id).toBe(fingerprintText(texts[i]!).fingerprints.length)
      // A second run does not stop on it either.
      expect(await run(content((s) => s.refold))).toBe(0)
    } finally {
      await sql((s) => s.unsafe("DROP TRIGGER refold_test_refuse ON content_text_fingerprints"))
      await sql((s) => s.unsafe("DROP FUNCTION refold_test_refuse()"))
    }
  })

  it("takes texts failing one after another for the store's failure: it sets no more than three aside", async () => {
    const actor = await make("refusing")
    const ids: Array<string> = []
    for (let i = 0; i < 6; i++) ids.push(await storeV2(actor.workspaceId, `第${i}节。${ZH}`))
    // The store refuses every text's new rows (as a full disk would): not one text's fault.
    await sql((s) =>
      s.unsafe(`CREATE FUNCTION refold_test_refuse_all() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
          RAISE EXCEPTION 'refused for the test'; END $$`),
    )
    await sql((s) =>
      s.unsafe(`CREATE TRIGGER refold_test_refuse_all BEFORE INSERT ON content_text_fingerprints
          FOR EACH ROW EXECUTE FUNCTION refold_test_refuse_all()`),
    )
    try {
      // Three set aside, the fourth failure the caller's (the worker pauses and tries again).
      await expect(run(content((s) => s.refold))).rejects.toThrow()
    } finally {
      await sql((s) => s.unsafe("DROP TRIGGER refold_test_refuse_all ON content_text_fingerprints"))
      await sql((s) => s.unsafe("DROP FUNCTION refold_test_refuse_all()"))
    }
    // The store writes again: the three texts set aside wait for their retry, the other three are written now.
    expect(await run(content((s) => s.refold))).toBe(3)
    expect((await foldOf(ids)).filter((f) => f === FOLD_VERSION)).toHaveLength(3)
  })

  it("are all fingerprinted again by the workers of instances started together, each once", async () => {
    const actor = await make("workers")
    const texts = Array.from({ length: 3 * 16 + 5 }, (_, i) => `第${i}篇。${ZH}`)
    const ids: Array<string> = []
    for (const text of texts) ids.push(await storeV2(actor.workspaceId, text))
    expect(new Set(await foldOf(ids))).toEqual(new Set([2]))

    // Two instances start (their content services, with the worker): both are built without waiting for it.
    const instance = ContentService.layer.pipe(
      Layer.provide(Layer.fresh(C2paSigner.layer)),
      Layer.provide(Layer.succeed(ContentSettings, ContentSettings.defaultValue())),
      Layer.fresh,
    )
    const scopes = [await run(Scope.make()), await run(Scope.make())]
    try {
      const services = await Promise.all(
        scopes.map((scope) =>
          run(
            Layer.buildWithScope(instance, scope).pipe(
              Effect.map((ctx) => Context.get(ctx, ContentService)),
            ) as unknown as Effect.Effect<ContentService["Service"], never, R>,
          ),
        ),
      )
      await vi.waitFor(async () => expect(new Set(await foldOf(ids))).toEqual(new Set([FOLD_VERSION])), {
        timeout: 120_000,
        interval: 200,
      })
      // Each text once: its rows are exactly the current cut's, none twice.
      for (const [i, id] of ids.entries())
        expect(await rowsOf(id), id).toBe(fingerprintText(texts[i]!).fingerprints.length)
      // The instances' scans find the edited copies by the new rows.
      const { matches } = await run(services[1]!.scan(actor, { text: `第7篇。${EDITED}` }))
      expect(matches[0]?.contentId).toBe(ids[7])
      expect(matches[0]!.similarity).toBeGreaterThan(0.9)
    } finally {
      for (const scope of scopes) await run(Scope.close(scope, Exit.void))
    }
  }, 180_000)
})

// Last: its refold runs to the end, after which this runtime looks texts up by the current cut alone.
describe("the refold's row locks", () => {
  it("are held by the refold so that a match or a takedown recorded meanwhile is not kept waiting", async () => {
    const actor = await make("fk")
    const id = await storeV2(actor.workspaceId, ZH)
    // Another transaction holds the text's fingerprint rows: the refold's batch waits at its DELETE of them, holding
    // its lock on the item's row for as long (as a batch of long texts does while it fingerprints them).
    const blocker = holdInTransaction(
      (effect) => rt.runPromise(effect),
      (s) => s`SELECT 1 FROM content_text_fingerprints WHERE content_id = ${id} FOR UPDATE`,
    )
    await blocker.held
    const refolded = run(content((s) => s.refold))
    refolded.catch(() => {}) // awaited below: a lock time-out while the test waits must fail the test, not the run
    await vi.waitFor(
      async () => {
        const [w] = await sql(
          (s) => s<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE wait_event_type = 'Lock' AND query LIKE 'DELETE FROM content_text_fingerprints%'`,
        )
        expect(w!.n).toBe(1)
      },
      { timeout: 20_000, interval: 50 },
    )
    // What the foreign-key check of a new content_matches or content_takedowns row takes on its item. With the
    // batch's rows held FOR UPDATE it waited for the whole batch (here: past this lock time-out).
    const checked = await rt.runPromiseExit(
      SqlClient.SqlClient.use((s) =>
        s.withTransaction(
          Effect.gen(function* () {
            yield* s`SET LOCAL lock_timeout = '1s'`
            return yield* s<{ ok: number }>`SELECT 1 AS ok FROM content_items WHERE id = ${id} FOR KEY SHARE`
          }),
        ),
      ) as Effect.Effect<ReadonlyArray<{ ok: number }>, unknown, R>,
    )
    await blocker.release()
    expect(await refolded).toBeGreaterThanOrEqual(1)
    expect(Exit.isSuccess(checked) ? checked.value : checked.cause.toString()).toEqual([{ ok: 1 }])
    expect(await foldOf([id])).toEqual([FOLD_VERSION])
  }, 60_000)
})
