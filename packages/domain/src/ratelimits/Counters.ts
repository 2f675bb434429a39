import { Context, Effect, Layer } from "effect"
import type { Redis } from "ioredis"
import { InMemoryRateCounter, type RateCounter } from "../policies/engine/RateCounter.ts"
import { type HitStore, LEASE_SHARE, LeasedHits } from "./LeasedHits.ts"
import { type SyncCounts, type SyncEntry, SyncedRateCounter, type SyncStore } from "./SyncedRateCounter.ts"
import { admits, windowPosition } from "./slidingWindow.ts"

/** Redis (REDIS_URL) did not answer when the counters started; the message names its address, never a password. */
export class RedisUnreachable extends Error {
  constructor(url: string, cause: unknown) {
    const u = new URL(url)
    super(
      `Redis at ${u.hostname}:${u.port || "6379"} (REDIS_URL) does not answer: ${(cause as Error)?.message ?? String(cause)}`,
    )
  }
}

export interface LimitKey {
  /** Counter name, e.g. `ws:ws_…` or `key:key_…`; the window index is appended by the store. */
  readonly key: string
  readonly limit: number
}

export interface Counts {
  readonly previous: number
  /** Includes this request when it was admitted. */
  readonly current: number
}

export interface HitResult {
  readonly admitted: boolean
  /** One per limit, in the order given. */
  readonly counts: ReadonlyArray<Counts>
}

/**
 * Where the sliding-window counters live. `hit` is all-or-nothing (D10): the
 * request is admitted only if every limit admits it, and only then does every
 * counter move. `group` names the counters' owner (the workspace): a Redis
 * Cluster keeps one group's keys in one slot so that one script sees them all.
 * `rates` counts the policies' rate conditions and the throttles: in-process,
 * or shared through the same Redis (SyncedRateCounter).
 */
export class Counters extends Context.Service<
  Counters,
  {
    readonly hit: (
      group: string,
      limits: ReadonlyArray<LimitKey>,
      nowMs: number,
      windowMs: number,
    ) => Effect.Effect<HitResult>
    readonly kind: "memory" | "redis"
    /** `hit` outside any fiber, for the hot path: synchronous in-process, a promise from Redis. */
    readonly hitNow: (
      group: string,
      limits: ReadonlyArray<LimitKey>,
      nowMs: number,
      windowMs: number,
    ) => HitResult | Promise<HitResult>
    /** The guard's counters (rate conditions, throttles); synchronous, shared when Redis is. */
    readonly rates: RateCounter
  }
>()("@agentgov/domain/ratelimits/Counters") {
  /** In-process counters: one server instance, or tests. */
  static readonly memory = Layer.sync(Counters, () => {
    const hit = memoryCounters()
    return Counters.of({
      kind: "memory",
      hit: (group, limits, nowMs, windowMs) => Effect.sync(() => hit(group, limits, nowMs, windowMs)),
      hitNow: hit,
      rates: new InMemoryRateCounter(),
    })
  })

  /**
   * Counters shared by every instance through one Redis. A busy signature
   * admits from a reserve it took from Redis in one step (LeasedHits): the
   * limits hold across instances without a round trip per request. Other
   * checks a process makes in one turn of its event loop go as one Lua script
   * call per workspace. The guard's `rates` reconcile with the same Redis
   * every 100 ms instead (SyncedRateCounter), so that evaluation never waits.
   */
  static readonly redis = (url: string) =>
    Layer.effect(
      Counters,
      Effect.gen(function* () {
        const client = yield* Effect.acquireRelease(
          Effect.promise(async () => {
            // Loaded only when Redis is configured: an instance without it does not carry the client.
            const { Redis } = await import("ioredis")
            const client = new Redis(url, {
              lazyConnect: true,
              maxRetriesPerRequest: 2,
              commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
            })
            // Fail at start, not on the first request, when Redis is unreachable, saying why: ioredis's own
            // rejection ("Connection is closed") does not, and it logs each attempt as an unhandled error.
            let cause: unknown
            const remember = (e: unknown) => {
              cause ??= e
            }
            client.on("error", remember)
            try {
              await client.connect()
            } catch (e) {
              client.disconnect()
              throw new RedisUnreachable(url, cause ?? e)
            } finally {
              client.off("error", remember)
            }
            // Connected: while Redis is down, a command fails at once and its caller counts in-process, rather than
            // waiting in ioredis's offline queue through reconnect attempts (every request held 150 ms to seconds,
            // 10 s measured in the guard during an outage). The reconnect attempts themselves go on, warned about
            // once a minute instead of ioredis's console line each.
            client.options.enableOfflineQueue = false
            client.on("error", warnEveryMinute("Redis connection"))
            return client
          }),
          (client) => Effect.promise(() => client.quit().catch(() => client.disconnect())),
        )
        // Released before the client: what was counted since the last sync still goes out.
        const rates = yield* Effect.acquireRelease(
          Effect.sync(
            () => new SyncedRateCounter(redisRateStore(client), { onError: warnEveryMinute("rate conditions") }),
          ),
          (rates) => Effect.promise(() => rates.close()),
        )
        // Released first (finalizers run in reverse): unused reserves go back to Redis before the client quits.
        const leased = yield* Effect.acquireRelease(
          Effect.sync(
            () =>
              new LeasedHits(redisHitStore(client), {
                // Redis unreachable: keep limiting, per instance, rather than fail every request.
                fallback: memoryCounters(),
                onError: warnEveryMinute("rate-limit counters"),
              }),
          ),
          (leased) => Effect.promise(() => leased.close()),
        )
        const hitNow = (group: string, limits: ReadonlyArray<LimitKey>, nowMs: number, windowMs: number) =>
          leased.hit(group, limits, nowMs, windowMs)
        return Counters.of({
          kind: "redis",
          hit: (group, limits, nowMs, windowMs) =>
            Effect.suspend(() => {
              const result = hitNow(group, limits, nowMs, windowMs)
              return result instanceof Promise ? Effect.promise(() => result) : Effect.succeed(result)
            }),
          hitNow,
          rates,
        })
      }),
    )
}

