/**
 * The minimal durable design (issue 25's yardstick): the simplest correct fast
 * server that does the guard's and ingest's durable work, and nothing more.
 *
 * - `POST /v1/guard`: parse the body, check a static bearer token (constant
 *   time), evaluate one trivial rule, and write one audit-width row carrying a
 *   SHA-256 of its content into a table with the same indexes as `events`.
 *   Concurrent requests are group-committed: one writer sends every row that
 *   waits as one multi-row INSERT (its own transaction, `synchronous_commit`
 *   on), answers them all after the commit, then takes the next group.
 * - `POST /v1/events/ingest`: the same for a body of up to 100 events, a
 *   SHA-256 per row and one INSERT per call (no chain).
 *
 * Run as a child: `node durableServer.ts <postgres url> <table> <token>`; prints
 * `{"port":N}` when it listens. The table is made by the caller
 * (`CREATE TABLE … (LIKE events INCLUDING ALL)`).
 */
import { createHash, timingSafeEqual } from "node:crypto"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import { connectionOptions } from "@agentgov/db"
import postgres from "postgres"

const [url, table, token] = process.argv.slice(2) as [string, string, string]
const target = connectionOptions(url)
// The server's own pool size (packages/db), and a commit that waits for the WAL flush whatever the
// database's default: the yardstick must be as durable as what it measures.
const sql = postgres(target.url, {
  ...(target.host ? { host: target.host } : {}),
  max: 10,
  onnotice: () => {},
  connection: { synchronous_commit: "on" },
})
const expected = Buffer.from(`Bearer ${token}`)
const workspaceId = "ws_baseline"
let sequence = 0

interface Row {
  workspace_id: string
  sequence: number
  id: string
  type: string
  agent_id: string | null
  actor_type: string
  actor_id: string
  data: string
  ts: string
  prev_hash: string
  hash: string
}

/** A chain row's widths: a 26-character ULID after `evt_`, a 64-hex previous hash (constant here: no chain). */
const NO_PREVIOUS = "0".repeat(64)

/** One audit-width row: the event's fields, its data as text, and a SHA-256 over them. */
const rowOf = (type: string, agentId: string | null, data: unknown): Row => {
  const seq = ++sequence
  const ts = new Date().toISOString()
  const text = JSON.stringify(data)
  const hash = createHash("sha256").update(String(seq)).update(type).update(text).update(ts).digest("hex")
  return {
    workspace_id: workspaceId,
    sequence: seq,
    id: `evt_${String(seq).padStart(26, "0")}`,
    type,
    agent_id: agentId,
    actor_type: "api_key",
    actor_id: "key_baseline",
    data: text,
    ts,
    prev_hash: NO_PREVIOUS,
    hash,
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
  "prev_hash",
  "hash",
] as const
/**
 * A prepared multi-row INSERT per group size. The data goes as text cast to the column's JSON type, as the
 * server sends it: postgres.js would otherwise JSON-encode the string again and store a string scalar.
 */
const statements = new Map<number, string>()
const statementFor = (n: number) => {
  let statement = statements.get(n)
  if (statement === undefined) {
    const cast = (c: string) => (c === "data" ? "::text::json" : c === "ts" ? "::timestamptz" : "")
    const tuples = Array.from(
      { length: n },
      (_, r) => `(${COLUMNS.map((c, i) => `$${r * COLUMNS.length + i + 1}${cast(c)}`).join(", ")})`,
    )
    statement = `INSERT INTO "${table}" (${COLUMNS.join(", ")}) VALUES ${tuples.join(", ")}`
    statements.set(n, statement)
  }
  return statement
}
const insert = (rows: ReadonlyArray<Row>) =>
  sql.unsafe(
    statementFor(rows.length),
    rows.flatMap((r) => COLUMNS.map((c) => r[c])),
    { prepare: true },
  )

let waiting: Array<{ row: Row; done: (error?: unknown) => void }> = []
let writing = false
/** Group commit: whatever queued while the previous INSERT ran goes in the next one. */
const write = async () => {
  if (writing) return
  writing = true
  while (waiting.length > 0) {
    const group = waiting
    waiting = []
    try {
      await insert(group.map((w) => w.row))
      for (const w of group) w.done()
    } catch (error) {
      for (const w of group) w.done(error)
    }
  }
  writing = false
}
const append = (row: Row) =>
  new Promise<void>((resolve, reject) => {
    waiting.push({ row, done: (error) => (error ? reject(error) : resolve()) })
    void write()
  })

const send = (res: ServerResponse, status: number, body: string) => {
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) })
  res.end(body)
}

const authorised = (req: IncomingMessage) => {
  const given = Buffer.from(req.headers.authorization ?? "")
  return given.length === expected.length && timingSafeEqual(given, expected)
}

const handle = async (req: IncomingMessage, res: ServerResponse, raw: Buffer) => {
  if (!authorised(req)) return send(res, 401, '{"ok":false,"error":{"code":"UNAUTHORIZED","message":"bad token"}}')
  let body: any
  try {
    body = JSON.parse(raw.toString("utf8"))
  } catch {
    return send(res, 400, '{"ok":false,"error":{"code":"VALIDATION_ERROR","message":"the body is not JSON"}}')
  }
  if (req.url === "/v1/guard") {
    // One trivial rule: deny what the body calls a deletion, allow the rest.
    const allowed = !String(body.action).endsWith(".delete")
    const decision = allowed ? "allow" : "deny"
    const row = rowOf("policy.evaluated", body.agentId ?? null, {
      action: body.action,
      decision,
      context: body.context,
    })
    await append(row)
    return send(res, 200, JSON.stringify({ ok: true, data: { decision, allowed, eventId: row.id } }))
  }
  if (req.url === "/v1/events/ingest") {
    const rows = (body.events as Array<{ type: string; agentId?: string; data: unknown }>).map((e) =>
      rowOf(e.type, e.agentId ?? null, e.data),
    )
    await insert(rows)
    // The ids and positions written, as the server answers (the bench reads them back).
    const events = rows.map((r) => ({ id: r.id, sequence: r.sequence }))
    return send(res, 201, JSON.stringify({ ok: true, data: { events } }))
  }
  send(res, 404, '{"ok":false,"error":{"code":"NOT_FOUND","message":"no route"}}')
}

const server = createServer((req, res) => {
  const chunks: Array<Buffer> = []
  req.on("data", (c: Buffer) => chunks.push(c))
  req.on("end", () => {
    handle(req, res, Buffer.concat(chunks)).catch((error) =>
      send(res, 500, JSON.stringify({ ok: false, error: { code: "INTERNAL_ERROR", message: String(error) } })),
    )
  })
})
server.keepAliveTimeout = 65_000
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as { port: number }).port })}\n`)
})
process.on("SIGTERM", () => {
  server.close()
  void sql.end({ timeout: 1 }).then(() => process.exit(0))
})
