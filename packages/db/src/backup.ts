import {
  closeSync,
  createReadStream,
  createWriteStream,
  existsSync,
  fsyncSync,
  linkSync,
  openSync,
  renameSync,
  rmSync,
} from "node:fs"
import { dirname } from "node:path"
import { Readable, Transform, type Writable } from "node:stream"
import { pipeline } from "node:stream/promises"
import { createGunzip, createGzip } from "node:zlib"
import postgres from "postgres"
import { connectionOptions } from "./connectionUrl.ts"
import { loadMigrations, MIGRATION_LOCK } from "./migrate.ts"

/**
 * Logical backups of the store (issue 34), made and read by the service itself: the embedded
 * default ships no pg_dump, and this works the same on any PostgreSQL.
 *
 * A backup is one consistent snapshot: every table is read in a single REPEATABLE READ, READ ONLY
 * transaction, so it can be taken while the service runs (writers are not blocked) and holds a
 * chain and its checkpoints as of one instant. The file is gzip'd text: a header line (JSON: the
 * format, the migrations the schema had, the sequences), then per table a JSON line naming its
 * columns followed by its rows in COPY text format and a `\.` line.
 *
 * The store lives in the schema its connection's search path creates tables in (`current_schema()`: `public`
 * unless a schema named first exists, such as the user-private schema PostgreSQL's docs advise): the server
 * names no schema, so backup and restore read and write that one, as the same URL's server would find it.
 *
 * A restore goes into an empty schema (no table in it): it applies the backup's own
 * migrations, then loads exactly the tables those migrations created, each once and all of them
 * (a file may not name a catalog table, nor leave one out), in one transaction with triggers off (the rows are the chain as it was: the append-only guards
 * and foreign keys are not re-run on them), sets the sequences, and commits; the server applies
 * any later migration at its next start, as for any upgrade. The backup holds secrets only in the
 * form the store keeps them (hashes; private keys encrypted with the master key): restoring it is
 * useful only with the same AGENTGOV_MASTER_KEY (or the data directory's master.key).
 */
export const BACKUP_FORMAT = "agentgov-backup"
export const BACKUP_VERSION = 1

export interface BackupHeader {
  readonly format: typeof BACKUP_FORMAT
  readonly version: number
  readonly createdAt: string
  readonly migrations: ReadonlyArray<string>
  readonly sequences: ReadonlyArray<{ readonly name: string; readonly value: string | null; readonly called: boolean }>
}

export interface BackupSummary {
  readonly tables: number
  readonly rows: number
  readonly migrations: ReadonlyArray<string>
}

export class BackupError extends Error {}

const connect = (url: string) => {
  const { url: u, host } = connectionOptions(url)
  return postgres(u, { ...(host ? { host } : {}), max: 1, onnotice: () => {}, idle_timeout: 5 })
}

const ident = (name: string) => `"${name.replaceAll('"', '""')}"`

/**
 * The store's tables and the columns a backup holds of each, in order: every column but the generated ones and
 * the writing transaction's id (content_image_hashes.xid, migration 0024: this cluster's, a restore writes its own).
 */
const dataColumns = (tx: postgres.TransactionSql, schema: string) =>
  tx<Array<{ table: string; columns: Array<string> }>>`
    SELECT c.table_name AS table, array_agg(c.column_name::text ORDER BY c.ordinal_position) AS columns
    FROM information_schema.columns c JOIN pg_tables t ON t.tablename = c.table_name AND t.schemaname = ${schema}
    WHERE c.table_schema = ${schema} AND c.is_generated = 'NEVER' AND c.table_name <> 'schema_migrations'
      AND c.column_default IS DISTINCT FROM 'pg_current_xact_id()'
    GROUP BY c.table_name ORDER BY c.table_name`

/**
 * The schema the store lives in at this connection: where its search path creates tables and finds them first,
 * as the server's unqualified statements do.
 */
const storeSchema = async (tx: postgres.TransactionSql): Promise<string> => {
  const [row] = await tx<Array<{ schema: string | null }>>`SELECT current_schema() AS schema`
  if (!row?.schema)
    throw new BackupError("the connection's search_path names no schema that exists: the store's schema is unknown")
  return row.schema
}

/** Why a backup could not be written, in an operator's words. */
const unwritable = (e: unknown): string => {
  const code = (e as { code?: unknown }).code
  if (code === "ENOSPC" || code === "EDQUOT") return "the disk is full"
  if (code === "ENOENT" || code === "ENOTDIR") return "no such directory"
  if (code === "EACCES" || code === "EPERM") return "permission denied"
  if (code === "EROFS") return "the file system is read-only"
  if (code === "EISDIR") return "it is a directory"
  return e instanceof Error ? e.message : String(e)
}

