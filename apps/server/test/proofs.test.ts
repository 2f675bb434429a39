import { spawnSync } from "node:child_process"
import { createPublicKey, verify } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pgConnect } from "@agentgov/testing"
import {
  attributedLeaf,
  checkpointPayload,
  rootOf,
  verifyBundle,
  verifyConsistency,
  verifyInclusion,
} from "@agentgov/verifier"
import type * as SqlClient from "effect/sql/SqlClient"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { checkpointAll, VERIFY_LOCK, verifyAllChains } from "../src/auditJobs.ts"
import { expectError, startTestServer, type TestServer } from "./helpers.ts"

let t: TestServer
let dir: string
beforeAll(async () => {
  t = await startTestServer()
  dir = mkdtempSync(join(tmpdir(), "agentgov-proofs-"))
})
afterAll(async () => {
  await t?.close()
  rmSync(dir, { recursive: true, force: true })
})

const sql = <T = any>(run: (sql: SqlClient.SqlClient) => any): Promise<T> => t.query(run) as Promise<any>

const ingestMany = async (n: number, tag: string) => {
  for (let done = 0; done < n; done += 100) {
    const events = Array.from({ length: Math.min(100, n - done) }, (_, i) => ({
      type: "proof.test",
      data: { tag, n: done + i },
    }))
    const res = await t.call("POST", "/api/v1/events/ingest", { body: { events } })
    expect(res.status).toBe(201)
  }
}

/** Every event's Merkle leaf, oldest first, read through the API (a new workspace's leaves all cover attribution). */
const allLeaves = async (): Promise<Array<string>> => {
  const out: Array<string> = []
  let cursor: string | null = null
  do {
    const res: any = await t.call("GET", `/api/v1/events?limit=100${cursor ? `&cursor=${cursor}` : ""}`)
    for (const e of res.body.data) out.push(attributedLeaf(e))
    cursor = res.body.meta.cursor
  } while (cursor)
  return out.reverse()
}

const jwks = async () => (await fetch(`${t.url}/.well-known/jwks.json`)).json() as Promise<{ keys: Array<any> }>

describe("JWKS", () => {
  it("publishes the Ed25519 signing key as a plain JWKS at the well-known path and under the API prefixes", async () => {
    for (const path of ["/.well-known/jwks.json", "/api/v1/.well-known/jwks.json", "/v1/.well-known/jwks.json"]) {
      const res = await fetch(`${t.url}${path}`)
      expect(res.status, path).toBe(200)
      expect(res.headers.get("cache-control")).toMatch(/max-age=\d+/)
      const body = (await res.json()) as { keys: Array<Record<string, unknown>> }
      expect(body.keys.length).toBeGreaterThanOrEqual(1)
      for (const k of body.keys) {
        expect(k).toMatchObject({ kty: "OKP", crv: "Ed25519", alg: "EdDSA", use: "sig" })
        expect(k.kid).toMatch(/^key_/)
        expect(k.d, "never the private part").toBeUndefined()
      }
    }
    const post = await fetch(`${t.url}/.well-known/jwks.json`, { method: "POST" })
    expect(post.status).toBe(405)
  })
})

