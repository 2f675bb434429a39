import { Effect, Layer } from "effect"
import { describe, expect, it, vi } from "vitest"
import { ApiKeyRepo, KEYS_CHANNEL, type StoredKey } from "../src/apikeys/ApiKeyRepo.ts"
import type { Actor } from "../src/auth/Actor.ts"
import { type CredentialEnd, CredentialWatch } from "../src/auth/CredentialWatch.ts"
import { OAuthService } from "../src/oauth/OAuthService.ts"
import { PeopleService } from "../src/people/PeopleService.ts"
import { Sessions } from "../src/people/Sessions.ts"
import { storelessDatabase } from "./runtime.ts"

type Row = StoredKey & { workspaceDeleted: boolean }

const key = (over: Partial<Row> = {}): Row => ({
  id: "key_1",
  workspaceId: "ws_1",
  name: "k",
  type: "workspace",
  agentId: null,
  environment: "live",
  scopes: ["events:read"],
  prefix: "p",
  hash: "h",
  status: "active",
  expiresAt: null,
  revokedAt: null,
  revokedReason: null,
  rotatedTo: null,
  lastUsedAt: null,
  createdAt: new Date(0).toISOString(),
  createdByUser: null,
  workspaceDeleted: false,
  ...over,
})

const actor: Actor = {
  workspaceId: "ws_1",
  environment: "live",
  credential: { type: "api_key", id: "key_1" },
  keyType: "workspace",
  scopes: new Set(),
}

/**
 * The watch over a store whose reads answer only when the test says so, and a
 * keys channel the test announces on: every step is the test's, none is timed.
 */
const setup = async () => {
  const reads: Array<(row: Row | undefined) => void> = []
  let announce: (keyId: string) => void = () => {}
  let missed: () => void = () => {}
  const repo = Layer.succeed(ApiKeyRepo)(
    ApiKeyRepo.of({
      findById: () => Effect.promise(() => new Promise<Row | undefined>((resolve) => reads.push(resolve))),
    } as unknown as ApiKeyRepo["Service"]),
  )
  const db = storelessDatabase(async (channel, onMessage, onMissed) => {
    expect(channel).toBe(KEYS_CHANNEL)
    announce = onMessage
    missed = onMissed ?? (() => {})
    return async () => {}
  })
  // OAuth tokens are watched through their grant (covered end to end in apps/server/test/oauth.test.ts).
  const noOAuth = Layer.succeed(OAuthService)({} as OAuthService["Service"])
  // Sessions likewise (apps/server/test/signin.test.ts: "event streams opened with the session cookie").
  const noSessions = Layer.mergeAll(
    Layer.succeed(Sessions)({} as Sessions["Service"]),
    Layer.succeed(PeopleService)({} as PeopleService["Service"]),
  )
  const watcher = await Effect.runPromise(
    Effect.scoped(
      CredentialWatch.useSync((w) => w).pipe(
        Effect.provide(CredentialWatch.layer.pipe(Layer.provide(Layer.mergeAll(repo, db, noOAuth, noSessions)))),
      ),
    ),
  )
  const ended: Array<CredentialEnd> = []
  let confirmed = 0
  const handle = watcher.watch(actor, "unused for an API key", {
    onEnd: (reason) => ended.push(reason),
    onConfirmed: () => {
      confirmed += 1
    },
  })
  const settle = () => new Promise((r) => setImmediate(r))
  /** Answers the oldest pending read. */
  const answer = async (row: Row | undefined) => {
    expect(reads.length, "a read is pending").toBeGreaterThan(0)
    reads.shift()!(row)
    await settle()
  }
  return {
    handle,
    ended,
    confirmed: () => confirmed,
    answer,
    announce: (id: string) => announce(id),
    missed: () => missed(),
    reads,
  }
}

describe("CredentialWatch", () => {
  it("holds the connection back from the announcement of its key until the store answers", async () => {
    const w = await setup()
    expect(w.handle.checking(), "checked once at the start").toBe(true)
    await w.answer(key())
    expect(w.handle.checking()).toBe(false)
    expect(w.confirmed()).toBe(1)
    w.announce("key_other")
    expect(w.handle.checking(), "another key's announcement is not this one's").toBe(false)
    w.announce("key_1")
    // At once, before any read returns: what is announced after it (events) waits for the verdict.
    expect(w.handle.checking()).toBe(true)
    await w.answer(key({ status: "revoked" }))
    expect(w.ended).toEqual(["revoked"])
  })

  it("reads again when an announcement comes during a read, which may predate the change", async () => {
    const w = await setup()
    w.announce("key_1")
    await w.answer(key())
    expect(w.confirmed(), "not confirmed on a read older than the announcement").toBe(0)
    await w.answer(key({ workspaceDeleted: true }))
    expect(w.ended).toEqual(["gone"])
  })

  it("checks every credential again when notices may have been missed, and fails closed", async () => {
    const w = await setup()
    await w.answer(key())
    w.missed()
    expect(w.handle.checking()).toBe(true)
    expect(w.reads).toHaveLength(1)
    w.reads.shift()!(Promise.reject(new Error("store down")) as never)
    await new Promise((r) => setImmediate(r))
    expect(w.ended).toEqual(["unverifiable"])
  })

  it("ends at the key's expiry, read at each check", async () => {
    const w = await setup()
    // 300 ms out: still live when answered, however slow the machine up to there.
    await w.answer(key({ expiresAt: new Date(Date.now() + 300).toISOString() }))
    expect(w.ended).toEqual([])
    await vi.waitFor(() => expect(w.ended).toEqual(["expired"]), { timeout: 10_000, interval: 20 })
  })

  it("stops: no callback after the connection closed", async () => {
    const w = await setup()
    w.handle.stop()
    await w.answer(key({ status: "revoked" }))
    w.announce("key_1")
    expect(w.reads).toHaveLength(0)
    expect(w.ended).toEqual([])
  })
})
