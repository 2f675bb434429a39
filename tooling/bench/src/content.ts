import { availableParallelism } from "node:os"
import {
  candidateFingerprints,
  fingerprintText,
  hashImage,
  IMAGE_RADIUS,
  type ImageQuery,
  lookupImage,
  TEXT_FINGERPRINT_WINDOW,
  TEXT_LOOKUP_SQL,
} from "@agentgov/domain"
import { Effect } from "effect"
import type postgres from "postgres"
import sharp from "sharp"
import { type BenchmarkResult, benchmark, cpuLine, cpuPer, measure, round, summarise, target } from "./report.ts"
import { type BenchServer, jsonClient } from "./server.ts"

/**
 * Content protection (issue 31): image scan against 1,000,000 registered hashes, text scan of a 10,000-word
 * candidate against 100,000 registered documents, and registering a 2 MP JPEG with watermark and C2PA.
 *
 * The bulk is seeded in SQL, in the very shape ContentService.register stores (registering a million images
 * through the API would take hours): a `content_items` row per item (kind, media type, sha256, sizes, the
 * hex pHash/dHash of the image and of its mirror; text: word count and MinHash; a placeholder asset) and
 * its index rows: for an image its pHash and its mirror's, each with its four 16-bit blocks
 * (`content_image_hashes`, as IMAGE_INDEX_INSERT_SQL cuts them), for a text its winnowed fingerprints with their word
 * positions (`content_text_fingerprints`). Seeded hashes are uniform random, as unrelated images' and texts'
 * are to each other. The items the queries look for are registered through the API, and every query goes
 * through the real routes.
 */

const IMAGES = 1_000_000
const IMAGE_PROBES = 20
const IMAGE_ROUNDS = 5
/**
 * Lookups timed per route scan: 500 in all, so that p99 is the 5th slowest, not the 2nd slowest of 100 (this
 * machine's loopback round trip alone has a p99 under 1 ms and a maximum of 10-20 ms in 3,000).
 */
const LOOKUPS_PER_SCAN = 5
const LINEAR_PROBES = 5
const TEXTS = 100_000
const TEXT_WORDS = 150
const TEXT_SOURCES = 10
const CANDIDATE_WORDS = 10_000
const TEXT_QUERIES = 40
const REGISTERS = 8

const expectStatus = (res: { status: number; body: any }, status: number, what: string) => {
  if (res.status !== status) throw new Error(`${what}: ${res.status} ${JSON.stringify(res.body).slice(0, 500)}`)
  return res.body.data
}

/** A workspace of its own, and a client with its key. */
const workspace = async (server: BenchServer, name: string) => {
  const ws = expectStatus(
    await server.call("POST", "/api/v1/workspaces", {
      name: `${name}-${Date.now()}`,
      environment: "test",
      plan: "enterprise",
    }),
    201,
    `creating workspace ${name}`,
  )
  return { id: ws.workspace.id as string, api: jsonClient(server.url, ws.apiKey.apiKey as string, 4) }
}

const rng = (seed: number) => {
  let s = seed >>> 0
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    return s / 2 ** 32
  }
}

/** A generated photo-like scene: a gradient, shapes and noise, as a JPEG. */
const scene = async (seed: number, width: number, height: number, quality = 90) => {
  const r = rng(seed)
  const colour = () => `rgb(${Math.floor(r() * 255)},${Math.floor(r() * 255)},${Math.floor(r() * 255)})`
  const shapes = Array.from({ length: 25 }, () =>
    r() > 0.5
      ? `<circle cx="${r() * width}" cy="${r() * height}" r="${(10 + r() * 120) * (width / 640)}" fill="${colour()}" fill-opacity="${0.4 + r() * 0.6}"/>`
      : `<rect x="${r() * width}" y="${r() * height}" width="${(20 + r() * 200) * (width / 640)}" height="${(20 + r() * 200) * (width / 640)}" fill="${colour()}" transform="rotate(${r() * 90} ${width / 2} ${height / 2})"/>`,
  ).join("")
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}"><defs><linearGradient id="g" x1="0" y1="0" x2="1" y2="1"><stop offset="0" stop-color="${colour()}"/><stop offset="1" stop-color="${colour()}"/></linearGradient></defs><rect width="100%" height="100%" fill="url(#g)"/>${shapes}</svg>`
  // Texture: seeded noise around mid-grey, as a photo's grain (a flat drawing compresses unlike a photo).
  const grain = Buffer.alloc(width * height * 3)
  for (let i = 0; i < grain.length; i++) grain[i] = 128 + Math.round((r() + r() + r() - 1.5) * 40)
  const noise = await sharp(grain, { raw: { width, height, channels: 3 } })
    .png()
    .toBuffer()
  return sharp(Buffer.from(svg))
    .composite([{ input: noise, blend: "soft-light" }])
    .jpeg({ quality })
    .toBuffer()
}