describe("checkpoints and proofs", () => {
  let first: any
  let second: any

  beforeAll(async () => {
    // Past one stored subtree (256 leaves) and then some, so stored nodes and leaf ranges both take part.
    await ingestMany(700, "a")
    first = (await t.call("GET", "/api/v1/events/checkpoint")).body.data
    await ingestMany(333, "b")
    second = (await t.call("GET", "/api/v1/events/checkpoint")).body.data
  })

  it("signs a checkpoint of the whole chain that anyone can check with the JWKS and their own hashing", async () => {
    const leaves = await allLeaves()
    const head = (await t.call("GET", "/api/v1/events?limit=1")).body.data[0]
    expect(second.treeSize).toBe(leaves.length)
    expect(second.headHash).toBe(head.hash)
    expect(second.rootHash).toBe(rootOf(leaves))
    expect(first.rootHash).toBe(rootOf(leaves.slice(0, first.treeSize)))
    const key = (await jwks()).keys.find((k) => k.kid === second.kid)
    const ok = verify(
      null,
      checkpointPayload(second),
      createPublicKey({ key: key, format: "jwk" }),
      Buffer.from(second.signature, "base64url"),
    )
    expect(ok).toBe(true)
    const again = (await t.call("GET", "/api/v1/events/checkpoint")).body.data
    expect(again, "no new checkpoint while the chain stands still").toEqual(second)
  })

  it("proves inclusion of events at block edges against a checkpoint, and a corrupted proof fails", async () => {
    const leaves = await allLeaves()
    for (const sequence of [1, 2, 255, 256, 257, 512, 513, first.treeSize, first.treeSize + 1, second.treeSize]) {
      const res = await t.call(
        "GET",
        `/api/v1/events/proofs/inclusion?sequence=${sequence}&treeSize=${second.treeSize}`,
      )
      expect(res.status, String(sequence)).toBe(200)
      const p = res.body.data
      expect(p).toMatchObject({ sequence, leafIndex: sequence - 1, treeSize: second.treeSize, attributedFrom: 1 })
      expect(p.checkpoint).toEqual(second)
      const leaf = leaves[sequence - 1]!
      expect(verifyInclusion(leaf, p.leafIndex, p.treeSize, p.path, second.rootHash)).toBe(true)
      if (p.path.length > 0) {
        const bad = [...p.path]
        bad[0] = (bad[0][0] === "0" ? "1" : "0") + bad[0].slice(1)
        expect(verifyInclusion(leaf, p.leafIndex, p.treeSize, bad, second.rootHash)).toBe(false)
      }
    }
    const old = await t.call("GET", `/api/v1/events/proofs/inclusion?sequence=300&treeSize=${first.treeSize}`)
    expect(verifyInclusion(leaves[299]!, 299, first.treeSize, old.body.data.path, first.rootHash)).toBe(true)
  })

  it("proves that the later checkpoint extends the earlier one", async () => {
    const res = await t.call("GET", `/api/v1/events/proofs/consistency?fromSize=${first.treeSize}`)
    expect(res.status).toBe(200)
    const p = res.body.data
    expect(p).toMatchObject({ fromSize: first.treeSize, fromRoot: first.rootHash, toSize: second.treeSize })
    expect(verifyConsistency(p.fromSize, p.toSize, first.rootHash, second.rootHash, p.path)).toBe(true)
    expect(verifyConsistency(p.fromSize, p.toSize, second.rootHash, second.rootHash, p.path)).toBe(false)
  })

  it("answers GET /events/:id with its inclusion proof on request", async () => {
    const list = await t.call("GET", "/api/v1/events?type=proof.test&limit=1")
    const id = list.body.data[0].id
    const plain = await t.call("GET", `/api/v1/events/${id}`)
    expect(plain.body.data.proof).toBeUndefined()
    const res = await t.call("GET", `/api/v1/events/${id}?proof=true`)
    expect(res.status).toBe(200)
    const { proof, ...event } = res.body.data
    expect(event).toEqual(plain.body.data)
    expect(
      verifyInclusion(attributedLeaf(event), event.sequence - 1, proof.treeSize, proof.path, proof.checkpoint.rootHash),
    ).toBe(true)
  })

  it("refuses proofs beyond the chain and unknown checkpoints", async () => {
    expectError(
      await t.call("GET", `/api/v1/events/proofs/inclusion?sequence=${second.treeSize + 10_000}`),
      422,
      "VALIDATION_ERROR",
      "sequence",
    )
    expectError(await t.call("GET", "/api/v1/events/proofs/inclusion?sequence=0"), 400, "BAD_REQUEST", "sequence")
    expectError(
      await t.call("GET", "/api/v1/events/proofs/inclusion?sequence=1&treeSize=3"),
      404,
      "CHECKPOINT_NOT_FOUND",
    )
    expectError(
      await t.call(
        "GET",
        `/api/v1/events/proofs/consistency?fromSize=${second.treeSize + 1}&toSize=${second.treeSize}`,
      ),
      422,
      "VALIDATION_ERROR",
      "fromSize",
    )
    expectError(await t.call("GET", "/api/v1/events/checkpoint", { key: null }), 401, "UNAUTHORIZED")
  })
})

