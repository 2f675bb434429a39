#!/usr/bin/env node
// Applies this repository's patches to installed dependencies; the root package's `postinstall` runs it after every
// `npm install` / `npm ci`. Plain JavaScript for any Node.js that npm itself runs on. Each patch finds its text
// exactly or is already applied; anything else (a dependency upgraded to code that no longer matches) fails the
// install, so that nobody runs unpatched without knowing. See README.md here for what each patch fixes.
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..")
const MARK = "agentgov patch: postgres-closed-connection"

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
const postgres = {
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

const patchFile = (file, edits) => {
  if (!existsSync(file)) throw new Error(`patches: ${file} is missing`)
  const text = readFileSync(file, "utf8")
  if (text.includes(MARK)) return false
  let out = text
  for (const [from, to] of edits) {
    const at = out.indexOf(from)
    if (at === -1 || out.indexOf(from, at + 1) !== -1)
      throw new Error(
        `patches: ${file} does not hold the code the postgres-closed-connection patch expects (postgres.js upgraded?). ` +
          "Check whether the new version fixes porsager/postgres#1208, then update or drop tooling/patches/apply.mjs.",
      )
    out = out.slice(0, at) + to + out.slice(at + from.length)
  }
  writeFileSync(file, out)
  return true
}

const dir = join(root, "node_modules", "postgres")
if (existsSync(dir)) {
  const version = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).version
  let applied = 0
  for (const base of ["src", "cjs/src"]) {
    if (patchFile(join(dir, base, "connection.js"), postgres.connection)) applied++
    if (patchFile(join(dir, base, "index.js"), postgres.index)) applied++
  }
  if (applied > 0)
    console.log(`patches: postgres ${version}: closed connections no longer crash the process (${applied} files)`)
}