/**
 * The seeding transaction skips the foreign-key triggers (superuser, as the bench's connection is): its rows
 * reference the items it inserts first, and checking that 8,000,000 times would be most of the seeding.
 */
const replicaRole = "SET LOCAL session_replication_role = replica"

/**
 * Runs `seed` with `table`'s indexes dropped, then builds them again from their own definitions (read from
 * pg_indexes, so they are the migrations' exactly): one sorted build instead of millions of random inserts.
 */
const withIndexesRebuilt = async (sql: postgres.Sql, table: string, seed: () => Promise<void>) => {
  const indexes = await sql<Array<{ indexname: string; indexdef: string }>>`SELECT indexname, indexdef
      FROM pg_indexes WHERE schemaname = current_schema() AND tablename = ${table}`
  for (const i of indexes) await sql.unsafe(`DROP INDEX ${i.indexname}`)
  try {
    await seed()
  } finally {
    for (const i of indexes) await sql.unsafe(i.indexdef)
  }
}

/** 64 random bits as 16 hex digits, in SQL. */
const RANDOM_HEX = `lpad(to_hex((random() * 4294967295)::bigint), 8, '0') || lpad(to_hex((random() * 4294967295)::bigint), 8, '0')`

/** Seeds `count` images in `workspaceId` as ContentService.register stores them (see the top of this file). */
const seedImages = async (db: postgres.Sql, workspaceId: string, count: number) => {
  await withIndexesRebuilt(db, "content_image_hashes", async () => {
    await db.begin(async (sql) => {
      await sql.unsafe(replicaRole)
      await sql.unsafe(
        `INSERT INTO content_items (id, workspace_id, kind, title, media_type, metadata, asset, sha256, width, height,
        phash, dhash, mirror_phash, mirror_dhash, watermarked, watermark_psnr, c2pa, agent_id, created_by, created_at)
      SELECT 'cnt_1' || lpad(g::text, 25, '0'), $1, 'image', 'seeded ' || g, 'image/jpeg', '{}', '',
        md5(g::text) || md5(g::text), 640, 480, ${RANDOM_HEX}, ${RANDOM_HEX}, ${RANDOM_HEX}, ${RANDOM_HEX},
        false, NULL, NULL, NULL, 'bench', now()
      FROM generate_series(1, $2::int) g`,
        [workspaceId, count],
      )
      // As IMAGE_INDEX_INSERT_SQL stores them (`seq` and `xid` from their defaults).
      await sql.unsafe(
        `INSERT INTO content_image_hashes (content_id, mirror, hash, tag)
      SELECT c.id, h.mirror, h.hash, hashtext(c.workspace_id)
      FROM content_items c
        CROSS JOIN LATERAL (VALUES (('x' || c.phash)::bit(64)::bigint, false), (('x' || c.mirror_phash)::bit(64)::bigint, true))
          AS h(hash, mirror)
      WHERE c.workspace_id = $1 AND c.created_by = 'bench'`,
        [workspaceId],
      )
    })
  })
  await db`VACUUM (ANALYZE) content_items`
  await db`VACUUM (ANALYZE) content_image_hashes`
}

/**
 * EXPLAIN (ANALYZE, BUFFERS) of a statement: its execution time and the shared buffers it touched, what the
 * database did for it whatever else the machine was doing.
 */
const explain = async (sql: postgres.Sql, statement: string, params: ReadonlyArray<unknown>) => {
  const rows = await sql.unsafe(`EXPLAIN (ANALYZE, BUFFERS) ${statement}`, params as Array<never>)
  const plan = rows.map((r) => r["QUERY PLAN"] as string).join("\n")
  const buffers = /Buffers: shared(?: hit=(\d+))?(?: read=(\d+))?/.exec(plan)
  return {
    executionMs: Number(/Execution Time: ([\d.]+) ms/.exec(plan)?.[1] ?? Number.NaN),
    buffers: Number(buffers?.[1] ?? 0) + Number(buffers?.[2] ?? 0),
  }
}

