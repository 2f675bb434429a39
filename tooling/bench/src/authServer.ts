/**
 * Child process of the credential benchmarks (auth.ts): one cheap route,
 * `GET /v1/ping`, served by the real REST facade four ways, each on its own
 * port, over the benchmark's PostgreSQL database:
 *
 * - `open`: authenticated by nothing (the executor's credential check replaced by a fixed caller);
 * - `token`: an SDK token, verified once and then cached, with in-process rate-limit counters;
 * - `token-nolimit`: the same with rate limiting off;
 * - `token-redis`: the same with the counters in Redis (REDIS_URL).
 *
 * Prints one JSON line `{ports, token}` when listening.
 */
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { makeExecutor, makeRestHandler, type Operation, type Runtime, requestIdOf } from "@agentgov/api"
import { migrate, PostgresClient } from "@agentgov/db"
import {
  Authenticator,
  Counters,
  DEFAULT_RATE_LIMITS,
  DomainLayer,
  MasterKey,
  RateLimitSettings,
  SdkTokens,
  TokenSettings,
  WorkspaceService,
} from "@agentgov/domain"
import { Effect, Layer, ManagedRuntime, Schema } from "effect"

const databaseUrl = process.env.DATABASE_URL!
const redisUrl = process.env.REDIS_URL
const masterKey = Buffer.alloc(32, 7)
const unreachable = {
  ...DEFAULT_RATE_LIMITS,
  plans: { free: 1e9, pro: 1e9, enterprise: 1e9 },
  agent: 1e9,
  anonymous: 1e9,
}

const ping: Operation = {
  name: "bench.ping",
  method: "GET",
  path: "/ping",
  scope: null,
  tag: "Bench",
  summary: "ping",
  input: Schema.Struct({}),
  output: Schema.Struct({ pong: Schema.Boolean }),
  handler: () => Effect.succeed({ pong: true }),
} as unknown as Operation

const runtimeWith = (counters: Layer.Layer<Counters>, enabled: boolean): Runtime =>
  ManagedRuntime.make(
    DomainLayer.pipe(
      Layer.provideMerge(
        Layer.mergeAll(
          Layer.effectDiscard(migrate()).pipe(
            Layer.orDie,
            Layer.provideMerge(PostgresClient.layer({ url: databaseUrl })),
          ),
          MasterKey.layer(masterKey),
          TokenSettings.layer({ issuer: "http://bench", audience: "agentgov", ttlSeconds: 3600 }),
          RateLimitSettings.layer({ ...unreachable, enabled }),
          counters,
        ),
      ),
    ),
  ) as unknown as Runtime

const listen = async (handler: ReturnType<typeof makeRestHandler>) => {
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://local")
    void handler(req, res, url.pathname.replace(/^\/v1/, ""), url, requestIdOf(req))
  })
  server.keepAliveTimeout = 65_000
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
  return (server.address() as AddressInfo).port
}

const log = { error: (message: string, fields: Record<string, unknown>) => console.error(message, fields) }
const limited = runtimeWith(Counters.memory, true)

// A workspace, its key, and a token exchanged for it.
const token = await limited.runPromise(
  Effect.gen(function* () {
    const { apiKey } = yield* WorkspaceService.use((s) =>
      s.create(null, { name: `bench-auth-${Date.now()}`, environment: "live", plan: "enterprise" }),
    )
    const actor = yield* Authenticator.use((a) => a.authenticate(apiKey.apiKey))
    return (yield* SdkTokens.use((t) => t.issue(actor))).token
  }) as Effect.Effect<string, unknown, never>,
)
const fixedActor = await limited.runPromise(
  Authenticator.use((a) => a.authenticate(token)) as unknown as Effect.Effect<never>,
)

const real = (runtime: Runtime) => makeRestHandler({ operations: [ping], executor: makeExecutor(runtime, log) })
const open = (() => {
  const executor = makeExecutor(limited, log)
  const admitted = { result: { ok: true as const, value: fixedActor }, headers: {} }
  return makeRestHandler({ operations: [ping], executor: { ...executor, authenticate: async () => admitted } })
})()

const ports: Record<string, number> = {
  open: await listen(open),
  token: await listen(real(limited)),
  "token-nolimit": await listen(real(runtimeWith(Counters.memory, false))),
}
if (redisUrl) ports["token-redis"] = await listen(real(runtimeWith(Counters.redis(redisUrl), true)))
process.stdout.write(`${JSON.stringify({ ports, token })}\n`)
