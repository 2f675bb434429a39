import { spawn, spawnSync } from "node:child_process"
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { connect } from "node:net"
import { join } from "node:path"
import { reachableTempDir } from "@agentgov/testing"
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { type ChildServer, kill9, runCliToExit, runToExit, spawnServer, stopChildren } from "./childServer.ts"

/**
 * The embedded default as an operator meets it: `node apps/server/src/main.ts` with no DATABASE_URL
 * runs PostgreSQL in `<AGENTGOV_DATA_DIR>/pg`, stops it with the server, and copes with what a crash
 * leaves. One data directory through the whole file, so each start after the first finds a cluster.
 */

// Without DATABASE_URL only (that is the embedded default); on Linux, where the test reads /proc.
const enabled = !process.env.DATABASE_URL && process.platform === "linux"
const dir = enabled ? reachableTempDir("agentgov-embedded-") : ""
const dataDir = join(dir, "data")
const clusterDir = join(dataDir, "pg")
const env = { AGENTGOV_DATA_DIR: dataDir }

afterEach(stopChildren)
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true })
})

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}
const postmasterPid = () => Number(readFileSync(join(clusterDir, "postmaster.pid"), "utf8").split("\n")[0])
const parentOf = (pid: number) => Number(readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")[1])
const childrenOf = (pid: number) =>
  spawnSync("pgrep", ["-P", String(pid)], { encoding: "utf8" })
    .stdout.split("\n")
    .filter((l) => l !== "")
    .map(Number)

const call = async (server: ChildServer, key: string, method: string, path: string, body?: unknown) => {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  return { status: res.status, body: (await res.json()) as any }
}
const agentNames = async (server: ChildServer, key: string) =>
  (await call(server, key, "GET", "/api/v1/agents")).body.data.map((a: { name: string }) => a.name)

const stop = async (server: ChildServer) => {
  server.proc.kill("SIGTERM")
  await server.exited
  return server.proc.exitCode
}

const cli = (...args: Array<string>) => runCliToExit(env, [...args, "--json"], 120_000)

let key: string

describe.runIf(enabled)("the embedded PostgreSQL", { timeout: 180_000 }, () => {
  it("is created on the first start in <data dir>/pg, and stopped cleanly by SIGTERM", async () => {
    const server = await spawnServer(env)
    key = await server.waitForKey()
    expect(server.output()).toContain(`embedded PostgreSQL in ${clusterDir}`)
    expect(existsSync(join(clusterDir, "PG_VERSION"))).toBe(true)
    const pid = postmasterPid()
    expect(readFileSync(`/proc/${pid}/cmdline`, "utf8")).toContain(clusterDir)
    expect((await call(server, key, "POST", "/api/v1/agents", { name: "before-crash" })).status).toBe(201)

    expect(await stop(server)).toBe(0)
    // a clean shutdown: the postmaster gone before the server exited, its lock file removed
    expect(alive(pid)).toBe(false)
    expect(existsSync(join(clusterDir, "postmaster.pid"))).toBe(false)
  })

  it("stops a postmaster left running by a crash (server and watchdog killed) and serves the same data", async () => {
    const crashed = await spawnServer(env)
    const orphan = postmasterPid()
    const watchdog = parentOf(orphan)
    // The watchdog (a shell and its reader) would stop the postmaster when the server dies: kill it first.
    for (const pid of childrenOf(watchdog)) if (pid !== orphan) process.kill(pid, "SIGKILL")
    process.kill(watchdog, "SIGKILL")
    await kill9(crashed)
    expect(alive(orphan)).toBe(true)

    const next = await spawnServer(env)
    expect(alive(orphan)).toBe(false)
    expect(postmasterPid()).not.toBe(orphan)
    expect(await agentNames(next, key)).toEqual(["before-crash"])
    expect(await stop(next)).toBe(0)
  })

  it("is not fooled by the postmaster.pid of a dead process saying 'ready'", async () => {
    const gone = spawnSync("true").pid!
    // As PostgreSQL writes it: pid, data dir, start time, port, socket dir, listen address, shmem key, status.
    writeFileSync(
      join(clusterDir, "postmaster.pid"),
      [gone, clusterDir, "1700000000", "5432", clusterDir, "", "0 0", "ready   ", ""].join("\n"),
    )
    const server = await spawnServer(env)
    expect(await agentNames(server, key)).toEqual(["before-crash"])
    expect(postmasterPid()).not.toBe(gone)
    // A restart says where the first key went, and how to make another.
    await server.waitForStdout(/cannot be shown again/)
    expect(server.output()).toMatch(
      /showed its workspace key once; it is kept only as a\s+hash and cannot be shown again/,
    )
    expect(server.output()).toContain("npm run cli -- key create --workspace <ws_id>")
    expect(await stop(server)).toBe(0)
  })

  it("after kill -9 of the server alone, its postmaster shuts itself down and the next start serves", async () => {
    const crashed = await spawnServer(env)
    const pid = postmasterPid()
    await kill9(crashed)
    // by itself, before anything starts again
    const until = Date.now() + 60_000
    while (alive(pid) && Date.now() < until) await new Promise((r) => setTimeout(r, 50))
    expect(alive(pid)).toBe(false)
    const next = await spawnServer(env)
    expect(await agentNames(next, key)).toEqual(["before-crash"])
    expect(await stop(next)).toBe(0)
  })

  it("the CLI refuses while the server runs, and starts the cluster itself when it does not", async () => {
    const server = await spawnServer(env)
    const refused = await cli("workspace", "list")
    expect(refused.code).toBe(2)
    expect(refused.stderr).toBe(
      `agentgov: the data directory ${dataDir} is in use by process ${server.proc.pid}: stop it first, or set AGENTGOV_DATA_DIR\n`,
    )
    // a second server too, in one line, before it touches the cluster
    const second = await runToExit(env)
    expect(second.code).toBe(2)
    expect(second.stderr).toBe(refused.stderr)
    expect(await stop(server)).toBe(0)

    const listed = await cli("workspace", "list")
    expect(listed.code).toBe(0)
    expect(JSON.parse(listed.stdout).map((w: { name: string }) => w.name)).toContain("default")
    // and stopped it when done
    expect(existsSync(join(clusterDir, "postmaster.pid"))).toBe(false)
  })

  it("a lock left by a crash whose pid now belongs to another process is taken over", async () => {
    // as after a container restart: the dead server's pid given to something else (here a shell)
    const other = spawn("sleep", ["60"])
    try {
      for (const content of [String(other.pid), `${other.pid}\n1`]) {
        writeFileSync(join(dataDir, "agentgov.pid"), content)
        const server = await spawnServer(env)
        expect(await agentNames(server, key)).toEqual(["before-crash"])
        expect(await stop(server)).toBe(0)
      }
    } finally {
      other.kill("SIGKILL")
    }
  })

  /** A client that sends half a request and then nothing: what a slow or stuck client, or an attacker, does. */
  const halfRequest = async (server: ChildServer) => {
    const socket = connect(Number(new URL(server.url).port), "127.0.0.1")
    socket.on("error", () => {})
    await new Promise<void>((resolve) => socket.write("POST /api/v1/agents HTTP/1.1\r\nHost: x\r\n", () => resolve()))
    // answered once the server has read it: the request is in flight, not a connection waiting to be accepted
    await fetch(`${server.url}/healthz`)
    return socket
  }

  it("a SIGTERM stops the server although a client never finishes its request", { timeout: 90_000 }, async () => {
    const server = await spawnServer(env)
    const socket = await halfRequest(server)
    const pid = postmasterPid()
    expect(await stop(server)).toBe(0)
    expect(alive(pid)).toBe(false)
    expect(server.output()).toContain("requests still unfinished after the shutdown grace")
    socket.destroy()
  })

  it("a second signal ends a shutdown that waits", { timeout: 90_000 }, async () => {
    const server = await spawnServer(env)
    const socket = await halfRequest(server)
    server.proc.kill("SIGTERM")
    // the first signal landed: the shutdown has begun, and waits for the half-sent request
    while (!server.output().includes("shutting down")) await new Promise((r) => setTimeout(r, 20))
    server.proc.kill("SIGTERM")
    await server.exited
    expect(server.proc.exitCode).toBe(1)
    expect(server.output()).toContain("second signal: exiting without finishing the shutdown")
    socket.destroy()
  })

  it("when its embedded PostgreSQL dies, the server says so and exits; the next start serves", {
    timeout: 90_000,
  }, async () => {
    const server = await spawnServer(env)
    process.kill(postmasterPid(), "SIGKILL")
    await server.exited
    expect(server.proc.exitCode).toBe(1)
    expect(server.output()).toContain("the embedded PostgreSQL exited while the server ran: exiting")
    // its lock released: the next start takes the directory and recovers the cluster
    expect(existsSync(join(dataDir, "agentgov.pid"))).toBe(false)
    const next = await spawnServer(env)
    expect(await agentNames(next, key)).toEqual(["before-crash"])
    expect(await stop(next)).toBe(0)
  })
})
