import { readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import {
  type EmbeddedPostgres,
  migrate,
  PostgresClient,
  startEmbeddedPostgres,
  stopLeftoverPostmaster,
} from "@agentgov/db"
import { Effect } from "effect"
import { EMBEDDED_URL_ENV, pgConnect, pgTemplateName, reachableTempDir, withDatabase } from "./templates.ts"

const CLUSTER_PREFIX = "agentgov-test-pg-"

/** Every project of one run loads this module anew: the run's one cluster and templates are kept on the process. */
interface Shared {
  cluster: Promise<EmbeddedPostgres>
  dir: string
  users: number
}
const SHARED = Symbol.for("agentgov.testing.embeddedCluster")
const TEMPLATES = Symbol.for("agentgov.testing.templates")
const holder = globalThis as unknown as { [SHARED]?: Shared; [TEMPLATES]?: Map<string, Promise<void>> }

/**
 * Clusters of earlier runs whose test runner died (killed, out of memory) before its teardown:
 * their postmasters stop with the runner (the watchdog), but their directories stay. Remove them.
 */
const removeAbandoned = async () => {
  for (const name of readdirSync(tmpdir())) {
    if (!name.startsWith(CLUSTER_PREFIX)) continue
    const dir = join(tmpdir(), name)
    try {
      process.kill(Number(name.slice(CLUSTER_PREFIX.length).split("-")[0]), 0)
      continue // its run is still going
    } catch {
      // gone
    }
    await stopLeftoverPostmaster(join(dir, "pg")).catch(() => {})
    rmSync(dir, { recursive: true, force: true })
  }
}

/** The run's own embedded PostgreSQL, started by the first project's setup and stopped by the last teardown. */
const embeddedCluster = async (): Promise<{ url: string; release: () => Promise<void> }> => {
  let shared = holder[SHARED]
  if (!shared) {
    await removeAbandoned()
    const dir = reachableTempDir(`${CLUSTER_PREFIX}${process.pid}-`)
    shared = { cluster: startEmbeddedPostgres({ dir: join(dir, "pg"), ephemeral: true }), dir, users: 0 }
    holder[SHARED] = shared
  }
  shared.users += 1
  const { url } = await shared.cluster
  const mine = shared
  return {
    url,
    release: async () => {
      mine.users -= 1
      if (mine.users > 0) return
      delete holder[SHARED]
      await (await mine.cluster).stop()
      rmSync(mine.dir, { recursive: true, force: true })
    },
  }
}

/**
 * Runs once per test run (per project, sharing one cluster). Refuses a Node other than 24 (the root
 * package pins it; a silent fallback to the machine's Node would test something else), then prepares
 * a migrated template database, cached by the hash of the migrations, on the selected PostgreSQL:
 * DATABASE_URL, or else an embedded cluster of the run's own in a temporary directory, as the
 * server's embedded default (no fsync: nothing there must survive the run). Each test file clones it.
 */
export default async function setup() {
  if (!process.version.startsWith("v24.")) {
    throw new Error(`tests must run on Node 24 (npm test puts it on PATH); this is ${process.version}`)
  }
  let url = process.env.DATABASE_URL
  let teardown: (() => Promise<void>) | undefined
  if (!url) {
    const embedded = await embeddedCluster()
    url = embedded.url
    teardown = embedded.release
    // read by the test workers (testStore.ts), which the runner forks after this setup
    process.env[EMBEDDED_URL_ENV] = url
  }
  holder[TEMPLATES] ??= new Map()
  const templates = holder[TEMPLATES]
  const building = templates.get(url) ?? buildTemplate(url)
  templates.set(url, building)
  try {
    await building
  } catch (e) {
    templates.delete(url)
    await teardown?.()
    throw e
  }
  return teardown
}

/** The migrated template database, unless a run before built it for the same migrations. */
const buildTemplate = async (url: string) => {
  const admin = pgConnect(withDatabase(url, "postgres"))
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
        // another run, or another project of this run, built it first
        await admin.unsafe(`DROP DATABASE IF EXISTS "${building}"`)
      }
    }
  } finally {
    await admin.end()
  }
}