describe("export bundles", () => {
  it("exports a range with a consistency proof that the standalone verifier accepts, with the key pinned", async () => {
    const before = (await t.call("GET", "/api/v1/events/checkpoint")).body.data
    await t.call("POST", "/api/v1/events/ingest", { body: { events: [{ type: "proof.test", data: { late: true } }] } })
    const res = await t.call(
      "GET",
      `/api/v1/events/export?fromSequence=250&toSequence=520&sinceTreeSize=${before.treeSize}`,
    )
    expect(res.status).toBe(200)
    const bundle = res.body.data
    expect(bundle.events).toHaveLength(271)
    expect(bundle.checkpoint.treeSize).toBe(before.treeSize + 1)
    const result = verifyBundle(bundle, { trustedJwks: await jwks() })
    expect(result.errors).toEqual([])
    expect(result).toMatchObject({
      valid: true,
      checked: 271,
      consistency: { fromSize: before.treeSize, fromRoot: before.rootHash },
    })

    const tampered = structuredClone(bundle)
    tampered.events[10].data = { forged: true }
    const bad = verifyBundle(tampered, { trustedJwks: await jwks() })
    expect(bad.valid).toBe(false)
    expect(bad.errors.some((e) => e.sequence === 260)).toBe(true)
  })

  it("is checked offline by the agentgov-verify command: exit 0 when intact, 1 when altered", async () => {
    const res = await t.call("GET", "/api/v1/events/export?toSequence=40")
    const file = join(dir, "bundle.json")
    writeFileSync(file, JSON.stringify(res.body.data))
    const cli = join(import.meta.dirname, "..", "..", "..", "packages", "verifier", "src", "cli.ts")
    const ok = spawnSync(process.execPath, [cli, file], { encoding: "utf8" })
    expect(ok.status, ok.stderr).toBe(0)
    expect(ok.stdout).toMatch(/OK/)
    const altered = structuredClone(res.body.data)
    altered.events[3].type = "proof.altered"
    writeFileSync(file, JSON.stringify(altered))
    const fail = spawnSync(process.execPath, [cli, file], { encoding: "utf8" })
    expect(fail.status).toBe(1)
  })

  it("makes a bundle that reveals tampering in the database itself", async () => {
    await sql(
      (s) =>
        s`UPDATE events SET data = '{"rewritten":true}'::jsonb WHERE workspace_id = ${t.workspaceId} AND sequence = 5`,
    )
    try {
      const res = await t.call("GET", "/api/v1/events/export?fromSequence=1&toSequence=10")
      const result = verifyBundle(res.body.data, { trustedJwks: await jwks() })
      expect(result.valid).toBe(false)
      expect(result.errors.some((e) => e.sequence === 5)).toBe(true)
    } finally {
      const [row] = await sql((s) => s`SELECT data FROM events WHERE workspace_id = ${t.workspaceId} AND sequence = 5`)
      expect(row).toBeDefined()
    }
  })

  it("refuses oversized ranges, inverted ranges and agent-bound credentials", async () => {
    expectError(await t.call("GET", "/api/v1/events/export?fromSequence=1&toSequence=10001"), 422, "VALIDATION_ERROR")
    expectError(
      await t.call("GET", "/api/v1/events/export?fromSequence=9&toSequence=3"),
      422,
      "VALIDATION_ERROR",
      "fromSequence",
    )
    // One end named: the bundle runs from it (to the head here, at most 10,000); past the chain names that end.
    const head = await t.chainLength()
    const fromOnly = await t.call("GET", `/api/v1/events/export?fromSequence=${head - 4}`)
    expect(fromOnly.status, JSON.stringify(fromOnly.body)).toBe(200)
    expect(fromOnly.body.data.events.map((e: { sequence: number }) => e.sequence)).toEqual(
      Array.from({ length: 5 }, (_, i) => head - 4 + i),
    )
    const beyond = await t.call("GET", `/api/v1/events/export?fromSequence=${head + 50}`)
    expectError(beyond, 422, "VALIDATION_ERROR", "fromSequence")
    expect(beyond.body.error.message).toContain(`which has ${head} events`)
    const agent = await t.call("POST", "/api/v1/agents", { body: { name: `exporter-${Date.now()}` } })
    const key = await t.createKey({
      name: "agent key",
      type: "agent",
      agentId: agent.body.data.id,
      scopes: ["events:read"],
    })
    expectError(await t.call("GET", "/api/v1/events/export", { key }), 403, "FORBIDDEN")
  })
})

