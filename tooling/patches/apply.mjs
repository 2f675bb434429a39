#!/usr/bin/env node
// Applies this repository's patches to installed dependencies; the root package's `postinstall` runs it after every
// `npm install` / `npm ci`. Plain JavaScript for any Node.js that npm itself runs on. Each patch finds its text
// exactly or is already applied; anything else (a dependency upgraded to code that no longer matches) fails the
// install, so that nobody runs unpatched without knowing. See README.md here for what each patch fixes.
import { existsSync, readdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..")
const MARK = "agentgov patch: postgres-closed-connection"
const RESERVE_MARK = "agentgov patch: postgres-stranded-reserve"
const RECONNECT_MARK = "agentgov patch: postgres-reconnect-state (2)"

/**
 * postgres.js 3.4.9 (porsager/postgres#1208, #1154; unmerged fixes #1168, #1176, #1209). A connection whose server
 * session ended (PostgreSQL restarted, an administrator's pg_terminate_backend, idle_in_transaction_session_timeout)
 * has no socket. A reserved connection (`sql.reserve()`, every transaction of this service) kept sending to it: the
 * deferred write threw from a setImmediate callback, an uncaught TypeError that ended the whole server process.
 * Had the write not thrown, the reservation's next statements could have run on the connection reconnected for
 * other callers, outside the transaction they belonged to, and `release()` put the closed connection back among the
 * open ones. Patched: a write with no socket fails its queries with CONNECTION_CLOSED; a reservation whose connection
 * closed refuses every later query with CONNECTION_CLOSED (those queued behind a busy connection too) and its
 * `release()` does nothing, the pool having taken the connection back when it closed.
 */
const closedConnection = {
  name: "postgres-closed-connection",
  mark: MARK,
  issue: "porsager/postgres#1208",
  connection: [
    [
      `  function nextWrite(fn) {
    const x = socket.write(chunk, fn)`,
      `  function nextWrite(fn) {
    if (socket === null) { // ${MARK}
      clearImmediate(nextWriteTimer)
      chunk = nextWriteTimer = null
      error(Errors.connection('CONNECTION_CLOSED', options))
      return true
    }
    const x = socket.write(chunk, fn)`,
    ],
  ],
  index: [
    [
      `    c.reserved.release = true

    const sql = Sql(handler)
    sql.release = () => {
      c.reserved = null
      onopen(c)
    }

    return sql

    function handler(q) {
      c.queue === full`,
      `    c.reserved.release = true
    const reservation = c.reserved // ${MARK}
    const lost = () => Errors.connection('CONNECTION_CLOSED', options)
    c.onclose = () => {
      while (queue.length) queue.shift().reject(lost())
    }

    const sql = Sql(handler)
    sql.release = () => {
      if (c.reserved !== reservation)
        return
      c.onclose = null
      c.reserved = null
      onopen(c)
    }

    return sql

    function handler(q) {
      if (c.reserved !== reservation)
        return q.reject(lost())
      c.queue === full`,
    ],
  ],
}

/**
 * postgres.js 3.4.9 (porsager/postgres#1195, open). A `reserve()` waiting for a connection is queued in the pool's
 * `queries` and, when a closed connection is free, also handed to that connection's connect as its first query. Two
 * ways it stranded a connection or itself, found when the service's store was cut (ALLOW_CONNECTIONS false, sessions
 * terminated) and let back: (1) the connect failed (PostgreSQL refused the session), which rejected the reserve but left
 * it queued; once PostgreSQL answered again, the next connection to open was handed to that settled reserve and lost
 * to the pool, until every connection was and the pool answered nothing at all; (2) a connection that closed took the
 * queued reserve out of the queue for its reconnect, and the reconnect, once it succeeded, dropped it: that reserve
 * never settled. Patched: a reserve that is rejected leaves the queue, and a closing connection reconnects for a
 * queued reserve without taking it out of the queue, so that the connection, once open, is handed to it as any open
 * connection is (or its failure rejects it).
 */
const strandedReserve = {
  name: "postgres-stranded-reserve",
  mark: RESERVE_MARK,
  issue: "porsager/postgres#1195",
  queue: [
    [
      `    shift: () => {`,
      `    peek: () => xs[index], // ${RESERVE_MARK}
    shift: () => {`,
    ],
  ],
  index: [
    [
      `        const query = { reserve: resolve, reject }`,
      `        const query = { reserve: resolve, reject: (e) => (queries.remove(query), reject(e)) } // ${RESERVE_MARK}`,
    ],
    [
      `    queries.length && connect(c, queries.shift())`,
      `    queries.length && connect(c, queries.peek().reserve ? queries.peek() : queries.shift())`,
    ],
  ],
}

/**
 * postgres.js 3.4.9 (porsager/postgres#1223, #1130; unmerged fix in #1215). A connection whose session ended while a
 * query was in flight failed that query but kept it as its current one, with the last error, into its next session.
 * That session's start then went wrong: PostgreSQL's refusal (a database not accepting connections, one starting up)
 * was taken for the old query's error rather than the connection's, so the query waiting for the connection (a
 * `reserve()`) was neither given one nor failed, and the connection reconnected at once, again and again, for as
 * long as PostgreSQL refused; once PostgreSQL answered, the connection stayed in `connecting` holding a settled query,
 * lost to the pool, and `end()` waited for that query for ever (the pool's shutdown took its whole time-out).
 * A statement written after the socket's error and before its close (a transaction's release put the connection back
 * among the open ones in between, and the next transaction began on it) was never failed either, and its bytes,
 * waiting for their deferred write, stayed with a write timer cancelled but still marked pending: the next session's
 * start-up message was queued behind them and never sent, and the connect failed after its whole time-out (10 s).
 * And a new connection's first statement, the array types' query (`fetch_types`), was awaited in a promise nobody
 * handled: a session ended during it rejected that promise unhandled, and the server exits on an unhandled rejection.
 * Patched: a closed connection drops its unsent bytes, fails whatever it still had in flight, whether or not an error
 * came first (directly, not through `error()`, which does nothing while a multi-host connection is connecting), and
 * starts its next session with no query, result, error or row count of the last; the types query's failure is
 * handled, the close having already failed or re-queued what the connection was for.
 */
const reconnectState = {
  name: "postgres-reconnect-state",
  mark: RECONNECT_MARK,
  issue: "porsager/postgres#1223",
  connection: [
    [
      `    if (initial)
      return reconnect()

    !hadError && (query || sent.length) && error(Errors.connection('CONNECTION_CLOSED', options, socket))
`,
      `    chunk = nextWriteTimer = null // ${RECONNECT_MARK}
    if (initial) {
      query && queryError(query, Errors.connection('CONNECTION_CLOSED', options, socket))
      while (sent.length)
        queryError(sent.shift(), Errors.connection('CONNECTION_CLOSED', options, socket))
      query = results = errorResponse = null
      rows = 0
      return reconnect()
    }

    ;(query || sent.length) && error(Errors.connection('CONNECTION_CLOSED', options, socket))
    query && queryError(query, Errors.connection('CONNECTION_CLOSED', options, socket))
    while (sent.length)
      queryError(sent.shift(), Errors.connection('CONNECTION_CLOSED', options, socket))
    query = results = errorResponse = null
    rows = 0
`,
    ],
    [
      `    \`], [], execute)
    types.forEach(({ oid, typarray }) => addArrayType(oid, typarray))`,
      `    \`], [], execute).catch(() => null) // ${RECONNECT_MARK}: its session ended; the close failed the rest
    if (!types)
      return
    types.forEach(({ oid, typarray }) => addArrayType(oid, typarray))`,
    ],
  ],
}

const patchFile = (file, patch, edits) => {
  if (!existsSync(file)) throw new Error(`patches: ${file} is missing`)
  const text = readFileSync(file, "utf8")
  if (text.includes(patch.mark)) return false
  if (text.includes(`agentgov patch: ${patch.name}`))
    throw new Error(
      `patches: ${file} holds an earlier version of the ${patch.name} patch: reinstall the package ` +
        "(rm -rf node_modules/postgres && npm install), and the install patches it afresh.",
    )
  let out = text
  for (const [from, to] of edits) {
    const at = out.indexOf(from)
    if (at === -1 || out.indexOf(from, at + 1) !== -1)
      throw new Error(
        `patches: ${file} does not hold the code the ${patch.name} patch expects (postgres.js upgraded?). ` +
          `Check whether the new version fixes ${patch.issue}, then update or drop tooling/patches/apply.mjs.`,
      )
    out = out.slice(0, at) + to + out.slice(at + from.length)
  }
  writeFileSync(file, out)
  return true
}

/** The patches, in the order they apply. Each names the files it edits (`connection`, `index`, `queue`). */
export const PATCHES = [closedConnection, strandedReserve, reconnectState]
/** The files of a copy of postgres.js each patch edits, relative to the package's directory. */
export const patchedFiles = (patch) =>
  ["src", "cjs/src"].flatMap((base) =>
    ["connection", "index", "queue"].filter((name) => patch[name]).map((name) => [`${base}/${name}.js`, name]),
  )

/**
 * Every copy of postgres.js installed in this tree: the root's, and any a workspace holds of its own (npm nests one
 * when versions conflict). Each is patched: whichever a workspace loads carries the fixes.
 */
const installedCopies = () => {
  const copies = [join(root, "node_modules", "postgres")]
  // The workspaces as the root package.json lists them (`group/*`, or one directory).
  for (const pattern of JSON.parse(readFileSync(join(root, "package.json"), "utf8")).workspaces ?? []) {
    if (!pattern.endsWith("/*")) {
      copies.push(join(root, pattern, "node_modules", "postgres"))
      continue
    }
    const group = join(root, pattern.slice(0, -2))
    if (!existsSync(group)) continue
    for (const entry of readdirSync(group, { withFileTypes: true }))
      if (entry.isDirectory()) copies.push(join(group, entry.name, "node_modules", "postgres"))
  }
  return copies.filter((dir) => existsSync(join(dir, "package.json")))
}

// Run as a script (the postinstall), not imported (the test that checks what the service loads). Real paths on both
// sides: a checkout reached through a symbolic link must not skip the patches.
const isMain =
  process.argv[1] !== undefined &&
  realpathSync(fileURLToPath(import.meta.url)) === realpathSync(resolve(process.argv[1]))
if (isMain)
  for (const dir of installedCopies()) {
    const version = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).version
    for (const patch of PATCHES) {
      let applied = 0
      for (const [file, name] of patchedFiles(patch)) if (patchFile(join(dir, file), patch, patch[name])) applied++
      if (applied > 0) console.log(`patches: postgres ${version} (${dir}): ${patch.name} (${applied} files)`)
    }
  }
