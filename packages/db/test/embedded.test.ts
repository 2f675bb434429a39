import { mkdirSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { pgConnect, reachableTempDir } from "@agentgov/testing"
import { afterAll, describe, expect, it } from "vitest"
import { EmbeddedPostgresError, startEmbeddedPostgres } from "../src/EmbeddedPostgres.ts"

/** The embedded PostgreSQL on its own: where it listens, and what it refuses. The server's use: apps/server. */

const root = reachableTempDir("agentgov-embedded-db-")
afterAll(() => rmSync(root, { recursive: true, force: true }))

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

describe.runIf(process.platform === "linux")("startEmbeddedPostgres", { timeout: 120_000 }, () => {
  it("listens on a private loopback port with a password when the socket's path would be too long", async () => {
    // <dir>/.s.PGSQL.5432 longer than the 107 bytes a Unix socket path may have
    const dir = join(root, "d".repeat(100), "pg")
    mkdirSync(join(root, "d".repeat(100)))
    const pg = await startEmbeddedPostgres({ dir, ephemeral: true })
    try {
      const url = new URL(pg.url)
      expect(url.hostname).toBe("127.0.0.1")
      expect(url.searchParams.get("host")).toBeNull()
      expect(url.password.length).toBeGreaterThan(20)
      const sql = pgConnect(pg.url)
      expect((await sql`SELECT current_setting('listen_addresses') AS a`)[0]!.a).toBe("127.0.0.1")
      await sql.end()
      // the port is not open to anyone on the machine who knows it: the password is required
      url.password = ""
      const anonymous = pgConnect(url.toString(), { connect_timeout: 10 })
      await expect(anonymous`SELECT 1`).rejects.toThrow(/password/)
      await anonymous.end()
    } finally {
      await pg.stop()
    }
    expect(alive(pg.pid)).toBe(false)
  })

  it("listens on a socket in its directory, and on no TCP port, when the path fits", async () => {
    const dir = join(root, "short", "pg")
    const pg = await startEmbeddedPostgres({ dir, ephemeral: true })
    try {
      expect(new URL(pg.url).searchParams.get("host")).toBe(dir)
      const sql = pgConnect(pg.url)
      const [row] = await sql`SELECT current_setting('listen_addresses') AS a, inet_server_port() AS port`
      expect(row).toEqual({ a: "", port: null })
      await sql.end()
    } finally {
      await pg.stop()
    }
  })

  it("refuses a directory that is neither empty nor a cluster, and changes nothing in it", async () => {
    const dir = join(root, "taken")
    mkdirSync(dir)
    writeFileSync(join(dir, "notes.txt"), "mine")
    await expect(startEmbeddedPostgres({ dir })).rejects.toThrow(EmbeddedPostgresError)
    await expect(startEmbeddedPostgres({ dir })).rejects.toThrow(/neither empty nor a PostgreSQL cluster/)
  })
})
