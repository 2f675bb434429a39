import { mkdirSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { pgConnect, reachableTempDir } from "@agentgov/testing"
import { afterAll, describe, expect, it } from "vitest"
import { EmbeddedPostgresError, runningClusterUrl, startEmbeddedPostgres } from "../src/EmbeddedPostgres.ts"

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
      // The operator CLI finds it running (a backup while it serves).
      expect(runningClusterUrl(dir)).toBe(pg.url)
      // …by another path to the same directory too (a link, as a volume mounted under two names).
      symlinkSync(join(root, "short"), join(root, "short-link"))
      expect(runningClusterUrl(join(root, "short-link", "pg"))).toBe(pg.url)
    } finally {
      await pg.stop()
    }
    expect(runningClusterUrl(dir)).toBeUndefined()
  })

  it("takes a postmaster.pid whose pid is now another process's for no running cluster", () => {
    // As after a crash and a restart (a container's pids repeat): the file says ready, its pid is alive, and it is
    // not a PostgreSQL on this directory. The CLI would refuse a restore ("a server is running") and aim a backup
    // at a dead socket.
    const dir = join(root, "stale", "pg")
    mkdirSync(dir, { recursive: true })
    writeFileSync(
      join(dir, "postmaster.pid"),
      `${process.pid}\n${dir}\n1795000000\n5432\n${dir}\n\n  1234  5678\nready   \n`,
    )
    expect(runningClusterUrl(dir)).toBeUndefined()
  })

  it("refuses a cluster of another major version, saying how to move its data, and changes nothing in it", async () => {
    const dir = join(root, "older", "pg")
    mkdirSync(dir, { recursive: true })
    writeFileSync(join(dir, "PG_VERSION"), "15\n")
    const e = await startEmbeddedPostgres({ dir }).then(
      () => undefined,
      (x: unknown) => x,
    )
    expect(e).toBeInstanceOf(EmbeddedPostgresError)
    expect(String((e as Error).message)).toMatch(
      /^.*older\/pg holds a PostgreSQL 15 cluster; this release embeds PostgreSQL \d+: .*backup.*restore/,
    )
    expect(readdirSync(dir)).toEqual(["PG_VERSION"])
  })

  it("refuses a directory that is neither empty nor a cluster, and changes nothing in it", async () => {
    const dir = join(root, "taken")
    mkdirSync(dir)
    writeFileSync(join(dir, "notes.txt"), "mine")
    await expect(startEmbeddedPostgres({ dir })).rejects.toThrow(EmbeddedPostgresError)
    await expect(startEmbeddedPostgres({ dir })).rejects.toThrow(/neither empty nor a PostgreSQL cluster/)
  })
})
