import { existsSync, renameSync, writeFileSync } from "node:fs"
import { migrate, PgliteClient, PostgresClient } from "@agentgov/db"
import { PGlite } from "@electric-sql/pglite"
import { Effect } from "effect"
import postgres from "postgres"
import { pgliteTemplatePath, pgTemplateName, withDatabase } from "./templates.ts"

/**
 * Runs once per test run. Refuses a Node other than 24 (the root package pins
 * it; a silent fallback to the machine's Node would test something else), then
 * prepares a migrated template of the selected store, cached by the hash of the
 * migrations: a PGlite dump file, or a PostgreSQL template database.
 */
export default async function setup() {
  if (!process.version.startsWith("v24.")) {
    throw new Error(`tests must run on Node 24 (npm test puts it on PATH); this is ${process.version}`)
  }
  const url = process.env.DATABASE_URL
  if (url) {
    const admin = postgres(withDatabase(url, "postgres"), { max: 1, onnotice: () => {} })
    try {
      const name = pgTemplateName()
      const [exists] = await admin`SELECT 1 FROM pg_database WHERE datname = ${name}`
      if (!exists) {
        const building = `${name}_build_${process.pid}`
        await admin.unsafe(`DROP DATABASE IF EXISTS "${building}"`)
        await admin.unsafe(`CREATE DATABASE "${building}"`)
        await Effect.runPromise(
          migrate().pipe(
            Effect.provide(PostgresClient.layer({ url: withDatabase(url, building), max: 1 })),
            Effect.scoped,
          ),
        )
        try {
          await admin.unsafe(`ALTER DATABASE "${building}" RENAME TO "${name}"`)
        } catch {
          // another run built it first
          await admin.unsafe(`DROP DATABASE IF EXISTS "${building}"`)
        }
      }
    } finally {
      await admin.end()
    }
    return
  }
  const path = pgliteTemplatePath()
  if (existsSync(path)) return
  const pg = await PGlite.create({ parsers: PgliteClient.pgliteParsers })
  await Effect.runPromise(migrate().pipe(Effect.provide(PgliteClient.layerFromInstance(pg))))
  const dump = Buffer.from(await (await pg.dumpDataDir("none")).arrayBuffer())
  await pg.close()
  const tmp = `${path}.${process.pid}`
  writeFileSync(tmp, dump)
  renameSync(tmp, path)
}