/** Median of each field of the plans of `statement` with each of `params`, explained one after another. */
const medianPlan = async (sql: postgres.Sql, statement: string, params: ReadonlyArray<ReadonlyArray<unknown>>) => {
  const plans: Array<{ executionMs: number; buffers: number }> = []
  for (const p of params) plans.push(await explain(sql, statement, p))
  return {
    executionMs: summarise(plans.map((p) => p.executionMs)).p50,
    buffers: summarise(plans.map((p) => p.buffers)).p50,
  }
}

const timed = async <A>(f: () => Promise<A>) => {
  const start = performance.now()
  const value = await f()
  return { ms: performance.now() - start, value }
}

export const runContentImageScanBenchmark = async (
  server: BenchServer,
  sql: postgres.Sql,
  log: (line: string) => void,
): Promise<BenchmarkResult> => {
  const { id: workspaceId, api } = await workspace(server, "bench-content-image")
  const seeding = await timed(() => seedImages(sql, workspaceId, IMAGES))
  log(`content-image-scan: ${IMAGES} images seeded in ${round(seeding.ms / 1000)} s`)

  // The probes: images registered through the API, each looked for by a smaller, recompressed copy.
  const probes: Array<{ id: string; copy: string; phash: string }> = []
  for (let i = 0; i < IMAGE_PROBES; i++) {
    const original = await scene(9_000 + i, 640, 480)
    const item = expectStatus(
      await api.call("POST", "/api/v1/content", {
        kind: "image",
        title: `probe ${i}`,
        data: original.toString("base64"),
      }),
      201,
      "registering a probe image",
    )
    const copy = await sharp(original).resize(320).jpeg({ quality: 70 }).toBuffer()
    probes.push({ id: item.id, copy: copy.toString("base64"), phash: (await hashImage(copy)).phash })
  }

  // The lookup the scan runs (lookupImage: the copy of the workspace's index brought up to the table, probed, and
  // what it found read back), here in this process with its own copy, on the same database. Its statements and
  // their parameters are kept to explain them afterwards.
  const ran = new Map<string, Array<ReadonlyArray<unknown>>>()
  const query: ImageQuery = (statement, params) =>
    Effect.promise(async () => {
      // Kept in place: the array is not copied inside a timed lookup.
      const kept = ran.get(statement)
      if (kept === undefined) ran.set(statement, [params])
      else kept.push(params)
      // Prepared, as the service's SqlClient runs it.
      return sql.unsafe(statement, params as Array<never>, { prepare: true })
    })
  const lookupOnce = (phash: string) => Effect.runPromise(lookupImage(query, workspaceId, phash))
  // The first lookup of a workspace in a process reads all its hashes into the copy: timed apart, as is the
  // first scan through the route (the server's copy).
  const coldLookup = await timed(() => lookupOnce(probes[0]!.phash))
  const coldRoute = await timed(() => api.call("POST", "/api/v1/content/scan", { data: probes[0]!.copy }))
  expectStatus(coldRoute.value, 200, "scanning an image")
  log(
    `  content-image-scan: first lookup in a process (copy read: ${IMAGES * 2 + IMAGE_PROBES * 2} hashes) ${round(coldLookup.ms)} ms; first scan through the route ${round(coldRoute.ms)} ms`,
  )
  ran.clear()
  const route: Array<number> = []
  const lookup: Array<number> = []
  let found = 0
  let lookupFound = 0
  for (let round = 0; round < IMAGE_ROUNDS; round++)
    for (const [j, p] of probes.entries()) {
      const res = await timed(() => api.call("POST", "/api/v1/content/scan", { data: p.copy }))
      const data = expectStatus(res.value, 200, "scanning an image")
      if (data.matches[0]?.contentId === p.id) found++
      route.push(res.ms)
      // Each a different probe (this scan's, then the next ones'), never the same twice in a row.
      for (let i = 0; i < LOOKUPS_PER_SCAN; i++) {
        const q = probes[(j + i) % probes.length]!
        const hits = await timed(() => lookupOnce(q.phash))
        if (hits.value.some((h) => h.contentId === q.id && h.distance <= IMAGE_RADIUS)) lookupFound++
        lookup.push(hits.ms)
      }
    }
  if (lookupFound !== lookup.length) throw new Error(`the lookup found ${lookupFound} of ${lookup.length} probes`)
  // Plan-level evidence for the lookup's statement (IMAGE_LOOKUP_SQL, its one statement once the copy is
  // made), with parameters the timed lookups used.
  const [statement, params] = [...ran.entries()][0]!
  const lookupPlan = await medianPlan(
    sql,
    statement,
    params.filter((_, i) => i % LOOKUPS_PER_SCAN === 0).slice(0, IMAGE_PROBES),
  )
  log(
    `  content-image-scan: EXPLAIN (ANALYZE, BUFFERS) of the lookup's statement: median ${lookupPlan.executionMs} ms, ${lookupPlan.buffers} buffers`,
  )
  const linear: Array<number> = []
  for (const p of probes.slice(0, LINEAR_PROBES)) {
    const res = await timed(() =>
      sql.unsafe(
        `SELECT id, least(bit_count(('x' || phash)::bit(64) # $2::bit(64)),
            bit_count(('x' || mirror_phash)::bit(64) # $2::bit(64))) AS distance
          FROM content_items
          WHERE workspace_id = $1 AND kind = 'image'
            AND least(bit_count(('x' || phash)::bit(64) # $2::bit(64)),
              bit_count(('x' || mirror_phash)::bit(64) # $2::bit(64))) <= ${IMAGE_RADIUS}`,
        [workspaceId, `x${p.phash}`],
      ),
    )
    if (!res.value.some((r) => r.id === p.id)) throw new Error("the linear scan missed a probe")
    linear.push(res.ms)
  }
  // The floor under the lookup's tail: the same client's prepared round trip with no work, as many times.
  const roundTrips: Array<number> = []
  for (let i = 0; i < lookup.length; i++)
    roundTrips.push((await timed(() => sql.unsafe("SELECT $1::int AS i", [i], { prepare: true }))).ms)
  const roundTripMs = summarise(roundTrips)
  const routeMs = summarise(route)
  const lookupMs = summarise(lookup)
  const linearMs = summarise(linear)
  log(
    `content-image-scan: lookup p50 ${lookupMs.p50} / p99 ${lookupMs.p99} ms (an empty round trip: p50 ${roundTripMs.p50} / p99 ${roundTripMs.p99} / max ${roundTripMs.max} ms); route p50 ${routeMs.p50} / p99 ${routeMs.p99} ms; linear scan p50 ${linearMs.p50} ms; ${found}/${route.length} found`,
  )
  return benchmark({
    name: "content-image-scan",
    what: `image scan against ${IMAGES.toLocaleString("en")} registered images (2 hashes each, seeded in SQL in the stored shape) plus ${IMAGE_PROBES} registered through the API, each looked for ${IMAGE_ROUNDS} times by a 320-px JPEG q70 copy through POST /content/scan, and after each scan ${LOOKUPS_PER_SCAN} probes in turn (that scan's and the next ones') by the multi-index lookup the scan runs (lookupImage: the process's copy of the workspace's index probed, then one statement that brings the copy up to the table and reads back the hashes found with their items; run here in the benchmark's process, with its own copy, its statement prepared as the service's), and the route end to end. The first lookup and the first scan of the workspace in a process read every hash into the copy: timed apart (details), not in the rounds`,
    unit: "ms (p99)",
    value: lookupMs.p99,
    baseline: {
      what: `a linear scan in SQL over the same stored hashes (the pHash and the mirror's of every item, Hamming distance by bit_count), ${LINEAR_PROBES} probes; p99, as the value (of ${LINEAR_PROBES}, the slowest)`,
      value: linearMs.p99,
    },
    targets: [
      target("multi-index lookup p99 (ms)", "max", 5, lookupMs.p99),
      target("share of copies found first by the route", "min", 1, found / route.length),
    ],
    details: {
      seededImages: IMAGES,
      seedingSeconds: round(seeding.ms / 1000),
      lookupMs,
      lookupPlan,
      roundTripMs,
      firstLookupMs: round(coldLookup.ms),
      firstRouteScanMs: round(coldRoute.ms),
      routeMs,
      linearScanMs: linearMs,
      speedupOverLinearP50: round(linearMs.p50 / lookupMs.p50),
    },
  })
}

