import { randomBytes } from "node:crypto"
import { Effect, Layer, ManagedRuntime } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { Counters, DEFAULT_RATE_LIMITS, RateLimiter, RateLimitSettings } from "../src/index.ts"
import { addressBucket } from "../src/ratelimits/RateLimiter.ts"
import { WorkspaceRepo } from "../src/workspaces/WorkspaceRepo.ts"

/**
 * The limit on requests without a usable credential is per client address (D10). An IPv6 host is given a /64 (RFC
 * 6177), so each of its 2^64 addresses having a bucket of its own would be no limit at all: IPv6 is counted by its
 * /64, IPv4 by its address, and an IPv4 client on a dual-stack socket (::ffff:a.b.c.d) as that IPv4 address.
 */

describe("addressBucket", () => {
  it("keys IPv6 by its /64 and IPv4 (also IPv4-mapped) by the address", () => {
    expect(addressBucket("2001:db8:1:2::1")).toBe(addressBucket("2001:db8:1:2:ffff:ffff:ffff:ffff"))
    expect(addressBucket("2001:db8:1:2::1")).toBe(addressBucket("2001:0DB8:0001:0002:0:0:0:9"))
    expect(addressBucket("2001:db8:1:2::1")).not.toBe(addressBucket("2001:db8:1:3::1"))
    expect(addressBucket("10.0.0.1")).toBe("10.0.0.1")
    expect(addressBucket("10.0.0.1")).not.toBe(addressBucket("10.0.0.2"))
    expect(addressBucket("::ffff:10.0.0.1")).toBe("10.0.0.1")
    expect(addressBucket("::ffff:a00:2")).toBe("10.0.0.2")
    expect(addressBucket("unknown")).toBe("unknown")
  })
})

const stores: Array<[string, Layer.Layer<Counters>]> = [["in-process", Counters.memory]]
if (process.env.REDIS_URL) stores.push(["Redis", Counters.redis(process.env.REDIS_URL)])

describe.each(stores)("the anonymous limit per client address (%s)", (_name, counters) => {
  const limiter = RateLimiter.layer.pipe(
    Layer.provide([
      RateLimitSettings.layer({ ...DEFAULT_RATE_LIMITS, anonymous: 4 }),
      counters,
      // Not read by the anonymous limit.
      Layer.succeed(WorkspaceRepo, {} as WorkspaceRepo["Service"]),
    ]),
  )
  const runtime = ManagedRuntime.make(limiter)
  afterAll(() => runtime.dispose())
  const admitted = async (address: string) => {
    const slow = (await runtime.runPromise(RateLimiter.use((r) => r.checkAnonymous(address))))?.admitted
    const now = await runtime.runPromise(RateLimiter.use((r) => Effect.succeed(r.checkAnonymousNow)))
    const verdict = now(address, Date.now())
    const fast = verdict === "off" ? undefined : (await verdict).admitted
    return [slow, fast]
  }
  /** A fresh /64 per run: the Redis counters outlive the test. */
  const prefix = () => `2001:db8:${randomBytes(2).toString("hex")}:${randomBytes(2).toString("hex")}`

  it("counts every address of one IPv6 /64 together, both on the hot path and off it", async () => {
    const net = prefix()
    expect(await admitted(`${net}::1`)).toEqual([true, true])
    expect(await admitted(`${net}::2`)).toEqual([true, true])
    // A third address of the same /64 is that host's fifth and sixth requests: refused (limit 4).
    expect(await admitted(`${net}:1:2:3:4`)).toEqual([false, false])
    // The next /64 is another host.
    const last = Number.parseInt(net.slice(net.lastIndexOf(":") + 1), 16)
    const other = `${net.slice(0, net.lastIndexOf(":"))}:${(last ^ 1).toString(16)}`
    expect(await admitted(`${other}::1`)).toEqual([true, true])
  })

  it("keeps one bucket per IPv4 address, an IPv4-mapped IPv6 address sharing its IPv4 address's", async () => {
    const [a, b] = [randomBytes(1)[0]!, randomBytes(1)[0]!]
    const v4 = `198.51.${a}.${b}`
    expect(await admitted(v4)).toEqual([true, true])
    expect(await admitted(`::ffff:${v4}`)).toEqual([true, true])
    expect(await admitted(v4)).toEqual([false, false])
    expect(await admitted(`198.51.${a}.${(b + 1) % 256}`)).toEqual([true, true])
  })
})