describe("agent-bound credentials (outside review, 2026-11-29)", () => {
  it("prove their own agent's events only, may check consistency, and cannot export", async () => {
    const agent = async (name: string) =>
      (await t.call("POST", "/api/v1/agents", { body: { name: `${name}-${Date.now()}` } })).body.data.id as string
    const mine = await agent("prover")
    const other = await agent("other")
    const stored = await t.call("POST", "/api/v1/events/ingest", {
      body: {
        events: [
          { type: "proof.agent", agentId: mine, data: { n: 1 } },
          { type: "proof.agent", agentId: other, data: { n: 2 } },
          { type: "proof.agent", data: { n: 3 } },
        ],
      },
    })
    expect(stored.status).toBe(201)
    const [own, others, workspaceWide] = stored.body.data.events.map((e: { sequence: number }) => e.sequence)
    const key = await t.createKey({ name: "prover key", type: "agent", agentId: mine, scopes: ["events:read"] })

    const proof = await t.call("GET", `/api/v1/events/proofs/inclusion?sequence=${own}`, { key })
    expect(proof.status, JSON.stringify(proof.body)).toBe(200)
    const event = (await t.call("GET", `/api/v1/events/${stored.body.data.events[0].id}?proof=true`, { key })).body.data
    expect(
      verifyInclusion(
        attributedLeaf(event),
        own - 1,
        proof.body.data.treeSize,
        proof.body.data.path,
        proof.body.data.checkpoint.rootHash,
      ),
    ).toBe(true)
    // Another agent's event, and a workspace-wide one, are not this key's to prove (they are not its to read).
    for (const sequence of [others, workspaceWide]) {
      const res = await t.call("GET", `/api/v1/events/proofs/inclusion?sequence=${sequence}`, { key })
      expectError(res, 403, "FORBIDDEN", "agentId")
      const pinned = `/api/v1/events/proofs/inclusion?sequence=${sequence}&treeSize=${proof.body.data.treeSize}`
      expectError(await t.call("GET", pinned, { key }), 403, "FORBIDDEN", "agentId")
    }
    // The workspace's key still proves any event.
    expect((await t.call("GET", `/api/v1/events/proofs/inclusion?sequence=${others}`)).status).toBe(200)
    // A consistency proof is about the tree, not any event's data: an agent key may ask.
    const consistency = await t.call("GET", `/api/v1/events/proofs/consistency?fromSize=${own}`, { key })
    expect(consistency.status, JSON.stringify(consistency.body)).toBe(200)
    // An export holds every agent's events.
    expectError(await t.call("GET", "/api/v1/events/export", { key }), 403, "FORBIDDEN", "agentId")
  })
})

