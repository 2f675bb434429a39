import { type Actor, OAuthService, PeopleService, WorkspaceService } from "../../src/index.ts"
import { at, type DomainTestRuntime } from "../runtime.ts"

export const CALLBACK = "https://app.example/callback"

/**
 * A workspace of its own, its owner (and as an actor), and an OAuth client of theirs registered for {@link CALLBACK}
 * with `agents:read`: `auth` authenticates it, `consent(ms)` is the owner's consent at `ms` (no PKCE), whose code
 * the app may exchange.
 */
export const appOf = async (t: DomainTestRuntime, name: string) => {
  const { workspace } = await t.run(WorkspaceService.use((s) => s.create(null, { name, plan: "free" })))
  const owner = await t.run(PeopleService.use((s) => s.ensureBootstrapOwner(workspace.id)))
  const actor = (await t.run(
    PeopleService.use((s) => s.actorOf(owner.id, workspace.id, { type: "user", id: owner.id })),
  )) as Actor
  const { client, clientSecret } = await t.run(
    OAuthService.use((s) => s.createClient(actor, { name: "App", redirectUris: [CALLBACK], scopes: ["agents:read"] })),
  )
  const consent = (ms: number) =>
    t.run(
      at(
        ms,
        OAuthService.use((s) =>
          s.approve(
            {
              responseType: "code",
              clientId: client.id,
              redirectUri: CALLBACK,
              scope: "agents:read",
              state: "st",
              codeChallenge: undefined,
              codeChallengeMethod: undefined,
            },
            owner.id,
            false,
          ),
        ),
      ),
    )
  return { workspace, owner, actor, client, auth: { clientId: client.id, clientSecret }, consent }
}
