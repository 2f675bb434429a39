import { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { OAuthService } from "../../src/index.ts"
import { EXPIRED_TOKENS_KEPT_MS, REFRESH_TOKEN_TTL_S } from "../../src/oauth/OAuthService.ts"
import { at, type DomainTestRuntime, makeDomainRuntime } from "../runtime.ts"
import { appOf, CALLBACK } from "./app.ts"

// The tokens of an app that stopped refreshing were deleted only at the grant's next refresh, which never came: the
// sweep deletes the access tokens and used refresh tokens that expired over a day ago, revoked grants' alike (refused
// at once, they go a day after they expire). Each grant's current refresh token stays, expired or not: the app
// revoking it ends the grant. The grants stay, listed while not revoked (TrustRecompute resolves the trail's `oauth`
// actors through them), and so do their codes. Live tokens, used refresh tokens not yet expired (reuse detection),
// tokens that expired within the day, and the tokens of a grant not yet marked exchanged (exchanged before migration
// 0037: its tokens tell the sweep of abandoned consents it acted, until that sweep marks it) stay.

let t: DomainTestRuntime
beforeAll(async () => {
  t = await makeDomainRuntime()
}, 60_000)
afterAll(() => t?.dispose())

const HOUR = 3_600_000

describe("OAuthService.purgeExpiredTokens", () => {
  it("deletes spent tokens a day after they expire, but live ones, a grant's current refresh token and an unmarked grant's", async () => {
    const { workspace, actor, client, auth, consent } = await appOf(t, "tokens")
    const oauth = <A, E>(f: (s: OAuthService["Service"]) => Effect.Effect<A, E>) => OAuthService.use(f)
    /** A consent at `ms` whose code the app exchanges a second later: the grant's id and its tokens. */
    const granted = async (ms: number) => {
      const { code } = await consent(ms)
      const tokens = await t.run(
        at(
          ms + 1_000,
          oauth((s) => s.exchangeCode(auth, { code, redirectUri: CALLBACK })),
        ),
      )
      const [grant] = await t.run(
        SqlClient.SqlClient.use(
          (sql) => sql<{ id: string }>`SELECT id FROM oauth_grants WHERE client_id = ${client.id}
              ORDER BY id DESC LIMIT 1`,
        ).pipe(Effect.orDie),
      )
      return { id: grant!.id, tokens }
    }
    const refresh = (ms: number, refreshToken: string) =>
      t.run(
        at(
          ms,
          oauth((s) => s.refresh(auth, { refreshToken })),
        ),
      )
    const rows = (grantId: string) =>
      t
        .run(
          SqlClient.SqlClient.use((sql) =>
            Effect.all({
              tokens: sql<{ n: number }>`SELECT count(*)::int AS n FROM oauth_tokens WHERE grant_id = ${grantId}`,
              codes: sql<{ n: number }>`SELECT count(*)::int AS n FROM oauth_codes WHERE grant_id = ${grantId}`,
              grants: sql<{ n: number }>`SELECT count(*)::int AS n FROM oauth_grants WHERE id = ${grantId}`,
            }),
          ).pipe(Effect.orDie),
        )
        .then((r) => ({ tokens: r.tokens[0]!.n, codes: r.codes[0]!.n, grants: r.grants[0]!.n }))
    const purge = (ms: number) =>
      t.run(
        at(
          ms,
          oauth((s) => s.purgeExpiredTokens),
        ),
      )

    const t0 = Date.now()
    // the sweep's time: a day after the last refresh token of `stopped` expired
    const sweepAt = t0 + 2 * HOUR + REFRESH_TOKEN_TTL_S * 1000 + EXPIRED_TOKENS_KEPT_MS + HOUR
    // refreshed once, two hours in, then never again: four tokens, every one expired over a day before the sweep
    const stopped = await granted(t0)
    const stoppedLast = await refresh(t0 + 2 * HOUR, stopped.tokens.refresh_token)
    // revoked three hours in: its two tokens, expired over a day before the sweep
    const revoked = await granted(t0 + 10_000)
    await t.run(
      at(
        t0 + 3 * HOUR,
        oauth((s) => s.revokeGrant(actor, revoked.id)),
      ),
    )
    // revoked two days before the sweep, an hour after its consent: its refresh token has 29 days to run
    const revokedLately = await granted(sweepAt - 2 * EXPIRED_TOKENS_KEPT_MS - HOUR)
    await t.run(
      at(
        sweepAt - 2 * EXPIRED_TOKENS_KEPT_MS,
        oauth((s) => s.revokeGrant(actor, revokedLately.id)),
      ),
    )
    // exchanged as `stopped` was, but before migration 0037: not marked, its tokens are how the sweep of abandoned
    // consents tells that it acted
    const unmarked = await granted(t0 + 20_000)
    await t.run(
      SqlClient.SqlClient.use((sql) => sql`UPDATE oauth_grants SET exchanged_at = NULL WHERE id = ${unmarked.id}`).pipe(
        Effect.orDie,
      ),
    )
    // in use: refreshed five minutes before the sweep, so its first refresh token is used but unexpired
    const live = await granted(sweepAt - HOUR)
    const rotated = await refresh(sweepAt - 5 * 60_000, live.tokens.refresh_token)
    // its access token expired within the day: kept, so that a late use is told it expired
    const recent = await granted(sweepAt - EXPIRED_TOKENS_KEPT_MS + HOUR)

    expect(await rows(stopped.id)).toEqual({ tokens: 4, codes: 1, grants: 1 })
    expect(await rows(revoked.id)).toEqual({ tokens: 2, codes: 1, grants: 1 })
    // stopped: its 2 access tokens and its used refresh token; revoked and revoked lately: their access tokens. Each
    // keeps its current refresh token.
    expect(await purge(sweepAt)).toBe(5)
    expect(await rows(stopped.id)).toEqual({ tokens: 1, codes: 1, grants: 1 })
    expect(await rows(revoked.id)).toEqual({ tokens: 1, codes: 1, grants: 1 })
    expect(await rows(revokedLately.id)).toEqual({ tokens: 1, codes: 1, grants: 1 })
    expect(await rows(unmarked.id)).toEqual({ tokens: 2, codes: 1, grants: 1 })
    expect(await rows(live.id)).toEqual({ tokens: 4, codes: 1, grants: 1 })
    expect(await rows(recent.id)).toEqual({ tokens: 2, codes: 1, grants: 1 })
    expect(await purge(sweepAt)).toBe(0)
    // the grants that acted are not taken for abandoned consents: the unmarked one is marked for its tokens
    expect(
      await t.run(
        at(
          sweepAt,
          oauth((s) => s.purgeAbandonedGrants),
        ),
      ),
    ).toBe(0)
    expect(await rows(stopped.id)).toEqual({ tokens: 1, codes: 1, grants: 1 })
    expect(await rows(unmarked.id)).toEqual({ tokens: 2, codes: 1, grants: 1 })
    // marked, its expired access token goes at the next run
    expect(await purge(sweepAt)).toBe(1)
    expect(await rows(unmarked.id)).toEqual({ tokens: 1, codes: 1, grants: 1 })
    // a grant that acted is still listed (until revoked) when it can no longer act: its person can revoke it
    const listed = await t.run(
      at(
        sweepAt,
        oauth((s) => s.listGrants(actor, { limit: 100 })),
      ),
    )
    const ids = listed.data.map((g) => g.id)
    expect(ids).toEqual(expect.arrayContaining([stopped.id, unmarked.id, live.id, recent.id]))
    expect(ids).not.toContain(revoked.id)
    const revokedReason = async (grantId: string) =>
      (
        await t.run(
          SqlClient.SqlClient.use(
            (sql) =>
              sql<{ revoked_reason: string | null }>`SELECT revoked_reason FROM oauth_grants WHERE id = ${grantId}`,
          ).pipe(Effect.orDie),
        )
      )[0]!.revoked_reason
    // Its last refresh token, kept, is refused as expired: no tokens, and no reuse detection (it was never used).
    const expired = await t.failure(
      at(
        sweepAt,
        oauth((s) => s.refresh(auth, { refreshToken: stoppedLast.refresh_token })),
      ),
    )
    expect(expired).toMatchObject({ _tag: "OAuthRefused", error: "invalid_grant" })
    expect(await revokedReason(stopped.id)).toBeNull()
    // Its app can end the grant with it, expired over a day before (RFC 7009), as its person can
    await t.run(
      at(
        sweepAt,
        oauth((s) => s.revoke(auth, stoppedLast.refresh_token)),
      ),
    )
    expect(await revokedReason(stopped.id)).toBe("revoked_by_client")

    // a deleted refresh token is refused as an expired one was
    const late = await t.failure(
      at(
        sweepAt,
        oauth((s) => s.refresh(auth, { refreshToken: stopped.tokens.refresh_token })),
      ),
    )
    expect(late).toMatchObject({ _tag: "OAuthRefused", error: "invalid_grant" })
    // the live grant's tokens act, and the reuse of its rotated refresh token is still caught
    expect(
      (
        await t.run(
          at(
            sweepAt,
            oauth((s) => s.authenticate(rotated.access_token)),
          ),
        )
      ).workspaceId,
    ).toBe(workspace.id)
    await t.failure(
      at(
        sweepAt,
        oauth((s) => s.refresh(auth, { refreshToken: live.tokens.refresh_token })),
      ),
    )
    expect(await revokedReason(live.id)).toBe("refresh_token_reused")
  })
})