describe("concurrent exports (outside review, 2026-11-29)", () => {
  it("builds at most 2 at once per workspace and 4 in the process, refusing more with 429 and Retry-After", async () => {
    const workspace = async () => {
      const created = await t.call("POST", "/api/v1/workspaces", { body: { name: `exports-${Math.random()}` } })
      const key = created.body.data.apiKey.apiKey as string
      const res = await t.call("POST", "/api/v1/events/ingest", {
        key,
        body: { events: [{ type: "export.test", data: {} }] },
      })
      expect(res.status).toBe(201)
      return key
    }
    const [a, b, c] = [await workspace(), await workspace(), await workspace()]
    // Hold the checkpoints table, from outside the server's pool (which the exports fill): every export waits in its
    // first read of it, so they are all in flight at once.
    const holder = pgConnect(t.store.url)
    const watcher = pgConnect(t.store.url)
    let locked!: () => void
    let release!: () => void
    const isLocked = new Promise<void>((r) => (locked = r))
    const released = new Promise<void>((r) => (release = r))
    const holding = holder.begin(async (tx) => {
      await tx`LOCK TABLE checkpoints IN ACCESS EXCLUSIVE MODE`
      locked()
      await released
    })
    await isLocked
    try {
      let answered = 0
      const waiting = async () =>
        (
          await watcher<Array<{ n: number }>>`SELECT count(*)::int AS n FROM pg_stat_activity
              WHERE wait_event_type = 'Lock' AND datname = current_database()`
        )[0]!.n
      const exportAs = async (key: string) => {
        const res = await t.call("GET", "/api/v1/events/export", { key })
        answered += 1
        return res
      }
      // One at a time, each waiting or answered before the next, so which are refused is known: a's third (its
      // workspace's bound), then c's first (the process's).
      const calls: Array<ReturnType<typeof exportAs>> = []
      for (const key of [a, a, b, b, a, c]) {
        calls.push(exportAs(key))
        for (let i = 0; (await waiting()) + answered < calls.length; i++) {
          if (i > 1000) throw new Error(`export ${calls.length} neither waits nor was answered`)
          await new Promise((r) => setTimeout(r, 10))
        }
      }
      release()
      const res = await Promise.all(calls)
      expect(res.map((r) => r.status)).toEqual([200, 200, 200, 200, 429, 429])
      for (const refused of res.slice(4)) {
        expectError(refused, 429, "RATE_LIMITED")
        expect(refused.headers.get("retry-after")).toBe("5")
      }
      expect(res[4]!.body.error.message).toContain("this workspace")
      expect(res[5]!.body.error.message).toContain("the server")
      // The slots are given back: the next export is built.
      expect((await t.call("GET", "/api/v1/events/export", { key: c })).status).toBe(200)
    } finally {
      release()
      await holding
      await holder.end()
      await watcher.end()
    }
  })
})

describe("scheduled checkpoints", () => {
  it("signs one for every workspace whose chain grew, and nothing when none did", async () => {
    await t.call("POST", "/api/v1/events/ingest", { body: { events: [{ type: "proof.tick", data: {} }] } })
    const signed = await t.server.runtime.runPromise(checkpointAll)
    expect(signed).toBeGreaterThanOrEqual(1)
    expect(await t.server.runtime.runPromise(checkpointAll)).toBe(0)
    const [row] = await sql(
      (s) => s`SELECT max(tree_size)::int8 AS size FROM checkpoints WHERE workspace_id = ${t.workspaceId}`,
    )
    const head = await t.call("GET", "/api/v1/events?limit=1")
    expect(row.size).toBe(head.body.data[0].sequence)
  })
})

