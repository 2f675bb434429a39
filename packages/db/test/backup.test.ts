import { spawnSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import { existsSync, lstatSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { gunzipSync, gzipSync } from "node:zlib"
import { BackupError, backupTo, migrate, PostgresClient, restoreFrom } from "@agentgov/db"
import { type EmptyDatabase, makeEmptyDatabase, makeTestStore, pgConnect, type TestStore } from "@agentgov/testing"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

/**
 * What `restoreFrom` accepts from a file (issue 34's outside review). The restore runs as the
 * cluster's superuser with triggers off, so the file decides nothing beyond the rows of the tables
 * its own migrations create: a crafted file naming a catalog table, a duplicated or unknown table,
 * or a file cut at a table's end is refused with a BackupError and leaves the target empty. The
 * round trip as an operator runs it (the CLI, a live server, the verifier): apps/server/test/backup.test.ts.
 */

const dir = join(tmpdir(), `agentgov-db-backup-${randomBytes(4).toString("hex")}`)
mkdirSync(dir)
let source: TestStore
let file: string
const dropped: Array<EmptyDatabase> = []

/** A new, empty database on the run's cluster, dropped after the file. */
const emptyDatabase = async () => {
  const db = await makeEmptyDatabase()
  dropped.push(db)
  return db.url
}

const query = async <T>(url: string, f: (sql: ReturnType<typeof pgConnect>) => Promise<T>): Promise<T> => {
  const sql = pgConnect(url)
  try {
    return await f(sql)
  } finally {
    await sql.end()
  }
}
const publicTables = (url: string) =>
  query(url, async (sql) => (await sql`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'`)[0]!.n)

/** The backup's text, split into its header and its table sections (each heading + rows + `\.`). */
const sections = () => {
  const lines = gunzipSync(readFileSync(file)).toString("utf8").split("\n")
  const header = lines[0]!
  const parts: Array<{ table: string; text: string }> = []
  let at = 1
  while (at < lines.length && lines[at] !== "") {
    const end = lines.indexOf("\\.", at)
    parts.push({ table: JSON.parse(lines[at]!).table, text: `${lines.slice(at, end + 1).join("\n")}\n` })
    at = end + 1
  }
  return { header, parts }
}
const write = (name: string, header: string, parts: ReadonlyArray<{ text: string }>) => {
  const out = join(dir, name)
  writeFileSync(out, gzipSync(`${header}\n${parts.map((p) => p.text).join("")}`))
  return out
}
const refusal = (url: string, path: string) =>
  restoreFrom(url, path).then(
    () => undefined,
    (e: unknown) => e,
  )

beforeAll(async () => {
  source = await makeTestStore()
  await query(source.url, async (sql) => {
    await sql`INSERT INTO workspaces (id, name, environment, created_at, updated_at)
      VALUES ('ws_backuptest00000000000001', 'backed up', 'live', now(), now())`
  })
  file = join(dir, "store.backup.gz")
  await backupTo(source.url, file)
}, 60_000)

afterAll(async () => {
  await source?.cleanup()
  for (const db of dropped) await db.cleanup()
  rmSync(dir, { recursive: true, force: true })
})

describe("restoreFrom", { timeout: 60_000 }, () => {
  it("restores the file it is given, every table of its schema", async () => {
    const target = await emptyDatabase()
    const summary = await restoreFrom(target, file)
    expect(summary.tables).toBe(sections().parts.length)
    const names = await query(target, (sql) => sql`SELECT name FROM workspaces`)
    expect(names.map((r) => r.name)).toContain("backed up")
  })

  it("refuses a file naming a catalog table, and leaves the catalog and the target as they were", async () => {
    const target = await emptyDatabase()
    const descriptions = () =>
      query(target, async (sql) => (await sql`SELECT count(*)::int AS n FROM pg_description`)[0]!.n)
    const before = await descriptions()
    expect(before).toBeGreaterThan(0)
    const { header, parts } = sections()
    const crafted = write("catalog.gz", header, [
      ...parts,
      {
        text: `${JSON.stringify({ table: "pg_description", columns: ["objoid", "classoid", "objsubid", "description"] })}\n\\.\n`,
      },
    ])
    const e = await refusal(target, crafted)
    expect(e).toBeInstanceOf(BackupError)
    expect(String((e as Error).message)).toMatch(/names a table its schema does not have: "pg_description"/)
    expect(await descriptions()).toBe(before)
    expect(await publicTables(target)).toBe(0)
  })

  it("refuses the schema's own bookkeeping table and a table named twice", async () => {
    const { header, parts } = sections()
    const bookkeeping = write("migrations.gz", header, [
      { text: `${JSON.stringify({ table: "schema_migrations", columns: ["version"] })}\n9999_evil\n\\.\n` },
      ...parts,
    ])
    const target = await emptyDatabase()
    expect(String(await refusal(target, bookkeeping))).toMatch(/does not have: "schema_migrations"/)
    const twice = write("twice.gz", header, [...parts, parts[0]!])
    expect(String(await refusal(target, twice))).toMatch(/twice/)
    expect(await publicTables(target)).toBe(0)
  })

  it("refuses a file cut at a table's end, naming what is missing, and restores nothing", async () => {
    const { header, parts } = sections()
    const cut = write("cut.gz", header, parts.slice(0, 17))
    const target = await emptyDatabase()
    const e = await refusal(target, cut)
    expect(e).toBeInstanceOf(BackupError)
    expect(String((e as Error).message)).toContain(
      `incomplete: it holds 17 of the ${parts.length} tables of its schema (missing ${parts
        .slice(17)
        .map((p) => p.table)
        .sort()
        .slice(0, 5)
        .join(", ")}, …); nothing was restored`,
    )
    expect(await publicTables(target)).toBe(0)
  })

  it("refuses a file whose gzip stream is cut, or a directory, in words rather than a zlib code", async () => {
    const bytes = readFileSync(file)
    const cut = join(dir, "bytes-cut.gz")
    writeFileSync(cut, bytes.subarray(0, Math.floor(bytes.length * 0.6)))
    const target = await emptyDatabase()
    const e = await refusal(target, cut)
    expect(e).toBeInstanceOf(BackupError)
    expect(String((e as Error).message)).toMatch(/cut short/)
    const folder = await refusal(target, dir)
    expect(folder).toBeInstanceOf(BackupError)
    expect(String((folder as Error).message)).toMatch(/directory/)
    expect(await publicTables(target)).toBe(0)
  })

  it("refuses a row PostgreSQL rejects at a table's end, rather than waiting forever", async () => {
    const { header, parts } = sections()
    // `workspaces` has more columns than this row: PostgreSQL refuses it after the last data was sent, where
    // postgres.js 3.4.9's COPY stream never settles (porsager/postgres#1173).
    const damaged = parts.map((p) =>
      p.table === "workspaces" ? { ...p, text: p.text.replace(/\\\.\n$/, "a\tb\n\\.\n") } : p,
    )
    expect(damaged.find((p) => p.table === "workspaces")!.text).toMatch(/a\tb\n\\\.\n$/)
    const target = await emptyDatabase()
    const e = await Promise.race([
      refusal(target, write("bad-row.gz", header, damaged)),
      new Promise((r) => setTimeout(() => r("still waiting after 20 s"), 20_000)),
    ])
    expect(e).toBeInstanceOf(BackupError)
    expect(String((e as Error).message)).toMatch(/table workspaces does not load/)
    expect(await publicTables(target)).toBe(0)
  })

  it("refuses a header that is not a release's, a missing sequence, a table's columns changed, in one line each", async () => {
    const { header, parts } = sections()
    const h = JSON.parse(header)
    const target = await emptyDatabase()
    const cases: Array<[string, Record<string, unknown>, ReadonlyArray<{ text: string }>, RegExp]> = [
      ["no-migrations", { ...h, migrations: null }, parts, /lists no migrations/],
      ["empty", { ...h, migrations: [], sequences: [] }, [], /it holds no store/],
      ["reordered", { ...h, migrations: [...h.migrations].reverse() }, parts, /not in order, or repeat/],
      ["gap", { ...h, migrations: h.migrations.filter((_: string, i: number) => i !== 3) }, parts, /one is missing/],
      ["bad-sequence", { ...h, sequences: [null] }, parts, /sequences are not well formed/],
      ["no-sequences", { ...h, sequences: [] }, parts, /does not give the sequence/],
      [
        "negative-sequence",
        { ...h, sequences: h.sequences.map((q: object) => ({ ...q, value: "-5" })) },
        parts,
        /the restore failed and changed nothing: setval/,
      ],
      [
        "columns",
        h,
        parts.map((p) =>
          p.table === "workspaces"
            ? { text: p.text.replace(/^\{[^\n]*\}/, JSON.stringify({ table: "workspaces", columns: ["id", "name"] })) }
            : p,
        ),
        /table workspaces has columns id, name; its schema's are id, name, environment/,
      ],
    ]
    for (const [name, given, sections, expected] of cases) {
      const e = await refusal(target, write(`${name}.gz`, JSON.stringify(given), sections))
      expect(e, name).toBeInstanceOf(BackupError)
      expect(String((e as Error).message), name).toMatch(expected)
    }
    expect(await publicTables(target)).toBe(0)
  })

  it("refuses a second restore into the same target at once: one restores, the other finds it not empty", async () => {
    const target = await emptyDatabase()
    const both = await Promise.allSettled([restoreFrom(target, file), restoreFrom(target, file)])
    expect(both.filter((r) => r.status === "fulfilled")).toHaveLength(1)
    const failed = both.find((r) => r.status === "rejected") as PromiseRejectedResult
    expect(failed.reason).toBeInstanceOf(BackupError)
    expect(String(failed.reason.message)).toMatch(/not empty/)
  })

  it("refuses a sequence its schema does not have, and a target that holds any table", async () => {
    const { header, parts } = sections()
    const h = JSON.parse(header)
    h.sequences = [...h.sequences, { name: "pg_evil", value: "1", called: true }]
    const target = await emptyDatabase()
    expect(String(await refusal(target, write("sequence.gz", JSON.stringify(h), parts)))).toMatch(
      /sequence its schema does not have: "pg_evil"/,
    )
    await query(target, (sql) => sql`CREATE TABLE agents (id text)`)
    expect(String(await refusal(target, file))).toMatch(/not empty \(1 tables in schema public\)/)
  })
})

/**
 * A store kept in a schema of its own: the user-private schema PostgreSQL's documentation advises
 * (`CREATE SCHEMA alice AUTHORIZATION alice`, found first by the default search path `"$user", public`),
 * here named first by the URL's search_path. The server names no schema, so its tables live there; a
 * backup used to refuse such a store as holding none, and a restore put it in public.
 */
describe("a store in a schema of its own", { timeout: 60_000 }, () => {
  const inSchema = async (schema: string) => {
    const db = await emptyDatabase()
    await query(db, (sql) => sql.unsafe(`CREATE SCHEMA ${schema}`))
    const url = new URL(db)
    url.searchParams.set("search_path", `${schema},public`)
    return url.toString()
  }
  const tablesIn = (url: string, schema: string) =>
    query(url, async (sql) => (await sql`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = ${schema}`)[0]!.n)

  it("is refused, with nothing written, when the URL's search path names no schema that exists", async () => {
    const url = new URL(await emptyDatabase())
    url.searchParams.set("search_path", "agentgov_nowhere")
    const out = join(dir, "nowhere.backup.gz")
    for (const attempt of [() => backupTo(url.toString(), out), () => restoreFrom(url.toString(), file)]) {
      const e = await attempt().then(
        () => undefined,
        (error: unknown) => error,
      )
      expect(e).toBeInstanceOf(BackupError)
      expect(String(e)).toContain("the connection's search_path names no schema that exists")
    }
    expect(existsSync(out)).toBe(false)
    expect(existsSync(`${out}.partial`)).toBe(false)
    expect(await tablesIn(url.toString(), "public")).toBe(0)
  })

  it("is backed up from that schema, and restored into the schema the target's search path names", async () => {
    const source = await inSchema("agentgov_own")
    await Effect.runPromise(
      migrate().pipe(Effect.provide(PostgresClient.layer({ url: source, max: 1 })), Effect.scoped),
    )
    await query(source, async (sql) => {
      await sql`INSERT INTO workspaces (id, name, environment, created_at, updated_at)
        VALUES ('ws_ownschema0000000000000001', 'in its own schema', 'live', now(), now())`
    })
    expect(await tablesIn(source, "public")).toBe(0)
    const stored = await tablesIn(source, "agentgov_own")
    expect(stored).toBeGreaterThan(30)

    const out = join(dir, "own-schema.backup.gz")
    const made = await backupTo(source, out)
    expect(made.tables).toBe(stored - 1)

    // Into a plain database: the store's schema there is public.
    const plain = await emptyDatabase()
    expect((await restoreFrom(plain, out)).tables).toBe(made.tables)
    expect(await tablesIn(plain, "public")).toBe(stored)
    const names = await query(plain, (sql) => sql`SELECT name FROM workspaces`)
    expect(names.map((r) => r.name)).toEqual(["in its own schema"])

    // Into another database whose search path names a schema of its own first: there, not in public.
    const other = await inSchema("agentgov_other")
    expect((await restoreFrom(other, out)).tables).toBe(made.tables)
    expect(await tablesIn(other, "public")).toBe(0)
    expect(await tablesIn(other, "agentgov_other")).toBe(stored)
    const there = await query(other, (sql) => sql`SELECT name FROM agentgov_other.workspaces`)
    expect(there.map((r) => r.name)).toEqual(["in its own schema"])
    // A second restore there finds that schema's tables, whatever public holds.
    expect(String(await refusal(other, out))).toMatch(
      new RegExp(`not empty \\(${stored} tables in schema agentgov_other\\)`),
    )
  })
})

/**
 * Where `backupTo` writes (the third pass): the file it is asked for, through a `.partial` beside it that it creates
 * itself (never one that is there already: a planted link, or a second backup writing it at once), and a failure to
 * write (no such directory, a full disk) is a BackupError in one line that leaves no `.partial` behind.
 */
describe("backupTo's file", { timeout: 60_000 }, () => {
  it("refuses a file in a directory that does not exist, in one line, leaving nothing", async () => {
    const out = join(dir, "no-such-dir", "b.gz")
    const e = await backupTo(source.url, out).then(
      () => undefined,
      (x: unknown) => x,
    )
    expect(e).toBeInstanceOf(BackupError)
    expect(String((e as Error).message)).toMatch(/cannot write .*no-such-dir.*: no such directory/)
    expect(existsSync(`${out}.partial`)).toBe(false)
  })

  it("says a store it cannot reach is unreachable, not that the file cannot be written", async () => {
    const out = join(dir, "unreachable.gz")
    const e = await backupTo("postgres://postgres@127.0.0.1:1/postgres", out).then(
      () => undefined,
      (x: unknown) => x,
    )
    expect(String((e as Error).message)).not.toMatch(/cannot write/)
    expect((e as { code?: string }).code).toBe("ECONNREFUSED")
    expect(existsSync(`${out}.partial`)).toBe(false)
  })

  it("does not write through a link planted at its .partial, nor over a file there", async () => {
    const victim = join(dir, "victim.txt")
    writeFileSync(victim, "precious")
    const out = join(dir, "planted.gz")
    symlinkSync(victim, `${out}.partial`)
    const e = await backupTo(source.url, out).then(
      () => undefined,
      (x: unknown) => x,
    )
    expect(e).toBeInstanceOf(BackupError)
    expect(String((e as Error).message)).toMatch(/planted\.gz\.partial exists/)
    expect(readFileSync(victim, "utf8")).toBe("precious")
    expect(existsSync(out)).toBe(false)
    // The leftover is the operator's to look at: it is not removed.
    expect(lstatSync(`${out}.partial`).isSymbolicLink()).toBe(true)
  })

  it("never replaces a file that appeared at its name while it wrote", async () => {
    const out = join(dir, "raced.gz")
    const made = backupTo(source.url, out)
    writeFileSync(out, "someone else's")
    const e = await made.then(
      () => undefined,
      (x: unknown) => x,
    )
    expect(e).toBeInstanceOf(BackupError)
    expect(String((e as Error).message)).toMatch(/raced\.gz exists/)
    expect(readFileSync(out, "utf8")).toBe("someone else's")
    expect(existsSync(`${out}.partial`)).toBe(false)
  })

  // A full disk: a tmpfs of one page (root only, where mounting is allowed).
  const tiny = join(dir, "tiny")
  const mounted = (() => {
    if (process.platform !== "linux" || process.getuid?.() !== 0) return false
    mkdirSync(tiny, { recursive: true })
    return spawnSync("mount", ["-t", "tmpfs", "-o", "size=4k", "tmpfs", tiny]).status === 0
  })()
  afterAll(() => {
    if (mounted) spawnSync("umount", [tiny])
  })
  it.skipIf(!mounted)("refuses a full disk in one line, leaving no .partial", async () => {
    // One byte takes the tmpfs's only page: the backup's first write finds the disk full.
    writeFileSync(join(tiny, "filler"), "x")
    const out = join(tiny, "full.gz")
    const e = await backupTo(source.url, out).then(
      () => undefined,
      (x: unknown) => x,
    )
    expect(e).toBeInstanceOf(BackupError)
    expect(String((e as Error).message)).toMatch(/cannot write .*full\.gz: the disk is full/)
    expect(existsSync(`${out}.partial`)).toBe(false)
    expect(existsSync(out)).toBe(false)
  })
})
