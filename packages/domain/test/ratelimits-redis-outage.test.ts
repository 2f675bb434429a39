import { type ChildProcess, spawn } from "node:child_process"
import { connect } from "node:net"
import { freePort } from "@agentgov/testing"
import { ManagedRuntime } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { Counters } from "../src/index.ts"

/**
 * A Redis of the test's own (`redis-server` on a free port), so that it can be stopped and killed: when the shared
 * counters' Redis stops answering or goes away, a request counts in-process (per instance, as documented) instead of
 * waiting for Redis. Runs where the suite runs against Redis (REDIS_URL set: the machine has `redis-server`).
 */
const accepts = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect({ host: "127.0.0.1", port })
    socket.once("connect", () => {
      socket.destroy()
      resolve(true)
    })
    socket.once("error", () => resolve(false))
  })

const startRedis = async (): Promise<{ child: ChildProcess; url: string }> => {
  const port = await freePort()
  const args = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
  const child = spawn("redis-server", args, { stdio: "ignore" })
  for (let i = 0; i < 100; i++) {
    if (await accepts(port)) return { child, url: `redis://127.0.0.1:${port}` }
    await new Promise((r) => setTimeout(r, 50))
  }
  child.kill("SIGKILL")
  throw new Error("redis-server did not start")
}

describe.runIf(process.env.REDIS_URL)("the rate-limit counters when their Redis fails", () => {
  let redis: ChildProcess | undefined
  afterEach(() => {
    redis?.kill("SIGCONT")
    redis?.kill("SIGKILL")
  })

  const limits = [{ key: `outage:${process.pid}:${Date.now()}`, limit: 1_000 }]
  const hits = (runtime: ManagedRuntime.ManagedRuntime<Counters, never>, n: number) =>
    Promise.all(
      Array.from({ length: n }, (_, i) =>
        runtime.runPromise(Counters.use((c) => c.hit("ws_outage", limits, Date.now() + i, 60_000))),
      ),
    )

  it("answers from in-process counting while Redis holds the connection open and never replies", async () => {
    const started = await startRedis()
    redis = started.child
    const runtime = ManagedRuntime.make(Counters.redis(started.url))
    try {
      expect((await hits(runtime, 1)).map((r) => r.admitted)).toEqual([true])
      // Stopped, not gone: the connection stays open and nothing answers (a Redis swapping, or cut off without a
      // reset). Before, ioredis waited for the reply for ever, and the request with it.
      redis.kill("SIGSTOP")
      expect((await hits(runtime, 3)).map((r) => r.admitted)).toEqual([true, true, true])
    } finally {
      redis.kill("SIGCONT")
      await runtime.dispose()
    }
  })

  it("answers from in-process counting while Redis is gone", async () => {
    const started = await startRedis()
    redis = started.child
    const runtime = ManagedRuntime.make(Counters.redis(started.url))
    try {
      expect((await hits(runtime, 1)).map((r) => r.admitted)).toEqual([true])
      const exited = new Promise((r) => redis!.once("exit", r))
      redis.kill("SIGKILL")
      await exited
      expect((await hits(runtime, 3)).map((r) => r.admitted)).toEqual([true, true, true])
    } finally {
      await runtime.dispose()
    }
  })
})