/**
 * The longest a Redis command may take before its caller counts in-process instead: a Redis that accepts the
 * connection but does not answer (stopped, swapping, cut off without a reset) holds no request longer.
 */
export const REDIS_COMMAND_TIMEOUT_MS = 1_000

/** A Redis failure, warned about at most once a minute per use: the caller goes on counting in-process. */
const warnEveryMinute = (what: string) => {
  let warnedAt = 0
  return (cause: unknown) => {
    if (Date.now() - warnedAt < 60_000) return
    warnedAt = Date.now()
    process.emitWarning(`${what}: Redis failed (${String(cause)}); counting in-process`)
  }
}

/** A Lua script as a command of the client (sent by its SHA, loaded on first use), bound to it. */
const scriptCommand = (client: Redis, name: string, lua: string) => {
  client.defineCommand(name, { lua })
  return (client as unknown as Record<string, (...args: Array<string | number>) => Promise<Array<number>>>)[name]!.bind(
    client,
  )
}

/** SyncedRateCounter's store on one Redis: SYNC_SCRIPT, one call per sync (of up to its maxSyncEntries). */
export const redisRateStore = (client: Redis): SyncStore => {
  const sync = scriptCommand(client, "agentgovRateSync", SYNC_SCRIPT)
  return async (entries: ReadonlyArray<SyncEntry>): Promise<ReadonlyArray<SyncCounts>> => {
    const keys: Array<string> = []
    const args: Array<number> = []
    for (const e of entries) {
      keys.push(`agentgov:rc:${e.key}:${e.index}`, `agentgov:rc:${e.key}:${e.index - 1}`)
      args.push(e.delta, 2 * e.windowMs + 1_000)
    }
    const reply = await sync(keys.length, ...keys, ...args)
    return entries.map((_, i) => ({ current: Number(reply[2 * i]), previous: Number(reply[2 * i + 1]) }))
  }
}

/** LeasedHits' store on one Redis: HIT_SCRIPT, one call per group and turn of the event loop. */
export const redisHitStore = (client: Redis): HitStore => {
  const run = scriptCommand(client, "agentgovRateLimit", HIT_SCRIPT)
  return async (group, ops) => {
    // The hash tag {group} keeps a workspace's counters in one Cluster slot.
    const prefix = `agentgov:rl:{${group}}:`
    const keys: Array<string> = []
    const args: Array<number> = [ops.length]
    for (const op of ops) {
      if (op.kind === "take") {
        const { index, elapsed } = windowPosition(op.nowMs, op.windowMs)
        args.push(1, op.want, elapsed, op.windowMs, op.limits.length)
        for (const l of op.limits) keys.push(`${prefix}${l.key}:${index}`, `${prefix}${l.key}:${index - 1}`)
      } else {
        args.push(2, op.amount, 0, op.windowMs, op.limits.length)
        for (const l of op.limits) keys.push(`${prefix}${l.key}:${op.index}`, `${prefix}${l.key}:${op.index - 1}`)
      }
      for (const l of op.limits) args.push(l.limit)
    }
    const reply = await run(keys.length, ...keys, ...args)
    let at = 0
    return ops.map((op) => {
      const granted = Number(reply[at++])
      const counts: Array<Counts> = []
      for (let i = 0; i < op.limits.length; i++) {
        counts.push({ previous: Number(reply[at]), current: Number(reply[at + 1]) })
        at += 2
      }
      return { granted, counts }
    })
  }
}

/**
 * SyncedRateCounter's sync: per counter, adds the calls counted in one instance to its window's
 * count and answers that count and the previous window's.
 * KEYS: per counter, its window's key then the previous window's. ARGV: per counter, the calls to
 * add then the key's time to live in ms. Returns {current₁, previous₁, current₂, …}.
 */