const SYLLABLES = "ka lo mi ne ru sa te vo zu ba di fe go hu ji pa qui ro si tu wa xe yo ze".split(" ")

/** Text of `n` words from a 5,000-word generated vocabulary, with some punctuation. */
const textGenerator = (seed: number) => {
  const r = rng(seed)
  const vocabulary = Array.from({ length: 5000 }, () =>
    Array.from({ length: 2 + Math.floor(r() * 3) }, () => SYLLABLES[Math.floor(r() * SYLLABLES.length)]).join(""),
  )
  return (n: number) =>
    Array.from({ length: n }, (_, i) => {
      const w = vocabulary[Math.floor(r() * vocabulary.length)]!
      return i % 11 === 10 ? `${w}.` : i % 7 === 3 ? `${w},` : w
    })
}

/**
 * Fingerprints of a seeded text: as many as the service keeps of a generated TEXT_WORDS-word text (fingerprintText,
 * what ContentService.register stores; ~2/(w+1) of its shingles), averaged over 50 texts.
 */
const storedFingerprintsPerText = (): number => {
  const words = textGenerator(5)
  let total = 0
  for (let i = 0; i < 50; i++) total += fingerprintText(words(TEXT_WORDS).join(" ")).fingerprints.length
  return Math.round(total / 50)
}

