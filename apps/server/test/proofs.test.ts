import { spawnSync } from "node:child_process"
import { createPublicKey, verify } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
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
import { checkpointAll } from "../src/auditJobs.ts"
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