const SYNC_SCRIPT = `
local reply = {}
for i = 1, #KEYS / 2 do
  local delta = tonumber(ARGV[2 * i - 1])
  local current
  if delta > 0 then
    current = redis.call('INCRBY', KEYS[2 * i - 1], delta)
    redis.call('PEXPIRE', KEYS[2 * i - 1], ARGV[2 * i])
  else
    current = tonumber(redis.call('GET', KEYS[2 * i - 1]) or '0')
  end
  reply[2 * i - 1] = current
  reply[2 * i] = tonumber(redis.call('GET', KEYS[2 * i]) or '0')
end
return reply
`

/**
 * LeasedHits' ops for one group, in order, each atomic (a later op sees the earlier ones' counts).
 * KEYS: per op and limit, the op's window's counter then the previous window's.
 * ARGV: the number of ops, then per op its kind (1 take, 2 give), want or amount, elapsed ms,
 * window ms, number of limits, and each limit.
 * A take admits c requests when every limit admits them all: `slidingWindow.ts`'s `admits` for
 * c, in the same integer arithmetic (c ≤ (limit·W − previous·(W − elapsed))/W − current). It grants
 * min(want, max(1, floor(c / LEASE_SHARE))) of the c that fit, 0 when none does, and counts them.
 * A give takes `amount` back from the op's window (never below zero; an expired counter stays gone).
 * Returns, per op, {granted, previous₁, current₁, previous₂, …}.
 */
const HIT_SCRIPT = `
local ops = tonumber(ARGV[1])
local a = 2
local k = 0
local reply = {}
for o = 1, ops do
  local kind = tonumber(ARGV[a])
  local want = tonumber(ARGV[a + 1])
  local elapsed = tonumber(ARGV[a + 2])
  local window = tonumber(ARGV[a + 3])
  local n = tonumber(ARGV[a + 4])
  a = a + 5
  local counts = {}
  local granted = 0
  if kind == 1 then
    local least = -1
    for i = 1, n do
      local current = tonumber(redis.call('GET', KEYS[k + 2 * i - 1]) or '0')
      local previous = tonumber(redis.call('GET', KEYS[k + 2 * i]) or '0')
      counts[2 * i - 1] = previous
      counts[2 * i] = current
      local room = tonumber(ARGV[a + i - 1]) * window - previous * (window - elapsed) - current * window
      local c = 0
      if room >= window then
        c = math.floor(room / window)
        if c * window > room then c = c - 1 end
      end
      if i == 1 or c < least then least = c end
    end
    if least >= 1 then
      granted = math.max(1, math.min(want, math.floor(least / ${LEASE_SHARE})))
      for i = 1, n do
        counts[2 * i] = redis.call('INCRBY', KEYS[k + 2 * i - 1], granted)
        redis.call('PEXPIRE', KEYS[k + 2 * i - 1], 2 * window + 1000)
      end
    end
  else
    for i = 1, n do
      local current = tonumber(redis.call('GET', KEYS[k + 2 * i - 1]) or '0')
      if current > 0 then current = redis.call('DECRBY', KEYS[k + 2 * i - 1], math.min(current, want)) end
      counts[2 * i - 1] = tonumber(redis.call('GET', KEYS[k + 2 * i]) or '0')
      counts[2 * i] = current
    end
  end
  reply[#reply + 1] = granted
  for i = 1, 2 * n do reply[#reply + 1] = counts[i] end
  k = k + 2 * n
  a = a + n
end
return reply
`

/** The in-process store: two counts per limit, forgotten once they are older than the previous window. */
const memoryCounters = () => {
  interface Cell {
    index: number
    current: number
    previous: number
  }
  const cells = new Map<string, Cell>()
  let sweptAt = 0
  // Drop stale counters once a window, so that a stream of distinct callers
  // (e.g. client addresses) cannot grow the map for ever.
  const sweep = (index: number) => {
    if (index === sweptAt) return
    sweptAt = index
    for (const [name, cell] of cells) if (cell.index < index - 1) cells.delete(name)
  }
  const read = (name: string, index: number): Cell => {
    let cell = cells.get(name)
    if (!cell) {
      cell = { index, current: 0, previous: 0 }
      cells.set(name, cell)
    } else if (cell.index !== index) {
      cell.previous = cell.index === index - 1 ? cell.current : 0
      cell.current = 0
      cell.index = index
    }
    return cell
  }
  return (group: string, limits: ReadonlyArray<LimitKey>, nowMs: number, windowMs: number): HitResult => {
    const { index, elapsed } = windowPosition(nowMs, windowMs)
    sweep(index)
    const row = limits.map((l) => read(`${group}|${l.key}`, index))
    const admitted = row.every((c, i) => admits(limits[i]!.limit, c.previous, c.current, elapsed, windowMs))
    if (admitted) for (const c of row) c.current++
    return { admitted, counts: row.map((c) => ({ previous: c.previous, current: c.current })) }
  }
}