/** Seeds `count` texts of `perText` fingerprints each, in the shape ContentService.register stores them. */
const seedTexts = async (db: postgres.Sql, workspaceId: string, count: number, perText: number) => {
  await withIndexesRebuilt(db, "content_text_fingerprints", async () => {
    await db.begin(async (sql) => {
      await sql.unsafe(replicaRole)
      // MinHash values of a text nobody scans: 64 large values (the scan compares them only for candidates).
      const minhash = JSON.stringify(Array.from({ length: 64 }, (_, i) => 4_294_967_295 - i))
      await sql.unsafe(
        `INSERT INTO content_items (id, workspace_id, kind, title, media_type, metadata, asset, sha256, words,
        fingerprint_window, minhash, watermarked, agent_id, created_by, created_at)
      SELECT 'cnt_2' || lpad(g::text, 25, '0'), $1, 'text', 'seeded ' || g, 'text/plain; charset=utf-8', '{}',
        encode(convert_to('seeded text ' || g, 'UTF8'), 'base64'), md5(g::text) || md5(g::text), ${TEXT_WORDS},
        ${TEXT_FINGERPRINT_WINDOW}, $3::text::jsonb, false, NULL, 'bench', now()
      FROM generate_series(1, $2::int) g`,
        [workspaceId, count, minhash],
      )
      await sql.unsafe(
        `INSERT INTO content_text_fingerprints (workspace_id, hash, content_id, pos)
      SELECT c.workspace_id, (random() * 4294967295)::bigint, c.id, (f * ${TEXT_WORDS / perText})::int
      FROM content_items c CROSS JOIN generate_series(0, ${perText - 1}) AS f
      WHERE c.workspace_id = $1 AND c.created_by = 'bench'`,
        [workspaceId],
      )
    })
  })
  await db`VACUUM (ANALYZE) content_items`
  await db`VACUUM (ANALYZE) content_text_fingerprints`
}