describe("a chain that no longer matches what was signed", () => {
  /** A workspace of its own, its key, and its chain grown to `size` events by ingest. */
  const workspaceOf = async (name: string, size: number, agentId?: (key: string) => Promise<string>) => {
    const created = await t.call("POST", "/api/v1/workspaces", { body: { name } })
    expect(created.status).toBe(201)
    const ws = created.body.data.workspace.id as string
    const key = created.body.data.apiKey.apiKey as string
    const agent = agentId ? await agentId(key) : undefined
    const missing = size - (await t.chainLength(ws))
    for (let done = 0; done < missing; done += 100) {
      const events = Array.from({ length: Math.min(100, missing - done) }, (_, i) => ({
        type: "proof.owned",
        ...(agent ? { agentId: agent } : {}),
        data: { n: done + i },
      }))
      expect((await t.call("POST", "/api/v1/events/ingest", { body: { events }, key })).status).toBe(201)
    }
    expect(await t.chainLength(ws)).toBe(size)
    return { ws, key }
  }
  const checkpointAt = async (key: string, size: number) => {
    const res = await t.call("GET", "/api/v1/events/checkpoint", { key })
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    expect(res.body.data.treeSize).toBe(size)
    return res.body.data
  }
  /** Deletes the events after `keep` and moves the chain head back to event `keep`, as an intruder would. */
  const cutTail = async (ws: string, keep: number) => {
    await sql((s) => s`DELETE FROM events WHERE workspace_id = ${ws} AND sequence > ${keep}`)
    await sql(
      (s) => s`UPDATE chain_heads SET sequence = ${keep},
          hash = (SELECT hash FROM events WHERE workspace_id = ${ws} AND sequence = ${keep}) WHERE workspace_id = ${ws}`,
    )
  }
  const raised = async (key: string) =>
    (await t.call("GET", "/api/v1/events?type=chain.invalid", { key })).body.data as Array<any>
  const signedSizes = async (ws: string) =>
    (await sql((s) => s`SELECT tree_size FROM checkpoints WHERE workspace_id = ${ws} ORDER BY tree_size`)).map(
      (r: { tree_size: number }) => Number(r.tree_size),
    )

  it("reports a cut tail as invalid at its first missing event, and refuses proofs and export with 409, not 500", async () => {
    const { ws, key } = await workspaceOf("cut-tail", 39)
    await checkpointAt(key, 39)
    await cutTail(ws, 37)

    const verdict = await t.call("POST", "/api/v1/events/verify", { body: {}, key })
    expect(verdict.status).toBe(200)
    expect(verdict.body.data).toMatchObject({ valid: false, checked: 37, firstBadSequence: 38 })
    expect(verdict.body.data.reason).toMatch(/checkpoint 39 signed events 1\.\.39/)

    // Raised once, as an event anyone reading the trail sees.
    const [alarm, ...more] = await raised(key)
    expect(more).toEqual([])
    expect(alarm).toMatchObject({
      sequence: 38,
      actor: { type: "system" },
      data: { trigger: "api", checked: 37, firstBadSequence: 38 },
    })

    for (const path of [
      "/api/v1/events/proofs/inclusion?sequence=5",
      "/api/v1/events/proofs/inclusion?sequence=5&treeSize=39",
      "/api/v1/events/proofs/consistency?fromSize=10",
      "/api/v1/events/export",
      "/api/v1/events/checkpoint",
    ]) {
      const res = await t.call("GET", path, { key })
      expectError(res, 409, "CHAIN_INCONSISTENT")
      expect(res.body.error.message, path).toMatch(/signed checkpoint 39/)
    }
    expect(await signedSizes(ws)).toEqual([39])
    // The 6-hourly verification finds it too (the alarm's own event has taken sequence 38 since).
    const scheduled = await t.server.runtime.runPromise(verifyAllChains)
    expect(scheduled.failed).toContainEqual({
      workspaceId: ws,
      firstBadSequence: 39,
      reason: expect.stringMatching(/checkpoint 39/),
    })
    // The same conflict found again is recorded and logged, not appended once more.
    expect(await raised(key)).toHaveLength(1)
    const rows = await sql(
      (s) => s`SELECT trigger, valid, first_bad_sequence FROM chain_verifications WHERE workspace_id = ${ws}`,
    )
    expect(rows.filter((r: any) => r.trigger === "checkpoint" && !r.valid).length).toBeGreaterThanOrEqual(1)
  })

  it("does not sign over a rewritten tail: the checkpointer records and raises the conflict instead", async () => {
    const { ws, key } = await workspaceOf("rewritten-tail", 37)
    await checkpointAt(key, 37)
    await t.call("POST", "/api/v1/events/ingest", {
      body: { events: [1, 2].map((n) => ({ type: "proof.owned", data: { original: n } })) },
      key,
    })
    const signed = await checkpointAt(key, 39)
    await cutTail(ws, 37)
    // New events take sequences 38..40: a chain of valid hashes whose first 39 leaves are not the signed ones.
    await t.call("POST", "/api/v1/events/ingest", {
      body: { events: [1, 2, 3].map((n) => ({ type: "proof.owned", data: { replaced: n } })) },
      key,
    })
    expect(await t.chainLength(ws)).toBe(40)

    await t.server.runtime.runPromise(checkpointAll)
    expect(await signedSizes(ws), "nothing signed over checkpoint 39").toEqual([37, 39])
    const [record] = await sql(
      (s) => s`SELECT trigger, valid, first_bad_sequence, reason FROM chain_verifications
          WHERE workspace_id = ${ws} ORDER BY verified_at DESC LIMIT 1`,
    )
    expect(record).toMatchObject({ trigger: "checkpoint", valid: false })
    expect(Number(record.first_bad_sequence)).toBe(38)
    expect(record.reason).toMatch(/checkpoint 39/)
    const [alarm] = await raised(key)
    expect(alarm).toMatchObject({ sequence: 41, data: { trigger: "checkpoint", firstBadSequence: 38 } })

    const verdict = await t.call("POST", "/api/v1/events/verify", { body: {}, key })
    expect(verdict.body.data).toMatchObject({ valid: false, firstBadSequence: 38 })
    expect(verdict.body.data.reason).toMatch(/not the one signed in checkpoint 39/)
    expectError(await t.call("GET", "/api/v1/events/proofs/inclusion?sequence=3", { key }), 409, "CHAIN_INCONSISTENT")
    expect((await t.call("GET", `/api/v1/events/proofs/consistency?fromSize=37&toSize=39`, { key })).status).toBe(409)
    // The checkpoint it signed stays what it was: still valid for anyone holding it.
    expect((await signedSizes(ws)).at(-1)).toBe(signed.treeSize)
  })

  it("does not sign events past its last checkpoint that do not chain (outside review, 2026-11-29)", async () => {
    const { ws, key } = await workspaceOf("unchained-tail", 20)
    await checkpointAt(key, 20)
    expect(
      (
        await t.call("POST", "/api/v1/events/ingest", {
          body: { events: Array.from({ length: 5 }, (_, i) => ({ type: "proof.owned", data: { late: i } })) },
          key,
        })
      ).status,
    ).toBe(201)
    // Event 22 forged in place, its hash recomputed over the forged data; 23 still links to the original 22.
    await sql(
      (s) => s`UPDATE events SET data = '{"late":999}'::json,
          hash = encode(sha256(convert_to(prev_hash || type || '{"late":999}' ||
            to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'UTF8')), 'hex')
          WHERE workspace_id = ${ws} AND sequence = 22`,
    )
    expect((await t.call("POST", "/api/v1/events/verify", { body: {}, key })).body.data).toMatchObject({
      valid: false,
      firstBadSequence: 23,
    })
    // Signing now would put the service's signature on the forged event 22: a bundle of that one event would verify.
    const res = await t.call("GET", "/api/v1/events/checkpoint", { key })
    expectError(res, 409, "CHAIN_INCONSISTENT")
    expect(res.body.error.message).toMatch(/event 23/)
    expectError(
      await t.call("GET", "/api/v1/events/export?fromSequence=22&toSequence=22", { key }),
      409,
      "CHAIN_INCONSISTENT",
    )
    await t.server.runtime.runPromise(checkpointAll)
    expect(await signedSizes(ws)).toEqual([20])
  })

  it("makes a changed agentId or actor of an ingested event fail verification and the offline verifier", async () => {
    const agents: Array<string> = []
    const { ws, key } = await workspaceOf("attribution", 300, async (k) => {
      for (const name of ["attributed-a", "attributed-b"]) {
        const res = await t.call("POST", "/api/v1/agents", { body: { name }, key: k })
        agents.push(res.body.data.id)
      }
      return agents[0]!
    })
    await checkpointAt(key, 300)
    const victim = 100
    const [before] = await sql(
      (s) => s`SELECT agent_id, actor_id FROM events WHERE workspace_id = ${ws} AND sequence = ${victim}`,
    )
    expect(before.agent_id).toBe(agents[0])
    expect((await t.call("POST", "/api/v1/events/verify", { body: {}, key })).body.data.valid).toBe(true)

    await sql((s) => s`UPDATE events SET agent_id = ${agents[1]} WHERE workspace_id = ${ws} AND sequence = ${victim}`)
    const verdict = await t.call("POST", "/api/v1/events/verify", { body: {}, key })
    // `checked` counts the events that verified before the break (it said 300 before 2026-11-29's review).
    expect(verdict.body.data).toMatchObject({ valid: false, firstBadSequence: 1, checked: 0 })
    expect(verdict.body.data.reason).toMatch(/checkpoint 300: an event in 1\.\.300 .*agentId/)
    // Inside a stored subtree the server's own check does not rehash it; the bundle's proof then fails offline.
    const exported = await t.call("GET", `/api/v1/events/export?fromSequence=95&toSequence=105`, { key })
    expect(exported.status).toBe(200)
    expect(exported.body.data.events[5]).toMatchObject({ sequence: victim, agentId: agents[1] })
    const offline = verifyBundle(exported.body.data, { trustedJwks: await jwks() })
    expect(offline.valid).toBe(false)
    // Its neighbours' proofs are hashed over its leaf too, so they fail with it; nothing else does.
    expect(offline.errors.map((e) => e.sequence)).toContain(victim)
    for (const e of offline.errors) expect(e.reason).toMatch(/inclusion proof does not verify/)

    // The actor too; and once restored, the chain verifies again: the failures were the tampering's doing.
    await sql(
      (s) => s`UPDATE events SET agent_id = ${before.agent_id} WHERE workspace_id = ${ws} AND sequence = ${victim}`,
    )
    await sql((s) => s`UPDATE events SET actor_id = 'key_forged' WHERE workspace_id = ${ws} AND sequence = ${victim}`)
    expect((await t.call("POST", "/api/v1/events/verify", { body: {}, key })).body.data.valid).toBe(false)
    await sql(
      (s) => s`UPDATE events SET actor_id = ${before.actor_id} WHERE workspace_id = ${ws} AND sequence = ${victim}`,
    )
    expect((await t.call("POST", "/api/v1/events/verify", { body: {}, key })).body.data).toMatchObject({ valid: true })
    const clean = await t.call("GET", `/api/v1/events/export?fromSequence=95&toSequence=105`, { key })
    expect(verifyBundle(clean.body.data, { trustedJwks: await jwks() })).toMatchObject({ valid: true, errors: [] })
  })
})

describe("the 6-hourly sweep of every chain (verifyAllChains)", () => {
  it("is done by one instance at a time, under a session's lock that it gives back", async () => {
    const other = pgConnect(t.store.url!)
    try {
      // Another instance in the middle of its sweep.
      await other`SELECT pg_advisory_lock(${VERIFY_LOCK})`
      expect(await t.server.runtime.runPromise(verifyAllChains)).toEqual({ skipped: true, checked: 0, failed: [] })
      await other`SELECT pg_advisory_unlock(${VERIFY_LOCK})`
      const swept = await t.server.runtime.runPromise(verifyAllChains)
      expect(swept.skipped).toBe(false)
      expect(swept.checked).toBeGreaterThan(0)
      // Given back when the sweep ended, not left with the pooled connection that held it.
      const [taken] = await other<Array<{ locked: boolean }>>`SELECT pg_try_advisory_lock(${VERIFY_LOCK}) AS locked`
      expect(taken!.locked).toBe(true)
      await other`SELECT pg_advisory_unlock(${VERIFY_LOCK})`
    } finally {
      await other.end()
    }
  })
})
