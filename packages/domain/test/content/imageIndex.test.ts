import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { hamming, IMAGE_RADIUS } from "../../src/content/imageHash.ts"
import {
  IMAGE_LOAD_SQL,
  IMAGE_LOOKUP_SQL,
  type ImageQuery,
  imageCopySize,
  lookupImage,
} from "../../src/content/imageIndex.ts"

const rng = (seed: number) => {
  let s = seed >>> 0
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    return s / 2 ** 32
  }
}
const hex = (r: () => number) => Array.from({ length: 16 }, () => Math.floor(r() * 16).toString(16)).join("")
const flip = (h: string, bits: number, r: () => number) => {
  let b = BigInt(`0x${h}`)
  const chosen = new Set<number>()
  while (chosen.size < bits) chosen.add(Math.floor(r() * 64))
  for (const bit of chosen) b ^= 1n << BigInt(bit)
  return b.toString(16).padStart(16, "0")
}

interface Row {
  readonly seq: number
  readonly hash: string
  readonly contentId: string
  readonly workspaceId: string
  readonly xid: number
}

/**
 * `content_image_hashes` and the two statements of imageIndex.ts as PostgreSQL answers them, with transactions
 * that stay open across syncs: a row is visible once its transaction has committed; a statement's snapshot has
 * `xmax` the next transaction id and `xip` the open ones.
 */
class Table {
  rows: Array<Row> = []
  nextXid = 100
  nextSeq = 1
  open = new Set<number>()
  deleted = new Set<string>()
  statements: Array<string> = []

  begin() {
    const xid = this.nextXid++
    this.open.add(xid)
    return {
      insert: (workspaceId: string, contentId: string, hash: string) =>
        this.rows.push({ seq: this.nextSeq++, hash, contentId, workspaceId, xid }),
      commit: () => this.open.delete(xid),
    }
  }

  insert(workspaceId: string, contentId: string, hash: string) {
    const tx = this.begin()
    tx.insert(workspaceId, contentId, hash)
    tx.commit()
  }

  private visible() {
    return this.rows.filter((r) => !this.open.has(r.xid) && !this.deleted.has(r.contentId))
  }

  /** Every workspace here shares one tag, as colliding workspaces would. */
  readonly query: ImageQuery = (statement, params) =>
    Effect.sync(() => {
      this.statements.push(statement)
      if (statement === IMAGE_LOAD_SQL || statement === IMAGE_LOOKUP_SQL) {
        const [, after, chunk] = params as [unknown, string, number]
        const [workspaceId, xmax, xip, seqs, probe] = params as [
          string,
          string,
          ReadonlyArray<string>,
          ReadonlyArray<string>,
          string,
        ]
        const fresh =
          statement === IMAGE_LOAD_SQL
            ? this.visible()
                .filter((r) => r.seq > Number(after))
                .sort((a, b) => a.seq - b.seq)
                .slice(0, chunk)
            : this.visible().filter((r) => r.xid >= Number(xmax) || xip.includes(String(r.xid)))
        const packed = new Uint8Array(fresh.length * 16)
        const view = new DataView(packed.buffer)
        fresh.forEach((r, i) => {
          view.setBigInt64(i * 16, BigInt(r.seq))
          view.setBigUint64(i * 16 + 8, BigInt(`0x${r.hash}`))
        })
        const probeHex =
          statement === IMAGE_LOOKUP_SQL ? BigInt.asUintN(64, BigInt(probe)).toString(16).padStart(16, "0") : ""
        const found =
          statement === IMAGE_LOOKUP_SQL
            ? this.visible()
                .filter(
                  (r) =>
                    r.workspaceId === workspaceId &&
                    (seqs.includes(String(r.seq)) || (fresh.includes(r) && hamming(r.hash, probeHex) <= IMAGE_RADIUS)),
                )
                .map((r) => ({
                  seq: String(r.seq),
                  content_id: r.contentId,
                  mirror: false,
                  hash: BigInt.asIntN(64, BigInt(`0x${r.hash}`)).toString(),
                }))
            : undefined
        return [
          {
            xmax: String(this.nextXid),
            xip: [...this.open].map(String),
            count: fresh.length,
            last: fresh.length === 0 ? null : String(Math.max(...fresh.map((r) => r.seq))),
            packed,
            found,
          },
        ]
      }
      throw new Error(`unexpected statement ${statement.slice(0, 40)}`)
    })
}

