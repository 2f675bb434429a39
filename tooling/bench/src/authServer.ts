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
 * Prints one JSON line `{ports, token, oauthToken}` when listening: an SDK token, and an OAuth access token of
 * the same workspace (its bootstrap owner's grant to a confidential app, through the domain's code flow with PKCE,
 * as the server's /oauth routes drive it), both authenticated by the same Authenticator on the `token` ports.
 */
import { createHash, randomBytes } from "node:crypto"
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
  OAuthService,
  PeopleService,
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

// A workspace, its key, a token exchanged for it, and an OAuth access token of its owner's grant to an app.
const { token, oauthToken } = await limited.runPromise(
  Effect.gen(function* () {
    const { workspace, apiKey } = yield* WorkspaceService.use((s) =>
      s.create(null, { name: `bench-auth-${Date.now()}`, environment: "live", plan: "enterprise" }),
    )
    const actor = yield* Authenticator.use((a) => a.authenticate(apiKey.apiKey))
    const token = (yield* SdkTokens.use((t) => t.issue(actor))).token
    const owner = yield* PeopleService.use((p) => p.ensureBootstrapOwner(workspace.id))
    const redirectUri = "https://app.example.com/callback"
    const app = yield* OAuthService.use((o) =>
      o.createClient(actor, { name: "bench app", redirectUris: [redirectUri] }),
    )
    const codeVerifier = randomBytes(32).toString("base64url")
    const { code } = yield* OAuthService.use((o) =>
      o.approve(
        {
          responseType: "code",
          clientId: app.client.id,
          redirectUri,
          scope: "agents:read",
          state: "bench",
          codeChallenge: createHash("sha256").update(codeVerifier).digest("base64url"),
          codeChallengeMethod: "S256",
        },
        owner.id,
        false,
      ),
    )
    const tokens = yield* OAuthService.use((o) =>
      o.exchangeCode({ clientId: app.client.id, clientSecret: app.clientSecret }, { code, redirectUri, codeVerifier }),
    )
    return { token, oauthToken: tokens.access_token }
  }) as Effect.Effect<{ token: string; oauthToken: string }, unknown, never>,
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
process.stdout.write(`${JSON.stringify({ ports, token, oauthToken })}\n`)
