import { randomBytes } from "node:crypto"
import { sealedNotOpening } from "@agentgov/domain"
import { makeTestStore, pgConnect, type TestStore } from "@agentgov/testing"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { seal } from "../src/keys/sealed.ts"
import { secretAad } from "../src/webhooks/DeliveryQueue.ts"

/**
 * The start's check of the store's sealed secrets (apps/server refuses to start on a non-empty answer; its
 * process-level test: apps/server/test/startup.test.ts). Here each kind alone: a store holding only
 * webhooks (a store of a release before C2PA, started without its key) must be refused too.
 */

let store: TestStore
const made = randomBytes(32)
const check = (master: Buffer) => Effect.runPromise(sealedNotOpening(master).pipe(Effect.provide(store.layer)))

beforeAll(async () => {
  store = await makeTestStore()
})
afterAll(() => store?.cleanup())

describe("sealedNotOpening", () => {
  it("is empty for a store holding nothing sealed, whatever the key", async () => {
    expect(await check(randomBytes(32))).toEqual([])
  })

  it("names the webhook secrets another key sealed, and nothing for the key that sealed them", async () => {
    const sql = pgConnect(store.url)
    try {
      await sql`INSERT INTO workspaces (id, name, environment, created_at, updated_at)
        VALUES ('ws_sealed0000000000000000001', 'sealed', 'live', now(), now())`
      const id = "wh_sealed0000000000000000001"
      await sql`INSERT INTO webhooks (id, workspace_id, url, events, match_all, match_types, match_prefixes,
          retry_policy, enabled, secret, secret_hint, created_at, updated_at)
        VALUES (${id}, 'ws_sealed0000000000000000001', 'https://hooks.example.com/x', '["*"]', true, '[]', '[]',
          'exponential', true, ${seal(made, secretAad(id), randomBytes(32))}, 'whsec_…abcd', now(), now())`
    } finally {
      await sql.end()
    }
    expect(await check(made)).toEqual([])
    expect(await check(randomBytes(32))).toEqual(["the webhook secrets"])
  })
})
