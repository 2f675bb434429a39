import { parseArgs } from "node:util"
import { migrate } from "@agentgov/db"
import {
  type Actor,
  AGENT_KEY_SCOPES,
  ApiKeyService,
  CreateApiKey,
  CreateWorkspace,
  canonicalScope,
  DomainLayer,
  escapeUnshowable,
  PeopleService,
  SCOPES,
  SigningKeys,
  systemActor,
  type Workspace,
  WorkspaceService,
} from "@agentgov/domain"
import { Cause, Effect, Exit, Layer, ManagedRuntime, type Schema, SchemaIssue } from "effect"
import * as SchemaParser from "effect/SchemaParser"
import { runBackupCommand } from "./backupCommand.ts"
import { CLI_SIGNIN_LINK_TTL_MS, signInLinkUrl } from "./bootstrap.ts"
import { configAndLock } from "./dataDirLock.ts"
import { admitMasterKey, chooseMasterKey, domainSettings } from "./domainSettings.ts"
import { refuse, refuseStart } from "./startupError.ts"
import { migratedAtStart, migratedStore, storeLayer, storeName } from "./store.ts"

const HELP = `agentgov operator CLI (uses DATABASE_URL, or the embedded store in AGENTGOV_DATA_DIR)

  npm run cli -- workspace create --name <name> [--environment live|test] [--plan free|pro|enterprise]
  npm run cli -- workspace list
  npm run cli -- key create --workspace <ws_id> --name <name> --scopes <a,b,...|all>
                            [--type workspace|agent] [--agent <agt_id>] [--expires-at <ISO 8601>]
                            all: every scope the key's type may hold, except workspaces:admin
                            (administers every workspace): name that one, e.g. --scopes all,workspaces:admin
  npm run cli -- signin-link [--workspace <ws_id>] [--email <owner's e-mail>]
                            a one-time dashboard sign-in link for the workspace's owner (1 h; replaces
                            any earlier unused link of theirs); --workspace may be left out with one workspace
  npm run cli -- signing-key list
  npm run cli -- signing-key rotate [--activate-in <seconds>]   (default 600)
  npm run cli -- migrate
  npm run cli -- backup <file>    a consistent snapshot, also while the server runs
  npm run cli -- restore <file>   into an empty store (a new AGENTGOV_DATA_DIR, or an empty DATABASE_URL); a file
                                  whose chains do not verify is refused (--unverified restores it, to examine it)

A new workspace's key holds every scope but workspaces:admin. Add --json for machine-readable output.
Keys are printed once and stored only as a hash.
With the embedded store, stop the server first: one process owns the data directory.
`

/**
 * How long a new signing key is published before it signs: longer than the
 * JWKS's Cache-Control max-age (300 s) plus an instance's key cache (60 s), so
 * every verifier that caches the JWKS has the key before the first token it signs.
 */
const DEFAULT_ACTIVATION_LEAD_SECONDS = 600

/** Arguments that are wrong: said in one line, exit 2 (REFUSED_EXIT_CODE), before the store is opened. */
const fail = refuse

/** Each command and the options it takes; any other option is refused before the store is opened. */
const COMMANDS: Record<string, ReadonlyArray<string>> = {
  migrate: [],
  "workspace create": ["name", "environment", "plan"],
  "workspace list": [],
  "key create": ["workspace", "name", "scopes", "type", "agent", "expires-at"],
  "signin-link": ["workspace", "email"],
  "signing-key list": [],
  "signing-key rotate": ["activate-in"],
}