export const runContentTextScanBenchmark = async (
  server: BenchServer,
  sql: postgres.Sql,
  log: (line: string) => void,
): Promise<BenchmarkResult> => {
  const { id: workspaceId, api } = await workspace(server, "bench-content-text")
  const perText = storedFingerprintsPerText()
  const seeding = await timed(() => seedTexts(sql, workspaceId, TEXTS, perText))
  log(`content-text-scan: ${TEXTS} texts seeded in ${round(seeding.ms / 1000)} s`)
  const words = textGenerator(31)
  // The sources: 1,000-word texts registered through the API; each candidate copies a 10% excerpt of each.
  const sources: Array<{ id: string; words: Array<string> }> = []
  for (let i = 0; i < TEXT_SOURCES; i++) {
    const w = words(1_000)
    const item = expectStatus(
      await api.call("POST", "/api/v1/content", { kind: "text", title: `source ${i}`, text: w.join(" ") }),
      201,
      "registering a source text",
    )
    sources.push({ id: item.id, words: w })
  }
  const candidates = Array.from({ length: TEXT_QUERIES }, (_, q) => {
    const excerpts = sources.map((s) => s.words.slice((q * 37) % 900, ((q * 37) % 900) + 100))
    const filler = words(CANDIDATE_WORDS - 100 * TEXT_SOURCES)
    const parts: Array<string> = []
    const gap = filler.length / excerpts.length
    for (const [i, e] of excerpts.entries()) parts.push(...filler.slice(i * gap, (i + 1) * gap), ...e)
    return parts.join(" ")
  })
  // Two unmeasured scans: the first of a route compiles its code.
  for (const text of candidates.slice(0, 2)) await api.call("POST", "/api/v1/content/scan", { text })
  const latencies: Array<number> = []
  let complete = 0
  // CPU time of the server (and of every PostgreSQL process, others' included) over the timed scans: on a
  // shared machine the wall clock says more about the neighbours than about the scan.
  const window = await measure(server, async () => {
    for (const text of candidates) {
      const res = await timed(() => api.call("POST", "/api/v1/content/scan", { text }))
      const data = expectStatus(res.value, 200, "scanning a text")
      const ids = new Set((data.matches as Array<{ contentId: string }>).map((m) => m.contentId))
      if (sources.every((s) => ids.has(s.id))) complete++
      latencies.push(res.ms)
    }
  })
  const cpu = cpuPer(window, candidates.length, availableParallelism())
  const lookupPlan = await medianPlan(
    sql,
    TEXT_LOOKUP_SQL,
    candidates
      .slice(0, 10)
      .map((text) => [workspaceId, [...new Set(candidateFingerprints(text).fingerprints.map((f) => f.hash))], null]),
  )
  const ms = summarise(latencies)
  log(
    `  content-text-scan: the inverted-index lookup, EXPLAIN (ANALYZE, BUFFERS) median ${lookupPlan.executionMs} ms, ${lookupPlan.buffers} buffers`,
  )
  log(
    `content-text-scan: p50 ${ms.p50} / p90 ${ms.p90} / p99 ${ms.p99} ms (slowest ${latencies
      .toSorted((a, b) => b - a)
      .slice(0, 4)
      .map((x) => round(x))
      .join(", ")}); ${complete}/${candidates.length} found every source`,
  )
  log(`  content-text-scan: ${cpuLine(cpu)}`)
  return benchmark({
    name: "content-text-scan",
    what: `POST /content/scan of a ${CANDIDATE_WORDS.toLocaleString("en")}-word candidate (100-word excerpts of ${TEXT_SOURCES} registered 1,000-word texts in unrelated text) against ${TEXTS.toLocaleString("en")} texts seeded in SQL in the stored shape (${perText} fingerprints each) plus the ${TEXT_SOURCES}; ${TEXT_QUERIES} candidates, one at a time`,
    unit: "ms (p99)",
    value: ms.p99,
    targets: [
      target("scan p99 (ms)", "max", 50, ms.p99),
      target("share of candidates in which every source is found", "min", 1, complete / candidates.length),
    ],
    details: {
      seededTexts: TEXTS,
      fingerprintsPerText: perText,
      seedingSeconds: round(seeding.ms / 1000),
      latencyMs: ms,
      cpuPerScan: cpu,
      lookupPlan,
    },
  })
}

export const runContentRegisterBenchmark = async (
  server: BenchServer,
  log: (line: string) => void,
): Promise<BenchmarkResult> => {
  const { api } = await workspace(server, "bench-content-register")
  const images = await Promise.all(
    Array.from({ length: REGISTERS + 2 }, (_, i) => scene(7_000 + i, 1920, 1080).then((b) => b.toString("base64"))),
  )
  const register = (data: string, i: number) =>
    timed(() =>
      api.call("POST", "/api/v1/content", { kind: "image", title: `photo ${i}`, data, watermark: true, c2pa: true }),
    )
  // Two unmeasured: the first signs the service's C2PA certificate into use and compiles the code.
  for (const [i, data] of images.slice(0, 2).entries())
    expectStatus((await register(data, i)).value, 201, "registering")
  const latencies: Array<number> = []
  const psnr: Array<number> = []
  const window = await measure(server, async () => {
    for (const [i, data] of images.slice(2).entries()) {
      const res = await register(data, i + 2)
      const item = expectStatus(res.value, 201, "registering a photo")
      if (!item.watermark.embedded || !item.c2pa.signed) throw new Error("registered without watermark or C2PA")
      latencies.push(res.ms)
      psnr.push(item.watermark.psnr)
    }
  })
  const cpu = cpuPer(window, REGISTERS, availableParallelism())
  const ms = summarise(latencies)
  log(`content-register: p50 ${ms.p50} ms, p99 ${ms.p99} ms; PSNR ${Math.min(...psnr)}–${Math.max(...psnr)} dB`)
  log(`  content-register: ${cpuLine(cpu)}`)
  return benchmark({
    name: "content-register",
    what: `POST /content of a 1920×1080 JPEG (q90, ~${round(Buffer.byteLength(images[2]!, "base64") / 2 ** 20)} MiB) with watermark and C2PA; ${REGISTERS} one after another`,
    unit: "ms (p50)",
    value: ms.p50,
    targets: [target("register p50 (ms)", "max", 500, ms.p50)],
    details: { latencyMs: ms, psnrDb: psnr, cpuPerRegistration: cpu },
  })
}
