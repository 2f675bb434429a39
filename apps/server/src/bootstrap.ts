import { waitForLocks } from "@agentgov/db"
import { PeopleService, Sessions, WorkspaceService } from "@agentgov/domain"
import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"

const BOOTSTRAP_LOCK = 72_410_002

export interface BootstrapResult {
  readonly workspaceId: string
  readonly apiKey: string
  /** With no sign-in provider configured: a one-time link that signs the first owner in to the dashboard. */
  readonly signInLink?: string | undefined
}

/** How long the first-run link works. */
export const FIRST_RUN_LINK_TTL_MS = 24 * 3600_000
/** How long a link made later by `npm run cli -- signin-link` works: the operator is at hand, using it now. */
export const CLI_SIGNIN_LINK_TTL_MS = 3600_000

/** The dashboard address a one-time sign-in link token opens (`/auth/first-run`). */
export const signInLinkUrl = (publicUrl: string, token: string) =>
  `${publicUrl.replace(/\/$/, "")}/auth/first-run?token=${token}`

/**
 * First start against an empty store (decision D4): workspace `default` and one
 * workspace key with every scope, `workspaces:admin` included: the operator's key. Returns the key so that it is printed once;
 * on every later start, returns undefined.
 */
export const bootstrap = (options: { readonly publicUrl: string; readonly providers: number }) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const workspaces = yield* WorkspaceService
    // Instances starting together on one empty database: only the first creates.
    return yield* sql.withTransaction(
      Effect.gen(function* () {
        yield* waitForLocks(sql)
        yield* sql`SELECT pg_advisory_xact_lock(${BOOTSTRAP_LOCK})`
        if (!(yield* workspaces.isEmpty)) return undefined
        const { workspace, apiKey } = yield* workspaces.create(
          null,
          { name: "default", environment: "live" },
          "bootstrap key",
          { adminKey: true },
        )
        // No identity provider yet: the owner gets into the dashboard once through a link, then adds one.
        if (options.providers > 0) return { workspaceId: workspace.id, apiKey: apiKey.apiKey } satisfies BootstrapResult
        const owner = yield* PeopleService.use((p) => p.ensureBootstrapOwner(workspace.id))
        const token = yield* Sessions.use((s) => s.createSignInLink(owner.id, FIRST_RUN_LINK_TTL_MS))
        return {
          workspaceId: workspace.id,
          apiKey: apiKey.apiKey,
          signInLink: signInLinkUrl(options.publicUrl, token),
        } satisfies BootstrapResult
      }),
    )
  }).pipe(Effect.orDie)