const parsed = (() => {
  try {
    return parseArgs({
      allowPositionals: true,
      tokens: true,
      options: {
        name: { type: "string" },
        environment: { type: "string" },
        plan: { type: "string" },
        workspace: { type: "string" },
        email: { type: "string" },
        scopes: { type: "string" },
        type: { type: "string" },
        agent: { type: "string" },
        "expires-at": { type: "string" },
        "activate-in": { type: "string" },
        json: { type: "boolean" },
        unverified: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    })
  } catch (e) {
    // an unknown option, or one without its value: Node's message names it
    return fail(`${(e as Error).message} (npm run cli -- --help)`)
  }
})()
const { positionals, values } = parsed
// Node keeps the last of a repeated option: `--name a --name b` would act on b without a word.
const given = new Set<string>()
for (const token of parsed.tokens ?? [])
  if (token.kind === "option") {
    if (given.has(token.name)) fail(`--${token.name} is given twice`)
    given.add(token.name)
  }
const command = positionals.join(" ")
if (values.help || command === "" || command === "help") {
  process.stdout.write(HELP)
  process.exit(0)
}
if (positionals[0] === "backup" || positionals[0] === "restore") {
  for (const option of Object.keys(values))
    if (option !== "json" && !(option === "unverified" && positionals[0] === "restore"))
      fail(`--${option} does not apply to ${positionals[0]}`)
  await runBackupCommand(positionals[0], positionals.slice(1), values.json === true, values.unverified === true)
  process.exit(0)
}
const takes = COMMANDS[command] ?? fail(`unknown command "${command}" (npm run cli -- --help)`)
for (const option of Object.keys(values))
  if (option !== "json" && !takes.includes(option)) fail(`--${option} does not apply to ${command}`)

const formatIssue = SchemaIssue.makeFormatterStandardSchemaV1()
/** The input as the domain's own schema decodes it, or the first problem, named by its option. */
const decodeArgs = <A>(
  schema: Schema.Codec<A, unknown>,
  input: Record<string, unknown>,
  flags: Record<string, string>,
) => {
  const exit = SchemaParser.decodeUnknownExit(schema)(input, { errors: "all" })
  if (Exit.isSuccess(exit)) return exit.value
  const failure = exit.cause.reasons.find(Cause.isFailReason)
  const [issue] = failure ? (formatIssue(failure.error).issues ?? []) : []
  const field = String(issue?.path?.[0] ?? "")
  return fail(`${flags[field] ?? field}: ${issue?.message ?? "invalid"}`)
}

const operator = (workspaceId = "ws_operator", environment: "live" | "test" = "live"): Actor =>
  systemActor(workspaceId, environment, new Set(SCOPES))

const out = (json: unknown, human: string) =>
  process.stdout.write(values.json ? `${JSON.stringify(json, null, 2)}\n` : `${human}\n`)

/** The option a domain error's field came from (`scopes[1]` is `--scopes`), or the field as named. */
const optionOf = (field: string) =>
  ({
    agentId: "--agent",
    expiresAt: "--expires-at",
    scopes: "--scopes",
    name: "--name",
    type: "--type",
    email: "--email",
  })[field.replace(/\[.*$/, "")] ?? field

/** `--scopes`: `all` is every scope the key's type may hold except `workspaces:admin`, which is only given by name. */
const scopesOf = (raw: string, type: string): Array<string> =>
  raw
    .split(",")
    .map((s) => s.trim())
    .flatMap((s) =>
      s === "all" ? SCOPES.filter((x) => (type === "agent" ? AGENT_KEY_SCOPES.has(x) : x !== "workspaces:admin")) : [s],
    )

/** The command's work, built from arguments already checked: nothing here can refuse them. */
const task = (): Effect.Effect<void, unknown, Services> => {
  switch (command) {
    case "migrate":
      return Effect.gen(function* () {
        // The store came up migrated (migratedStore): what that applied, and anything since.
        const applied = [...migratedAtStart, ...(yield* migrate())]
        out({ applied }, applied.length ? `applied: ${applied.join(", ")}` : "nothing to apply")
      })
    case "workspace create": {
      const input = decodeArgs(
        CreateWorkspace,
        { name: values.name ?? "", environment: values.environment ?? "live", plan: values.plan ?? "free" },
        { name: "--name", environment: "--environment", plan: "--plan" },
      )
      return Effect.gen(function* () {
        const { workspace, apiKey } = yield* WorkspaceService.use((s) => s.create(null, input, "operator key"))
        out(
          { workspace, apiKey },
          `workspace ${workspace.id} (${escapeUnshowable(workspace.name)}, ${workspace.environment}, ${workspace.plan})\n` +
            `workspace key with every scope but workspaces:admin, shown once:\n\n  ${apiKey.apiKey}\n`,
        )
      })
    }
    case "workspace list":
      return Effect.gen(function* () {
        // Every workspace, page by page: not the first hundred.
        const all: Array<Workspace> = []
        let cursor: string | undefined
        do {
          const page = yield* WorkspaceService.use((s) => s.list(operator(), { limit: 100, cursor }))
          all.push(...page.data)
          cursor = page.meta.cursor ?? undefined
        } while (cursor !== undefined)
        out(
          all,
          all.map((w) => `${w.id}  ${w.environment}  ${w.plan}  ${escapeUnshowable(w.name)}`).join("\n") ||
            "no workspaces",
        )
      })
    case "key create": {
      if (!values.workspace) return fail("--workspace is required")
      const workspaceId = values.workspace
      const type = values.type ?? (values.agent ? "agent" : "workspace")
      const scopes = scopesOf(values.scopes ?? "", type)
      const unknown = scopes.filter((s) => s !== "" && canonicalScope(s) === undefined)
      if (unknown.length > 0) fail(`--scopes: unknown scope ${unknown.join(", ")}; known: ${SCOPES.join(", ")}, or all`)
      const input = decodeArgs(
        CreateApiKey,
        {
          name: values.name ?? "",
          type,
          scopes: [...new Set(scopes.filter((s) => s !== ""))],
          ...(values.agent ? { agentId: values.agent } : {}),
          ...(values["expires-at"] ? { expiresAt: values["expires-at"] } : {}),
        },
        { name: "--name", type: "--type", scopes: "--scopes", agentId: "--agent", expiresAt: "--expires-at" },
      )
      return Effect.gen(function* () {
        const workspace = yield* WorkspaceService.use((s) => s.get(operator(), workspaceId))
        const key = yield* ApiKeyService.use((s) => s.create(operator(workspace.id, workspace.environment), input))
        out(key, `key ${key.id} (${key.type}, ${key.scopes.join(" ")}), shown once:\n\n  ${key.apiKey}\n`)
      })
    }
    case "signin-link":
      return Effect.gen(function* () {
        let workspaceId = values.workspace
        if (workspaceId === undefined) {
          const page = yield* WorkspaceService.use((s) => s.list(operator(), { limit: 2 }))
          if (page.data.length !== 1)
            return yield* Effect.fail({
              _tag: "WorkspaceNotChosen",
              message: `${page.data.length === 0 ? "no workspace yet" : "several workspaces"}: name one with --workspace`,
            })
          workspaceId = page.data[0]!.id
        }
        const workspace = yield* WorkspaceService.use((s) => s.get(operator(), workspaceId))
        const made = yield* PeopleService.use((p) =>
          p.ownerSignInLink(operator(workspace.id, workspace.environment), workspace.id, {
            email: values.email,
            ttlMs: CLI_SIGNIN_LINK_TTL_MS,
          }),
        )
        const link = signInLinkUrl(config.publicUrl, made.token)
        out(
          { workspaceId: workspace.id, userId: made.userId, email: made.email, expiresAt: made.expiresAt, link },
          `one-time sign-in link for ${made.email}, owner of ${workspace.id}; works once, until ${made.expiresAt}:\n\n  ${link}\n`,
        )
      })
    case "signing-key list":
      return Effect.gen(function* () {
        const keys = yield* SigningKeys.use((k) => k.list)
        out(
          keys,
          keys
            .map((k) => `${k.kid}  ${k.state.padEnd(8)}  activates ${k.activatesAt}  retires ${k.retiresAt ?? "-"}`)
            .join("\n") || "no signing keys yet (the server makes one at start)",
        )
      })
    case "signing-key rotate": {
      const raw = values["activate-in"] ?? String(DEFAULT_ACTIVATION_LEAD_SECONDS)
      if (!/^\d+$/.test(raw) || Number(raw) > 30 * 86_400)
        return fail("--activate-in must be whole seconds, 0 to 2592000")
      return Effect.gen(function* () {
        const next = yield* SigningKeys.use((k) => k.rotate(Number(raw) * 1000))
        out(
          next,
          `signing key ${next.kid} published now; it signs from ${next.activatesAt}.\n` +
            "The keys before it stop signing then; their public parts stay in the JWKS, so tokens they signed\n" +
            "verify until they expire and signed checkpoints stay verifiable.",
        )
      })
    }
    default:
      return fail(`unknown command "${command}" (npm run cli -- --help)`)
  }
}
const program = task()

// Only now, with every argument checked, the store: configuration, the data directory, the database.
const { config, release } = configAndLock()
// As at the server's start: a store whose sealed secrets this key does not open is refused before any command
// runs, and a new installation's master.key is written only after that check.
const masterKey = (() => {
  try {
    return chooseMasterKey(config)
  } catch (e) {
    release()
    return refuseStart(e)
  }
})()
const layer = DomainLayer.pipe(
  Layer.provideMerge(
    Layer.merge(migratedStore(storeLayer(config), storeName(config)), domainSettings(config, masterKey.key)),
  ),
)
type Services = Layer.Success<typeof layer>
const runtime = ManagedRuntime.make(layer)

const exit = await runtime.runPromiseExit(Effect.andThen(admitMasterKey(config, masterKey), program))
await runtime.dispose()
release()
if (Exit.isFailure(exit)) {
  const failure = exit.cause.reasons.find(Cause.isFailReason)
  const error = failure?.error as
    | { _tag?: string; message?: string; field?: string; workspaceId?: string; agentId?: string }
    | undefined
  if (!failure) refuseStart(Cause.squash(exit.cause))
  // A not-found error carries the id and no message: say which record.
  const notFound =
    error?._tag === "WorkspaceNotFound"
      ? `workspace ${error.workspaceId} not found (npm run cli -- workspace list)`
      : error?._tag === "AgentNotFound"
        ? `agent ${error.agentId} not found in that workspace`
        : undefined
  fail(
    error
      ? `${error._tag}: ${error.field ? `${optionOf(error.field)}: ` : ""}${error.message || notFound || JSON.stringify(error)}`
      : Cause.pretty(exit.cause),
  )
}