/** A failure of the file's own writing (not of the connection: a refused or missing socket has a code and a syscall too). */
const FILE_CALLS = new Set(["open", "write", "writev", "fsync", "fdatasync", "close", "link", "rename", "unlink"])
const isFileError = (e: unknown): boolean =>
  typeof (e as { code?: unknown }).code === "string" && FILE_CALLS.has(String((e as { syscall?: unknown }).syscall))

/** Makes a rename or link in `dir` durable (best effort: some file systems refuse to fsync a directory). */
const syncDirectory = (dir: string) => {
  try {
    const fd = openSync(dir, "r")
    try {
      fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
  } catch {
    // not supported here
  }
}

/**
 * Puts the finished `partial` at `file` unless something is there already (a backup never overwrites, even a file
 * that appeared while it wrote): a hard link fails when the name is taken, where a rename would replace it.
 */
const publish = (partial: string, file: string) => {
  try {
    linkSync(partial, file)
    rmSync(partial, { force: true })
  } catch (e) {
    const code = (e as { code?: unknown }).code
    if (code === "EEXIST") throw new BackupError(`${file} exists: choose a new file (a backup never overwrites)`)
    // A file system without hard links: the rename, after a last look.
    if (code !== "EPERM" && code !== "ENOTSUP" && code !== "EOPNOTSUPP" && code !== "EMLINK") throw e
    if (existsSync(file)) throw new BackupError(`${file} exists: choose a new file (a backup never overwrites)`)
    renameSync(partial, file)
  }
  syncDirectory(dirname(file))
}

/**
 * Writes a backup of the database at `url` to `file`: into `<file>.partial`, created here (a `.partial` already
 * there, such as a planted link or a second backup writing it, is refused and left alone), flushed to disk, then
 * linked into place. A failure to write (no such directory, a full disk) is a BackupError and leaves no `.partial`.
 */
export const backupTo = async (url: string, file: string): Promise<BackupSummary> => {
  const partial = `${file}.partial`
  let fd: number
  try {
    // O_EXCL: never through a link, never over a file; first, so a path that cannot be written touches no database.
    fd = openSync(partial, "wx", 0o600)
  } catch (e) {
    if ((e as { code?: unknown }).code === "EEXIST")
      throw new BackupError(
        `${partial} exists: another backup is writing it, or one was cut short; remove it, or choose another file`,
      )
    throw new BackupError(`cannot write ${file}: ${unwritable(e)}`)
  }
  let open = true
  let gzipped: ReturnType<typeof createGzip> | undefined
  const sql = connect(url)
  let rows = 0
  let tables = 0
  let migrations: ReadonlyArray<string> = []
  try {
    await sql.begin("ISOLATION LEVEL REPEATABLE READ READ ONLY", async (tx) => {
      const schema = await storeSchema(tx)
      const hasMigrations = await tx`SELECT to_regclass(${`${ident(schema)}.schema_migrations`}) IS NOT NULL AS present`
      if (!hasMigrations[0]!.present)
        throw new BackupError(`this database holds no agentgov store (no schema_migrations in schema ${schema})`)
      migrations = (
        await tx.unsafe<Array<{ version: string }>>(
          `SELECT version FROM ${ident(schema)}.schema_migrations ORDER BY version`,
        )
      ).map((r) => r.version)
      const sequences = await tx<Array<{ name: string; value: string | null; called: boolean }>>`
        SELECT sequencename AS name, last_value::text AS value, last_value IS NOT NULL AS called
        FROM pg_sequences WHERE schemaname = ${schema} ORDER BY sequencename`
      const columns = await dataColumns(tx, schema)
      const header: BackupHeader = {
        format: BACKUP_FORMAT,
        version: BACKUP_VERSION,
        createdAt: new Date().toISOString(),
        migrations,
        sequences: sequences.map((s) => ({ name: s.name, value: s.value, called: s.called })),
      }
      const gzip = createGzip()
      gzipped = gzip
      // The stream owns the descriptor from here: it flushes it to disk and closes it (or closes it on a failure).
      const out = pipeline(gzip, createWriteStream("", { fd, flush: true }))
      open = false
      // A write that fails (a full disk) ends the pipeline: the writes waiting for a drain that never comes fail with it.
      const failed = new Promise<never>((_, reject) => out.catch(reject))
      failed.catch(() => {})
      const write = (chunk: string | Buffer): Promise<void> =>
        gzip.write(chunk)
          ? Promise.resolve()
          : Promise.race([new Promise<void>((r) => gzip.once("drain", () => r())), failed])
      await write(`${JSON.stringify(header)}\n`)
      for (const t of columns) {
        await write(`${JSON.stringify({ table: t.table, columns: t.columns })}\n`)
        const copy = await tx
          .unsafe(`COPY (SELECT ${t.columns.map(ident).join(", ")} FROM ${ident(schema)}.${ident(t.table)}) TO STDOUT`)
          .readable()
        let last = 10
        for await (const chunk of copy as AsyncIterable<Buffer>) {
          for (const b of chunk) if (b === 10) rows++
          last = chunk.at(-1) ?? last
          await write(chunk)
        }
        await write(last === 10 ? "\\.\n" : "\n\\.\n")
        tables++
      }
      gzip.end()
      await out
    })
    // On disk (the stream's flush) before it is named: a backup reported made survives a power cut.
    publish(partial, file)
    return { tables, rows, migrations }
  } catch (e) {
    // A failure of the store mid-way: the stream is ended too, which closes its descriptor.
    gzipped?.destroy()
    if (open) closeSync(fd)
    rmSync(partial, { force: true })
    if (isFileError(e)) throw new BackupError(`cannot write ${file}: ${unwritable(e)}`)
    throw e
  } finally {
    await sql.end()
  }
}

/** Why a backup's bytes could not be read, in an operator's words. */
const unreadable = (e: unknown): string => {
  const code = (e as { code?: unknown }).code
  if (code === "Z_BUF_ERROR") return "it is cut short (its gzip stream ends early)"
  if (code === "Z_DATA_ERROR") return "it is not gzip data, or it is damaged"
  if (code === "EISDIR") return "it is a directory"
  if (code === "ENOENT") return "no such file"
  if (code === "EACCES") return "permission denied"
  return e instanceof Error ? e.message : String(e)
}

/** A line longer than this is refused: no row this service stores comes near it, and V8's strings end at 512 MiB. */
const MAX_LINE_BYTES = 256 * 1024 * 1024

/** The stream's lines (`\n`, or `\r\n`), each at most MAX_LINE_BYTES. */
const linesOf = async function* (input: AsyncIterable<Buffer>): AsyncGenerator<string> {
  let pending: Array<Buffer> = []
  let pendingBytes = 0
  const line = (last: Buffer) => {
    const bytes = pending.length === 0 ? last : Buffer.concat([...pending, last])
    pending = []
    pendingBytes = 0
    const end = bytes.length > 0 && bytes[bytes.length - 1] === 13 ? bytes.length - 1 : bytes.length
    return bytes.toString("utf8", 0, end)
  }
  const tooLong = () => new BackupError(`a line is longer than ${MAX_LINE_BYTES / 1024 / 1024} MiB: not a backup`)
  for await (const chunk of input) {
    let start = 0
    for (let at = chunk.indexOf(10); at !== -1; at = chunk.indexOf(10, start)) {
      if (pendingBytes + at - start > MAX_LINE_BYTES) throw tooLong()
      yield line(chunk.subarray(start, at))
      start = at + 1
    }
    if (start < chunk.length) {
      pendingBytes += chunk.length - start
      if (pendingBytes > MAX_LINE_BYTES) throw tooLong()
      pending.push(chunk.subarray(start))
    }
  }
  if (pendingBytes > 0) yield line(Buffer.alloc(0))
}

const isSequence = (s: unknown): s is BackupHeader["sequences"][number] => {
  if (s === null || typeof s !== "object") return false
  const { name, value, called } = s as Record<string, unknown>
  return (
    typeof name === "string" &&
    typeof called === "boolean" &&
    (value === null || (typeof value === "string" && /^-?\d{1,19}$/.test(value)))
  )
}

/** Why a parsed first line is not a header this release restores, or undefined when it is one. */
const headerProblem = (h: Record<string, unknown>): string | undefined => {
  const { migrations, sequences } = h
  if (!Array.isArray(migrations) || !migrations.every((v) => typeof v === "string"))
    return "its header lists no migrations"
  if (migrations.length === 0) return "its header lists no migrations: it holds no store"
  if (migrations.some((v, i) => i > 0 && v <= migrations[i - 1]!))
    return "its header's migrations are not in order, or repeat"
  if (!Array.isArray(sequences) || !sequences.every(isSequence)) return "its header's sequences are not well formed"
  return undefined
}

/** Reads a backup's lines: its header, then each table with an async iterable of its COPY lines. */
const readBackup = async function* (file: string) {
  const gunzip = createGunzip()
  const source = createReadStream(file)
  // A read failure (a directory, a vanished file) ends the lines as a gunzip failure (a cut or damaged file) does.
  source.on("error", (e) => gunzip.destroy(e))
  const iterator = linesOf(source.pipe(gunzip))
  const it = {
    next: async () => {
      try {
        return await iterator.next()
      } catch (e) {
        if (e instanceof BackupError) throw new BackupError(`${file}: ${e.message}`)
        throw new BackupError(`${file} cannot be read: ${unreadable(e)}`)
      }
    },
  }
  let header: BackupHeader
  try {
    const first = await it.next()
    header = JSON.parse(first.done ? "" : first.value)
  } catch (e) {
    if (e instanceof BackupError) throw e
    throw new BackupError(`${file} is not an agentgov backup`)
  }
  if (header === null || typeof header !== "object" || header.format !== BACKUP_FORMAT)
    throw new BackupError(`${file} is not an agentgov backup`)
  if (header.version !== BACKUP_VERSION)
    throw new BackupError(
      `${file} is a backup of format version ${JSON.stringify(header.version)}; this release reads ${BACKUP_VERSION}`,
    )
  const problem = headerProblem(header as unknown as Record<string, unknown>)
  if (problem !== undefined) throw new BackupError(`${file} is damaged: ${problem}`)
  yield { kind: "header", header } as const
  for (;;) {
    const next = await it.next()
    if (next.done) return
    if (next.value === "") continue
    let section: { table?: unknown; columns?: unknown }
    try {
      section = JSON.parse(next.value)
    } catch {
      throw new BackupError(`${file} is damaged: a table's heading is not JSON`)
    }
    const { table, columns } = section
    if (
      typeof table !== "string" ||
      !Array.isArray(columns) ||
      columns.length === 0 ||
      !columns.every((c) => typeof c === "string")
    )
      throw new BackupError(`${file} is damaged: a table's heading names no table or no columns`)
    const rows = (async function* () {
      for (;;) {
        const line = await it.next()
        if (line.done) throw new BackupError(`${file} is truncated (in table ${table})`)
        if (line.value === "\\.") return
        yield `${line.value}\n`
      }
    })()
    yield { kind: "table", table, columns: columns as Array<string>, rows } as const
  }
}

/**
 * The end of a COPY FROM STDIN. postgres.js 3.4.9 never settles a COPY that PostgreSQL refuses after its last data
 * was sent (the stream's final callback waits for a CommandComplete that never comes: porsager/postgres#1173), so a
 * damaged last row would hang the restore. A query sent right after the COPY's end settles either way: after a
 * refused COPY it fails, in the transaction the refusal aborted.
 */
const copied = (tx: postgres.TransactionSql, sink: Writable, written: Promise<void>): Promise<void> => {
  const writable = sink as Writable & { _final: (callback: (error?: Error | null) => void) => void }
  const end = writable._final
  const refused = new Promise<never>((_, reject) => {
    writable._final = function (this: Writable, callback) {
      end.call(this, callback)
      // After the CopyDone that `end` wrote: PostgreSQL answers the COPY first, then this.
      tx`SELECT 1`.then(
        () => {},
        (e: { code?: string }) =>
          reject(
            e.code === "25P02"
              ? new Error("PostgreSQL refused its rows (a row that does not fit the table's columns or types)")
              : e,
          ),
      )
    }
  })
  return Promise.race([written, refused])
}

/**
 * Restores `file` into the store's schema at `url` (storeSchema), which must hold no table: the backup's
 * migrations, its rows and its sequences, in one transaction.
 */
export interface RestoreOptions {
  /**
   * Run inside the restore's transaction once every table is loaded (its search path the restored schema): throwing
   * (a BackupError, to be said as it is) rolls the whole restore back.
   */
  readonly check?: ((tx: postgres.TransactionSql) => Promise<void>) | undefined
}

export const restoreFrom = async (url: string, file: string, options: RestoreOptions = {}): Promise<BackupSummary> => {
  const sql = connect(url)
  try {
    const shipped = loadMigrations()
    const known = new Map(shipped.map((m) => [m.version, m]))
    let tables = 0
    let rows = 0
    let migrations: ReadonlyArray<string> = []
    await sql.begin(async (tx) => {
      // The migrations' lock: neither a second restore nor a starting server builds a schema here meanwhile.
      await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`
      const schema = await storeSchema(tx)
      const [present] = await tx<Array<{ tables: number }>>`
        SELECT count(*)::int AS tables FROM pg_tables WHERE schemaname = ${schema}`
      if (present!.tables > 0)
        throw new BackupError(
          `the target is not empty (${present!.tables} tables in schema ${schema}): restore into an empty database`,
        )
      // The backup's migrations create the store in that schema alone, as the server's would at this URL.
      await tx.unsafe(`SET LOCAL search_path = ${ident(schema)}`)
      // The rows are the store as it was: its own triggers (append-only guards, foreign keys) are not re-run.
      await tx`SET LOCAL session_replication_role = replica`
      // The tables the backup's migrations create, each to be filled once with the columns a backup of that
      // schema holds: a file may name no other (a crafted one naming a catalog table would otherwise have it
      // emptied, as superuser), and must name every one (a file cut at a table's end is otherwise a smaller
      // store that restores "fine").
      let expected = new Map<string, ReadonlyArray<string>>()
      const filled = new Set<string>()
      for await (const part of readBackup(file)) {
        if (part.kind === "header") {
          migrations = part.header.migrations
          const unknown = migrations.filter((v) => !known.has(v))
          if (unknown.length > 0)
            throw new BackupError(
              `the backup was made by a later release (migrations ${unknown.join(", ")}): restore it with that release or a newer one`,
            )
          if (migrations.some((v, i) => shipped[i]?.version !== v))
            throw new BackupError(`${file} is damaged: its header's migrations are not a release's (one is missing)`)
          await tx.unsafe(
            "CREATE TABLE schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
          )
          for (const v of migrations) {
            await tx.unsafe(known.get(v)!.sql)
            await tx`INSERT INTO schema_migrations (version) VALUES (${v})`
          }
          expected = new Map((await dataColumns(tx, schema)).map((t) => [t.table, t.columns]))
          const sequences = (
            await tx<
              Array<{ name: string }>
            >`SELECT sequencename AS name FROM pg_sequences WHERE schemaname = ${schema}`
          ).map((r) => r.name)
          const given = new Map(part.header.sequences.map((q) => [q.name, q]))
          const stray = [...given.keys()].filter((n) => !sequences.includes(n))
          if (stray.length > 0)
            throw new BackupError(`${file} names a sequence its schema does not have: ${JSON.stringify(stray[0])}`)
          const absent = sequences.filter((n) => !given.has(n))
          if (absent.length > 0)
            throw new BackupError(`${file} is damaged: it does not give the sequence ${absent.join(", ")}`)
          for (const q of given.values())
            if (q.value !== null)
              await tx`SELECT setval(${`${ident(schema)}.${ident(q.name)}`}, ${q.value}::bigint, ${q.called})`
          continue
        }
        const columns = expected.get(part.table)
        if (columns === undefined)
          throw new BackupError(`${file} names a table its schema does not have: ${JSON.stringify(part.table)}`)
        if (filled.has(part.table)) throw new BackupError(`${file} holds table ${part.table} twice`)
        if (part.columns.length !== columns.length || part.columns.some((c, i) => c !== columns[i]))
          throw new BackupError(
            `${file} is damaged: table ${part.table} has columns ${part.columns.join(", ")}; its schema's are ${columns.join(", ")}`,
          )
        filled.add(part.table)
        const table = `${ident(schema)}.${ident(part.table)}`
        let n = 0
        try {
          // A row a migration seeded is replaced by the backup's own.
          await tx.unsafe(`DELETE FROM ${table}`)
          const counted = new Transform({
            transform(chunk, _enc, done) {
              n++
              done(null, chunk)
            },
          })
          const sink = await tx.unsafe(`COPY ${table} (${columns.map(ident).join(", ")}) FROM STDIN`).writable()
          await copied(tx, sink, pipeline(Readable.from(part.rows), counted, sink))
        } catch (e) {
          if (e instanceof BackupError) throw e
          throw new BackupError(`${file}: table ${part.table} does not load: ${e instanceof Error ? e.message : e}`)
        }
        rows += n
        tables++
      }
      const missing = [...expected.keys()].filter((t) => !filled.has(t)).sort()
      if (missing.length > 0)
        throw new BackupError(
          `${file} is incomplete: it holds ${filled.size} of the ${expected.size} tables of its schema ` +
            `(missing ${missing.slice(0, 5).join(", ")}${missing.length > 5 ? ", …" : ""}); nothing was restored`,
        )
      await options.check?.(tx)
    })
    return { tables, rows, migrations }
  } catch (e) {
    if (e instanceof BackupError || typeof (e as { code?: unknown }).code !== "string") throw e
    // PostgreSQL refused (the transaction rolled back): said in one line.
    const { code, message } = e as { code: string; message: string }
    throw new BackupError(
      code === "42501"
        ? `the restore needs a superuser at the target (to load rows without re-running triggers): ${message}`
        : `the restore failed and changed nothing: ${message}`,
    )
  } finally {
    await sql.end()
  }
}
