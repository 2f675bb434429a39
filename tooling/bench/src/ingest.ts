import type postgres from "postgres"
import { type Measured, measure, summarise } from "./report.ts"
import type { BenchServer } from "./server.ts"

export interface IngestShape {
  readonly clients: number
  readonly calls: number
  readonly batch: number
}

export interface IngestRun extends Measured {
  readonly events: number
  readonly eventsPerSecond: number
  /** Per call, from request to 201. */
  readonly callMs: ReturnType<typeof summarise>
  /** The chain positions this run wrote: the baseline inserts these very rows. */
  readonly fromSequence: number
  readonly toSequence: number
}

/** One call's body: `batch` events of a typical tool-call shape, different in every call. */
const body = (tag: string, client: number, call: number, batch: number) =>
  JSON.stringify({
    events: Array.from({ length: batch }, (_, i) => ({
      type: "bench.tool.called",
      data: {
        run: tag,
        client,
        call,
        i,
        tool: "search",
        input: { query: "quarterly revenue by region", limit: 10 },
        ok: true,
        durationMs: (call * 31 + i * 7) % 250,
      },
    })),
  })

/**
 * `clients` concurrent clients, each making `calls` ingest calls of `batch` events one after another, to the
 * server or to the durable baseline (which serves the same body at `/v1/events/ingest`).
 */
export const runIngest = async (
  server: Pick<BenchServer, "call" | "cpuMs">,
  shape: IngestShape,
  tag: string,
  path = "/api/v1/events/ingest",
): Promise<IngestRun> => {
  const bodies = Array.from({ length: shape.clients }, (_, c) =>
    Array.from({ length: shape.calls }, (_, k) => body(tag, c, k, shape.batch)),
  )
  const latencies: Array<number> = []
  let fromSequence = Number.POSITIVE_INFINITY
  let toSequence = 0
  const measured = await measure(server, () =>
    Promise.all(
      bodies.map(async (mine) => {
        for (const b of mine) {
          const start = performance.now()
          const res = await server.call("POST", path, b)
          latencies.push(performance.now() - start)
          if (res.status !== 201) throw new Error(`ingest answered ${res.status}: ${JSON.stringify(res.body)}`)
          for (const e of res.body.data.events as Array<{ sequence: number }>) {
            fromSequence = Math.min(fromSequence, e.sequence)
            toSequence = Math.max(toSequence, e.sequence)
          }
        }
      }),
    ),
  )
  const events = shape.clients * shape.calls * shape.batch
  return {
    ...measured,
    events,
    eventsPerSecond: events / (measured.ms / 1000),
    callMs: summarise(latencies),
    fromSequence,
    toSequence,
  }
}

const COLUMNS = [
  "workspace_id",
  "sequence",
  "id",
  "type",
  "agent_id",
  "actor_type",
  "actor_id",
  "data",
  "ts",
  "occurred_at",
  "prev_hash",
  "hash",
] as const
/**
 * A plain multi-row INSERT of `rows` rows into `table`, with the column list
 * and casts of the server's own (packages/domain/src/audit/AuditLog.ts): data
 * sent as text and cast to the column's JSON type, times as ISO strings.
 */
const insertStatement = (table: string, rows: number, dataType: string) => {
  const casts: Partial<Record<(typeof COLUMNS)[number], string>> = {
    data: `::text::${dataType}`,
    ts: "::timestamptz",
    occurred_at: "::timestamptz",
  }
  const tuples = Array.from(
    { length: rows },
    (_, r) => `(${COLUMNS.map((c, i) => `$${r * COLUMNS.length + i + 1}${casts[c] ?? ""}`).join(", ")})`,
  )
  return `INSERT INTO ${table} (${COLUMNS.join(", ")}) VALUES ${tuples.join(", ")}`
}

/**
 * Tables for the baselines: `bench_plain` has only a primary key; `bench_indexed` and `bench_serial` have
 * every index of `events`.
 */
export const createBaselineTables = async (sql: postgres.Sql) => {
  await sql`CREATE TABLE bench_plain (LIKE events INCLUDING DEFAULTS, PRIMARY KEY (workspace_id, sequence))`
  await sql`CREATE TABLE bench_indexed (LIKE events INCLUDING ALL)`
  await sql`CREATE TABLE bench_serial (LIKE events INCLUDING ALL)`
}

/**
 * The shape of one ordered writer with the same load: one connection, each statement the rows of one call
 * from every client (what one group-committed batch holds at most). A chain has one writer per workspace,
 * so this, not `clients` parallel writers, is the ceiling of any chained ingest into one workspace.
 */
export const serialShape = (shape: IngestShape): IngestShape => ({
  clients: 1,
  calls: shape.calls,
  batch: shape.batch * shape.clients,
})

/** The stored rows of an ingest run, as the parameters of the server's INSERT: JSON as text, times as ISO strings. */
export const fetchRows = async (sql: postgres.Sql, workspaceId: string, run: IngestRun) => {
  const rows = await sql`SELECT workspace_id, sequence, id, type, agent_id, actor_type, actor_id, data::text AS data,
      ts, occurred_at, prev_hash, hash
    FROM events WHERE workspace_id = ${workspaceId} AND sequence BETWEEN ${run.fromSequence} AND ${run.toSequence}
    ORDER BY sequence`
  return rows.map((r) =>
    COLUMNS.map((c) => {
      const v = r[c]
      return v instanceof Date ? v.toISOString() : v
    }),
  )
}

/**
 * The baseline: the same rows written with no chaining, by `clients`
 * connections each running multi-row INSERTs of `batch` rows (autocommit, as
 * durable as an ingest call), batches dealt round-robin.
 */
export const runPlainInsert = async (
  sql: postgres.Sql,
  server: BenchServer,
  table: string,
  rows: ReadonlyArray<ReadonlyArray<unknown>>,
  shape: IngestShape,
) => {
  const [column] = await sql`SELECT format_type(atttypid, atttypmod) AS type FROM pg_attribute
    WHERE attrelid = ${table}::regclass AND attname = 'data'`
  const statement = insertStatement(table, shape.batch, column!.type)
  const perClient: Array<Array<Array<unknown>>> = Array.from({ length: shape.clients }, () => [])
  for (let b = 0; b * shape.batch < rows.length; b++) {
    const params = rows.slice(b * shape.batch, (b + 1) * shape.batch).flat()
    if (params.length !== shape.batch * COLUMNS.length) throw new Error("the rows do not fill whole batches")
    perClient[b % shape.clients]!.push(params)
  }
  const measured = await measure(server, () =>
    Promise.all(
      perClient.map(async (batches) => {
        for (const params of batches) await sql.unsafe(statement, params as Array<never>, { prepare: true })
      }),
    ),
  )
  return { ...measured, events: rows.length, eventsPerSecond: rows.length / (measured.ms / 1000) }
}
