import { createHmac, generateKeyPairSync, sign } from "node:crypto"
import { PostgresClient } from "@agentgov/db"
import { SigningKeys } from "@agentgov/domain"
import { BADGE_TYP, CERTIFICATION_JWS_TYPE, type Jwks, REPORT_JWS_TYPE, verifyBadge } from "@agentgov/verifier"
import type { Effect } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from "jose"
import postgres from "postgres"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startServer } from "../src/server.ts"
import { expectError, startTestServer, type TestServer, testConfig } from "./helpers.ts"

let t: TestServer
beforeAll(async () => {
  t = await startTestServer()
})
afterAll(async () => t?.close())

const ISSUER = "http://127.0.0.1"
const AUDIENCE = "agentgov"

const exchange = async (key: string) => {
  const res = await t.call("POST", "/api/v1/tokens", { key })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  return res.body.data as { token: string; expiresAt: string }
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url")
const parts = (token: string) => {
  const [h, p, s] = token.split(".") as [string, string, string]
  return {
    header: JSON.parse(Buffer.from(h, "base64url").toString()),
    claims: JSON.parse(Buffer.from(p, "base64url").toString()),
    signature: s,
  }
}

/** A token signed with the server's own current key, with claims of our choosing (for edge cases). */
const forge = async (claims: Record<string, unknown>, header: Record<string, unknown> = {}) => {
  const key = await t.server.runtime.runPromise(SigningKeys.use((k) => k.current))
  const input = `${b64({ alg: "EdDSA", typ: "JWT", kid: key.kid, ...header })}.${b64(claims)}`
  return `${input}.${sign(null, Buffer.from(input), key.privateKey).toString("base64url")}`
}

const events = (token: string) => t.call("GET", "/api/v1/events?limit=1", { key: token })

describe("POST /tokens", () => {
  it("issues a 900 s EdDSA token that jose verifies against the served JWKS with issuer and audience", async () => {
    const before = Date.now()
    const { token, expiresAt } = await exchange(t.key)
    expect(Date.parse(expiresAt) - before).toBeGreaterThan(895_000)
    expect(Date.parse(expiresAt) - before).toBeLessThanOrEqual(901_000)
    const jwks = createRemoteJWKSet(new URL(`${t.url}/.well-known/jwks.json`))
    const { payload, protectedHeader } = await jwtVerify(token, jwks, { issuer: ISSUER, audience: AUDIENCE })
    expect(protectedHeader.alg).toBe("EdDSA")
    expect(protectedHeader.kid).toMatch(/^key_/)
    expect(payload).toMatchObject({ workspaceId: t.workspaceId, environment: "live" })
    expect(payload.sub).toMatch(/^key_/)
    expect(payload.jti).toMatch(/^tok_/)
    expect(payload.exp! - payload.iat!).toBe(900)
    expect(payload.scopes).toContain("events:read")
    expect(payload.agentId).toBeUndefined()
  })

  it("authenticates requests with the key's scopes and agent binding", async () => {
    const { token } = await exchange(t.key)
    expect((await events(token)).status).toBe(200)
    const narrow = await t.createKey({ name: "agents only", type: "workspace", scopes: ["agents:read"] })
    const narrowToken = (await exchange(narrow)).token
    expect((await t.call("GET", "/api/v1/agents", { key: narrowToken })).status).toBe(200)
    expectError(await events(narrowToken), 403, "FORBIDDEN", "scope")

    const agent = await t.call("POST", "/api/v1/agents", { body: { name: `tok-${Date.now()}` } })
    const agentKey = await t.createKey({
      name: "agent",
      type: "agent",
      agentId: agent.body.data.id,
      scopes: ["events:write", "events:read"],
    })
    const agentToken = (await exchange(agentKey)).token
    expect(parts(agentToken).claims.agentId).toBe(agent.body.data.id)
    const ingest = await t.call("POST", "/api/v1/events/ingest", {
      key: agentToken,
      body: { events: [{ type: "tool.called", data: {} }] },
    })
    expect(ingest.status).toBe(201)
    const stored = await t.call("GET", `/api/v1/events/${ingest.body.data.events[0].id}`)
    expect(stored.body.data).toMatchObject({ agentId: agent.body.data.id, actor: { type: "sdk_token" } })
  })

  it("never says a token lives longer than its key: exp and expiresAt stop at the key's expiry or rotation", async () => {
    const keyExpiresAt = new Date(Date.now() + 120_000).toISOString()
    const created = await t.call("POST", "/api/v1/api-keys", {
      body: { name: "short-lived", type: "workspace", scopes: ["agents:read"], expiresAt: keyExpiresAt },
    })
    expect(created.status).toBe(201)
    const short = await exchange(created.body.data.apiKey)
    const keyExpirySeconds = Math.floor(Date.parse(keyExpiresAt) / 1000)
    expect(parts(short.token).claims.exp).toBe(keyExpirySeconds)
    expect(Date.parse(short.expiresAt)).toBe(keyExpirySeconds * 1000)
    expect((await t.call("GET", "/api/v1/agents", { key: short.token })).status).toBe(200)

    // A rotated key's overlap ends it: its tokens say so.
    const old = await t.call("POST", "/api/v1/api-keys", {
      body: { name: "rotating", type: "workspace", scopes: ["agents:read"] },
    })
    const rotated = await t.call("POST", `/api/v1/api-keys/${old.body.data.id}/rotate`, {
      body: { overlapSeconds: 60 },
    })
    expect(rotated.status).toBe(201)
    const graceEnd = Date.parse((await t.call("GET", `/api/v1/api-keys/${old.body.data.id}`)).body.data.expiresAt)
    const inGrace = await exchange(old.body.data.apiKey)
    expect(Date.parse(inGrace.expiresAt)).toBeLessThanOrEqual(graceEnd)
    expect(parts(inGrace.token).claims.exp).toBe(Math.floor(graceEnd / 1000))
  })

  it("is not minted from a token, and not without a credential", async () => {
    const { token } = await exchange(t.key)
    // The details name what is wrong (the credential sent), not an agent binding.
    expectError(await t.call("POST", "/api/v1/tokens", { key: token }), 403, "FORBIDDEN", "Authorization")
    expectError(await t.call("POST", "/api/v1/tokens", { key: null }), 401, "UNAUTHORIZED")
  })
})

describe("tokens the server refuses", () => {
  const valid = () => {
    const now = Math.floor(Date.now() / 1000)
    return {
      iss: ISSUER,
      aud: AUDIENCE,
      sub: "",
      jti: "tok_x",
      iat: now,
      nbf: now,
      exp: now + 600,
      workspaceId: t.workspaceId,
      environment: "live",
      scopes: ["events:read"],
    }
  }
  let keyId: string
  beforeAll(async () => {
    keyId = parts((await exchange(t.key)).token).claims.sub
  })

  it("accepts the forged-but-correctly-signed control token (so each refusal below is for its one flaw)", async () => {
    expect((await events(await forge({ ...valid(), sub: keyId }))).status).toBe(200)
  })

  it("refuses alg none", async () => {
    const token = `${b64({ alg: "none", typ: "JWT" })}.${b64({ ...valid(), sub: keyId })}.`
    expectError(await events(token), 401, "UNAUTHORIZED")
  })

  it("refuses an HS256 token whose secret is the server's public key", async () => {
    const jwks = (await (await fetch(`${t.url}/.well-known/jwks.json`)).json()) as {
      keys: Array<Record<string, string>>
    }
    const jwk = jwks.keys[0]!
    const input = `${b64({ alg: "HS256", typ: "JWT", kid: jwk.kid })}.${b64({ ...valid(), sub: keyId })}`
    for (const secret of [JSON.stringify(jwk), jwk.x!, Buffer.from(jwk.x!, "base64url")]) {
      const sig = createHmac("sha256", secret).update(input).digest("base64url")
      expectError(await events(`${input}.${sig}`), 401, "UNAUTHORIZED")
    }
  })

  it("refuses an unknown kid and a bad signature", async () => {
    const other = generateKeyPairSync("ed25519").privateKey
    const input = `${b64({ alg: "EdDSA", typ: "JWT", kid: "key_unknown" })}.${b64({ ...valid(), sub: keyId })}`
    expectError(
      await events(`${input}.${sign(null, Buffer.from(input), other).toString("base64url")}`),
      401,
      "UNAUTHORIZED",
    )
    const good = await forge({ ...valid(), sub: keyId })
    const { header } = parts(good)
    const reSigned = `${b64(header)}.${b64({ ...valid(), sub: keyId })}`
    expectError(
      await events(`${reSigned}.${sign(null, Buffer.from(reSigned), other).toString("base64url")}`),
      401,
      "UNAUTHORIZED",
    )
    const flipped = good.slice(0, -2) + (good.at(-2) === "A" ? "B" : "A") + good.at(-1)
    expectError(await events(flipped), 401, "UNAUTHORIZED")
  })

  it("refuses expired, not-yet-valid, wrong issuer and wrong audience", async () => {
    const now = Math.floor(Date.now() / 1000)
    for (const claims of [
      { ...valid(), sub: keyId, iat: now - 2000, nbf: now - 2000, exp: now - 60 },
      { ...valid(), sub: keyId, nbf: now + 600, exp: now + 1200 },
      { ...valid(), sub: keyId, iss: "https://evil.example" },
      { ...valid(), sub: keyId, aud: "someone-else" },
    ]) {
      const res = await events(await forge(claims))
      expectError(res, 401, "UNAUTHORIZED")
    }
  })

  it("refuses a lifetime longer than the service issues, and an iat in the future", async () => {
    const now = Math.floor(Date.now() / 1000)
    for (const claims of [
      { ...valid(), sub: keyId, iat: now, nbf: now, exp: now + 900 + 60 },
      { ...valid(), sub: keyId, iat: now - 10, nbf: now - 10, exp: now + 86_400 },
      { ...valid(), sub: keyId, iat: now + 300, nbf: now, exp: now + 600 },
    ]) {
      expectError(await events(await forge(claims)), 401, "UNAUTHORIZED")
    }
    // The longest lifetime the service issues is accepted.
    expect((await events(await forge({ ...valid(), sub: keyId, iat: now, nbf: now, exp: now + 900 }))).status).toBe(200)
  })

  it("refuses a JWS of another kind signed with the same keys, and an SDK token is no badge", async () => {
    // Badges, compliance reports and certifications are signed with the keys SDK tokens are: each names its kind in
    // `typ`, and only `JWT` is an SDK token. The claims here are a valid token's, so the typ alone is refused.
    for (const header of [
      { typ: BADGE_TYP },
      { typ: REPORT_JWS_TYPE },
      { typ: CERTIFICATION_JWS_TYPE },
      { typ: "jwt" },
      { typ: undefined },
    ]) {
      const res = await events(await forge({ ...valid(), sub: keyId }, header))
      expectError(res, 401, "UNAUTHORIZED")
      expect(res.body.error.message).toMatch(/typ/)
    }
    // Tokens have always been issued with typ JWT (as before the check), and they work.
    const { token } = await exchange(t.key)
    expect(parts(token).header.typ).toBe("JWT")
    expect((await events(token)).status).toBe(200)
    // The other way: a real SDK token is no badge.
    const jwks = (await (await fetch(`${t.url}/.well-known/jwks.json`)).json()) as Jwks
    expect(verifyBadge(token, jwks)).toMatchObject({ valid: false, reason: "malformed" })
  })

  it("acts with no scope its key does not hold, whatever the token claims", async () => {
    const created = await t.call("POST", "/api/v1/api-keys", {
      body: { name: "narrow", type: "workspace", scopes: ["events:read"] },
    })
    const token = await forge({ ...valid(), sub: created.body.data.id, scopes: ["events:read", "agents:write"] })
    expect((await events(token)).status).toBe(200)
    const res = await t.call("POST", "/api/v1/agents", { body: { name: "not-allowed" }, key: token })
    expectError(res, 403, "FORBIDDEN")
  })

  it("stops a token as soon as its API key is revoked, even after it was cached", async () => {
    const created = await t.call("POST", "/api/v1/api-keys", {
      body: { name: "to revoke", type: "workspace", scopes: ["events:read"] },
    })
    const { token } = await exchange(created.body.data.apiKey)
    expect((await events(token)).status).toBe(200)
    expect((await events(token)).status).toBe(200)
    expect((await t.call("DELETE", `/api/v1/api-keys/${created.body.data.id}`)).status).toBe(200)
    // The revocation is announced at commit; allow the notification a moment to arrive.
    let res = await events(token)
    for (let i = 0; i < 50 && res.status === 200; i++) {
      await new Promise((r) => setTimeout(r, 100))
      res = await events(token)
    }
    expectError(res, 401, "UNAUTHORIZED")
    expect(res.body.error.message).toMatch(/revoked/)
  })
})

describe("signing key rotation", () => {
  it("publishes the next key before it signs, then erases the old private part but keeps its public one", async () => {
    const before = await exchange(t.key)
    const oldKid = decodeProtectedHeader(before.token).kid!
    const run = <A>(effect: Effect.Effect<A, never, SigningKeys>) => t.server.runtime.runPromise(effect)
    // Five seconds before it signs: the checks of "not yet" below must all come before that on a loaded machine too.
    const next = await run(SigningKeys.use((k) => k.rotate(5_000)))
    const published = async () =>
      ((await (await fetch(`${t.url}/.well-known/jwks.json`)).json()) as { keys: Array<{ kid: string }> }).keys.map(
        (k) => k.kid,
      )
    // Published at once, not yet signing.
    expect(await published()).toContain(next.kid)
    expect(decodeProtectedHeader((await exchange(t.key)).token).kid).toBe(oldKid)
    expect((await run(SigningKeys.use((k) => k.list))).find((k) => k.kid === next.kid)?.state).toBe("pending")
    await new Promise((r) => setTimeout(r, Date.parse(next.activatesAt) - Date.now() + 50))
    const after = await exchange(t.key)
    expect(decodeProtectedHeader(after.token).kid).toBe(next.kid)

    // Its retirement is due a minute after the successor activates; nothing is erased before.
    expect(await run(SigningKeys.use((k) => k.retire))).toEqual([])
    await t.server.runtime.runPromise(
      SqlClient.SqlClient.use(
        (sql) => sql`UPDATE signing_keys SET retires_at = now() - interval '1 second' WHERE kid = ${oldKid}`,
      ),
    )
    expect(await run(SigningKeys.use((k) => k.retire))).toEqual([oldKid])
    const keys = await run(SigningKeys.use((k) => k.list))
    expect(keys.find((k) => k.kid === oldKid)?.state).toBe("retired")
    expect(keys.find((k) => k.kid === next.kid)?.state).toBe("active")
    const [row] = await t.server.runtime.runPromise(
      SqlClient.SqlClient.use(
        (sql) => sql<{ erased: boolean }>`SELECT private_key IS NULL AS erased FROM signing_keys WHERE kid = ${oldKid}`,
      ),
    )
    expect(row?.erased).toBe(true)
    // The old token still verifies until it expires: its public key is still published.
    expect(await published()).toContain(oldKid)
    expect((await events(before.token)).status).toBe(200)
    const remote = createRemoteJWKSet(new URL(`${t.url}/.well-known/jwks.json`))
    await expect(jwtVerify(before.token, remote, { issuer: ISSUER, audience: AUDIENCE })).resolves.toBeDefined()
    // The active key is never retired, even when asked again.
    expect(await run(SigningKeys.use((k) => k.retire))).toEqual([])
    expect(decodeProtectedHeader((await exchange(t.key)).token).kid).toBe(next.kid)
  })

  it("keeps old tokens valid and signs new ones with the new kid", async () => {
    const old = await exchange(t.key)
    const oldKid = decodeProtectedHeader(old.token).kid
    const rotated = await t.server.runtime.runPromise(SigningKeys.use((k) => k.rotate(0)))
    const jwks = (await (await fetch(`${t.url}/.well-known/jwks.json`)).json()) as { keys: Array<{ kid: string }> }
    expect(jwks.keys.map((k) => k.kid)).toEqual(expect.arrayContaining([oldKid, rotated.kid]))
    const fresh = await exchange(t.key)
    expect(decodeProtectedHeader(fresh.token).kid).toBe(rotated.kid)
    expect((await events(old.token)).status).toBe(200)
    expect((await events(fresh.token)).status).toBe(200)
    const remote = createRemoteJWKSet(new URL(`${t.url}/.well-known/jwks.json`))
    for (const token of [old.token, fresh.token]) {
      await expect(jwtVerify(token, remote, { issuer: ISSUER, audience: AUDIENCE })).resolves.toBeDefined()
    }
  })
})

describe.runIf(process.env.DATABASE_URL)("across server instances (PostgreSQL)", () => {
  /** A token cached on another instance, then its key revoked (by `revoke`): the other instance must refuse it within 5 s. */
  const revokedElsewhere = async (
    name: string,
    revoke: (keyId: string) => Promise<void> = async (keyId) => {
      expect((await t.call("DELETE", `/api/v1/api-keys/${keyId}`)).status).toBe(200)
    },
  ) => {
    const other = await startServer(testConfig({ bootstrap: false }), {
      store: PostgresClient.layer({ url: t.store.url! }),
    })
    try {
      const created = await t.call("POST", "/api/v1/api-keys", {
        body: { name, type: "workspace", scopes: ["events:read"] },
      })
      const { token } = await exchange(created.body.data.apiKey)
      const onOther = () =>
        fetch(`${other.url}/api/v1/events?limit=1`, { headers: { authorization: `Bearer ${token}` } })
      expect((await onOther()).status).toBe(200)
      expect((await onOther()).status, "now served from the other instance's cache").toBe(200)
      await revoke(created.body.data.id)
      const revokedAt = Date.now()
      let status = (await onOther()).status
      while (status === 200 && Date.now() - revokedAt < 5_000) {
        await new Promise((r) => setTimeout(r, 50))
        status = (await onOther()).status
      }
      expect(status).toBe(401)
      expect(Date.now() - revokedAt).toBeLessThan(5_000)
    } finally {
      await other.close()
    }
  }

  it("a key revoked on one instance stops its cached token on another within 5 s", async () => {
    await revokedElsewhere("revoked elsewhere")
  })

  it("and when the other instance's listening connection has just dropped, the revocation's notice lost", async () => {
    const admin = postgres(t.store.url!, { max: 1, onnotice: () => {} })
    try {
      await revokedElsewhere("revoked in a gap", async (keyId) => {
        // The key revoked with no notice at all (the service sends it, not a trigger), committed, then the
        // listening connections cut, as a database restart, a failover or a proxy's idle time-out does: their
        // drop must make every instance forget what it cached. Cut first, inside the revoking transaction, an
        // instance could read and cache the key again before the revocation committed, a flake under CI's load.
        await admin`UPDATE api_keys SET status = 'revoked', revoked_at = now() WHERE id = ${keyId}`
        const cut = await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE datname = current_database() AND application_name = 'agentgov-listen'`
        expect(cut.length, "both instances listen on a connection of their own").toBeGreaterThanOrEqual(2)
      })
    } finally {
      await admin.end()
    }
  })
})