let workspaces = 0
const newWorkspace = () => `ws_image_index_${++workspaces}_${Date.now()}`
const lookup = (table: Table, workspaceId: string, phash: string, chunk?: number) =>
  Effect.runPromise(lookupImage(table.query, workspaceId, phash, chunk))
const ids = (hits: ReadonlyArray<{ contentId: string }>) => hits.map((h) => h.contentId).sort()

describe("the image multi-index's copy in the process", () => {
  it("finds exactly the hashes within IMAGE_RADIUS a linear scan finds, read in chunks or at once", async () => {
    const r = rng(5)
    const table = new Table()
    const ws = newWorkspace()
    const stored = Array.from({ length: 5_000 }, () => hex(r))
    for (const [i, h] of stored.entries()) table.insert(ws, `cnt_${i}`, h)
    // Probes near stored hashes (0–14 bits away, so some fall just outside the radius) and random ones.
    const probes = Array.from({ length: 150 }, (_, i) =>
      i % 3 === 2 ? hex(r) : flip(stored[Math.floor(r() * stored.length)]!, Math.floor(r() * 15), r),
    )
    const chunked = newWorkspace()
    for (const [i, h] of stored.entries()) table.insert(chunked, `cnt_c${i}`, h)
    let near = 0
    for (const probe of probes) {
      const expected = stored.flatMap((h, i) => (hamming(h, probe) <= IMAGE_RADIUS ? [`cnt_${i}`] : [])).sort()
      near += expected.length
      const hits = await lookup(table, ws, probe)
      expect(ids(hits)).toEqual(expected)
      for (const h of hits) expect(h.distance).toBe(hamming(stored[Number(h.contentId.slice(4))]!, probe))
      expect(ids(await lookup(table, chunked, probe, 700))).toEqual(expected.map((id) => id.replace("_", "_c")).sort())
    }
    expect(near).toBeGreaterThan(50)
  })

  it("sees what other writers add between scans, rows whose transaction was still open, and forgets deleted items", async () => {
    const r = rng(9)
    const table = new Table()
    const ws = newWorkspace()
    for (let i = 0; i < 1_000; i++) table.insert(ws, `cnt_bulk${i}`, hex(r))
    const a = hex(r)
    table.insert(ws, "cnt_a", a)
    // A transaction that began before the first read and commits after it: its row is invisible to that read.
    const slow = table.begin()
    const late = hex(r)
    slow.insert(ws, "cnt_late", late)
    expect(ids(await lookup(table, ws, flip(a, 3, r)))).toEqual(["cnt_a"])
    expect(await lookup(table, ws, late)).toEqual([])
    slow.commit()
    expect(ids(await lookup(table, ws, flip(late, 2, r)))).toEqual(["cnt_late"])
    // Another server registers an image.
    const b = hex(r)
    table.insert(ws, "cnt_b", b)
    expect(ids(await lookup(table, ws, flip(b, 10, r)))).toEqual(["cnt_b"])
    // An item deleted: its rows are gone from the table, so the copy's entries for it are not answered.
    table.deleted.add("cnt_a")
    expect(await lookup(table, ws, a)).toEqual([])
    // Another workspace's rows under the same tag are met in the copy but not answered.
    const theirs = newWorkspace()
    table.insert(theirs, "cnt_theirs", b)
    table.statements = []
    expect(ids(await lookup(table, ws, b))).toEqual(["cnt_b"])
    expect(table.statements).toEqual([IMAGE_LOOKUP_SQL])
  })

  it("a row read by a later chunk of the first sync and again by the next sync counts once", async () => {
    const r = rng(13)
    const table = new Table()
    const ws = newWorkspace()
    for (let i = 0; i < 50; i++) table.insert(ws, `cnt_${i}`, hex(r))
    const open = table.begin()
    const h = hex(r)
    open.insert(ws, "cnt_slow", h)
    // Commit while the first sync is between its chunks: the next chunk sees the row, and so does the next sync
    // (its transaction was open at the first chunk's snapshot).
    let calls = 0
    const query: ImageQuery = (statement, params) =>
      table.query(statement, params).pipe(
        Effect.tap(() =>
          Effect.sync(() => {
            if (++calls === 1) open.commit()
          }),
        ),
      )
    const run = (probe: string) => Effect.runPromise(lookupImage(query, ws, probe, 10))
    expect(ids(await run(h))).toEqual(["cnt_slow"])
    expect(ids(await run(h))).toEqual(["cnt_slow"])
    expect(imageCopySize(ws)).toBe(51)
  })
})
