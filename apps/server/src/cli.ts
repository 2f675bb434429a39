import { parseArgs } from "node:util"
import { migrate } from "@agentgov/db"
import {
  type Actor,
  ApiKeyService,
  DomainLayer,
  type Environment,
  type Plan,
  SCOPES,
  SigningKeys,
  systemActor,
  WorkspaceService,
} from "@agentgov/domain"
import { Cause, Effect, Exit, Layer, ManagedRuntime } from "effect"
import { ConfigError, loadConfig } from "./config.ts"
import { acquireDataDirLock } from "./dataDirLock.ts"
import { domainSettings } from "./domainSettings.ts"
import { migratedStore, storeLayer } from "./store.ts"

const HELP = `agentgov operator CLI (uses DATABASE_URL, or the embedded store in AGENTGOV_DATA_DIR)

  npm run cli -- workspace create --name <name> [--environment live|test] [--plan free|pro|enterprise]
  npm run cli -- workspace list
  npm run cli -- key create --workspace <ws_id> --name <name> --scopes <a,b,...|all>
                            [--type workspace|agent] [--agent <agt_id>] [--expires-at <ISO 8601>]
  npm run cli -- signing-key list
  npm run cli -- signing-key rotate [--activate-in <seconds>]   (default 600)
  npm run cli -- migrate

Add --json for machine-readable output. Keys are printed once and stored only as a hash.
With the embedded store, stop the server first: one process owns the data directory.
`

/**
 * How long a new signing key is published before it signs: longer than the
 * JWKS's Cache-Control max-age (300 s) plus an instance's key cache (60 s), so
 * every verifier that caches the JWKS has the key before the first token it signs.
 */
const DEFAULT_ACTIVATION_LEAD_SECONDS = 600

const fail = (message: string): never => {
  process.stderr.write(`agentgov: ${message}\n`)
  process.exit(2)
}

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    name: { type: "string" },
    environment: { type: "string" },
    plan: { type: "string" },
    workspace: { type: "string" },
    scopes: { type: "string" },
    type: { type: "string" },
    agent: { type: "string" },
    "expires-at": { type: "string" },
    "activate-in": { type: "string" },
    json: { type: "boolean" },
    help: { type: "boolean", short: "h" },
  },
})
const command = positionals.join(" ")
if (values.help || command === "" || command === "help") {
  process.stdout.write(HELP)
  process.exit(0)
}

let config: ReturnType<typeof loadConfig>
try {
  config = loadConfig()
} catch (e) {
  fail(e instanceof ConfigError ? e.message : String(e))
  throw e
}
const release = config.databaseUrl ? () => {} : acquireDataDirLock(config.dataDir)
const runtime = ManagedRuntime.make(
  DomainLayer.pipe(Layer.provideMerge(Layer.merge(migratedStore(storeLayer(config)), domainSettings(config)))),
)
const operator = (workspaceId = "ws_operator", environment: "live" | "test" = "live"): Actor =>
  systemActor(workspaceId, environment, new Set(SCOPES))

const out = (json: unknown, human: string) =>
  process.stdout.write(values.json ? `${JSON.stringify(json, null, 2)}\n` : `${human}\n`)

const program = Effect.gen(function* () {
  switch (command) {
    case "migrate": {
      const applied = yield* migrate()
      return out({ applied }, applied.length ? `applied: ${applied.join(", ")}` : "nothing to apply")
    }
    case "workspace create": {
      if (!values.name) return fail("--name is required")
      const environment = (values.environment ?? "live") as Environment
      if (!["live", "test"].includes(environment)) return fail("--environment must be live or test")
      const plan = (values.plan ?? "free") as Plan
      if (!["free", "pro", "enterprise"].includes(plan)) return fail("--plan must be free, pro or enterprise")
      const { workspace, apiKey } = yield* WorkspaceService.use((s) =>
        s.create(null, { name: values.name!, environment, plan }, "operator key"),
      )
      return out(
        { workspace, apiKey },
        `workspace ${workspace.id} (${workspace.name}, ${workspace.environment}, ${workspace.plan})\n` +
          `workspace key with every scope, shown once:\n\n  ${apiKey.apiKey}\n`,
      )
    }
    case "workspace list": {
      const page = yield* WorkspaceService.use((s) => s.list(operator(), { limit: 100 }))
      return out(
        page.data,
        page.data.map((w) => `${w.id}  ${w.environment}  ${w.plan}  ${w.name}`).join("\n") || "no workspaces",
      )
    }
    case "key create": {
      if (!values.workspace || !values.name || !values.scopes)
        return fail("--workspace, --name and --scopes are required")
      const workspace = yield* WorkspaceService.use((s) => s.get(operator(), values.workspace!))
      const type = (values.type ?? (values.agent ? "agent" : "workspace")) as "workspace" | "agent"
      if (type !== "workspace" && type !== "agent") return fail("--type must be workspace or agent")
      const scopes = values.scopes === "all" ? [...SCOPES] : values.scopes.split(",").map((s) => s.trim())
      const key = yield* ApiKeyService.use((s) =>
        s.create(operator(workspace.id, workspace.environment), {
          name: values.name!,
          type,
          scopes,
          ...(values.agent ? { agentId: values.agent } : {}),
          ...(values["expires-at"] ? { expiresAt: values["expires-at"] } : {}),
        }),
      )
      return out(key, `key ${key.id} (${key.type}, ${key.scopes.join(" ")}), shown once:\n\n  ${key.apiKey}\n`)
    }
    case "signing-key list": {
      const keys = yield* SigningKeys.use((k) => k.list)
      return out(
        keys,
        keys
          .map((k) => `${k.kid}  ${k.state.padEnd(8)}  activates ${k.activatesAt}  retires ${k.retiresAt ?? "-"}`)
          .join("\n") || "no signing keys yet (the server makes one at start)",
      )
    }
    case "signing-key rotate": {
      const raw = values["activate-in"] ?? String(DEFAULT_ACTIVATION_LEAD_SECONDS)
      if (!/^\d+$/.test(raw) || Number(raw) > 30 * 86_400)
        return fail("--activate-in must be whole seconds, 0 to 2592000")
      const next = yield* SigningKeys.use((k) => k.rotate(Number(raw) * 1000))
      return out(
        next,
        `signing key ${next.kid} published now; it signs from ${next.activatesAt}.\n` +
          "The keys before it stop signing then; their public parts stay in the JWKS, so tokens they signed\n" +
          "verify until they expire and signed checkpoints stay verifiable.",
      )
    }
    default:
      return fail(`unknown command "${command}"\n\n${HELP}`)
  }
})

const exit = await runtime.runPromiseExit(program)
await runtime.dispose()
release()
if (Exit.isFailure(exit)) {
  const failure = exit.cause.reasons.find(Cause.isFailReason)
  const error = failure?.error as { _tag?: string; message?: string; field?: string } | undefined
  fail(
    error
      ? `${error._tag}: ${error.field ? `${error.field}: ` : ""}${error.message ?? JSON.stringify(error)}`
      : Cause.pretty(exit.cause),
  )
}
