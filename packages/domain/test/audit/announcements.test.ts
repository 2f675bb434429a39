import { afterEach, beforeEach, describe, expect, it, vi } from "vitest"
import { type AppendEnd, makeAnnouncements } from "../../src/audit/announcements.ts"

/** The announcer on fake timers and a clock the test moves; what it sent to other instances and told locally. */
const setup = (gapMs = 10, hooks: { local?: (p: string) => void; notify?: (p: string) => Promise<void> } = {}) => {
  let clock = 1_000
  const notified: Array<string> = []
  const local: Array<string> = []
  const a = makeAnnouncements({
    gapMs,
    notify: async (payload) => {
      notified.push(payload)
      await hooks.notify?.(payload)
    },
    local: (payload) => {
      local.push(payload)
      hooks.local?.(payload)
    },
    now: () => clock,
  })
  /** One append's statement: sent now, ended (written unless said otherwise) when the test says. */
  const append = (workspaceId: string, sequence: number, ended: AppendEnd = "written") => {
    const statement = a.begin(workspaceId)
    return {
      carried: statement.carried,
      end: () => a.end(workspaceId, statement, ended, `${workspaceId}:${sequence}`),
    }
  }
  const advance = async (ms: number) => {
    clock += ms
    await vi.advanceTimersByTimeAsync(ms)
  }
  return { a, append, advance, notified, local }
}

beforeEach(() => {
  vi.useFakeTimers()
})
afterEach(() => {
  vi.useRealTimers()
})

describe("announcements of direct appends", () => {
  it("carries the first append's NOTIFY in its statement, tells the rest locally, and sends the last a gap later", async () => {
    const t = setup()
    const first = t.append("ws_a", 1)
    expect(first.carried).toBe(true)
    first.end()
    // Carried by the statement: PostgreSQL tells every listener, this process's too.
    expect(t.local).toEqual([])
    for (let s = 2; s <= 4; s++) {
      await t.advance(2)
      const next = t.append("ws_a", s)
      expect(next.carried).toBe(false)
      next.end()
    }
    expect(t.local).toEqual(["ws_a:2", "ws_a:3", "ws_a:4"])
    expect(t.notified).toEqual([])
    // A gap after the first of them fell owed (at 2 ms), the last goes out on its own.
    await t.advance(5)
    expect(t.notified).toEqual([])
    await t.advance(1)
    expect(t.notified).toEqual(["ws_a:4"])
    // Nothing more is owed.
    await t.advance(100)
    expect(t.notified).toEqual(["ws_a:4"])
  })

  it("leaves the announcement to a statement in flight at the gap's end: a steady flow needs no NOTIFY of its own", async () => {
    const t = setup()
    t.append("ws_a", 1).end()
    let sequence = 1
    let carriedSince = 0
    for (let i = 0; i < 50; i++) {
      const next = t.append("ws_a", ++sequence)
      if (next.carried) carriedSince += 1
      // Each statement takes 3 ms, and the next is sent when it answers.
      await t.advance(3)
      next.end()
    }
    expect(t.notified).toEqual([])
    // Sent every 3 ms, the first sent 10 ms or more after the last carrier carries: one in four, 12 of the 50.
    expect(carriedSince).toBe(12)
    // The flow stops after a silent append: its announcement goes out on its own, once.
    expect(t.local.at(-1)).toBe(`ws_a:${sequence}`)
    await t.advance(20)
    expect(t.notified).toEqual([`ws_a:${sequence}`])
  })

  it("owes nothing once a statement carried the announcement: the silent appends before it are covered", async () => {
    const t = setup()
    t.append("ws_a", 1).end()
    await t.advance(2)
    // A slow statement, in flight past the gap's end.
    const slow = t.append("ws_a", 2)
    await t.advance(10)
    slow.end()
    const carrier = t.append("ws_a", 3)
    expect(carrier.carried).toBe(true)
    await t.advance(1)
    carrier.end()
    await t.advance(50)
    expect(t.local).toEqual(["ws_a:2"])
    expect(t.notified).toEqual([])
  })

  it("announces nothing for a statement that wrote nothing, and still what was owed before it", async () => {
    const t = setup()
    t.append("ws_a", 1).end()
    await t.advance(1)
    t.append("ws_a", 2).end()
    await t.advance(1)
    t.append("ws_a", 3, "nothing").end()
    expect(t.local).toEqual(["ws_a:2"])
    await t.advance(10)
    expect(t.notified).toEqual(["ws_a:2"])
  })

  it("keeps workspaces apart, and sends everything owed at once on flush", async () => {
    const t = setup(1_000)
    t.append("ws_a", 1).end()
    t.append("ws_b", 7).end()
    t.append("ws_a", 2).end()
    t.append("ws_b", 8).end()
    t.append("ws_b", 9).end()
    expect(t.local).toEqual(["ws_a:2", "ws_b:8", "ws_b:9"])
    expect(t.notified).toEqual([])
    await t.a.flush()
    expect(t.notified.sort()).toEqual(["ws_a:2", "ws_b:9"])
    await t.advance(2_000)
    expect(t.notified).toHaveLength(2)
  })

  it("keeps what was owed when a carrier wrote nothing", async () => {
    const t = setup()
    t.append("ws_a", 1).end()
    await t.advance(1)
    t.append("ws_a", 2).end()
    // The gap's timer, due at 11 ms, finds the carrier in flight and leaves it to it.
    await t.advance(9)
    const carrier = t.append("ws_a", 3, "nothing")
    expect(carrier.carried).toBe(true)
    await t.advance(2)
    expect(t.notified).toEqual([])
    carrier.end()
    await t.advance(10)
    expect(t.notified).toEqual(["ws_a:2"])
  })

  it("owes every instance, this one's LISTEN included, what a failed statement may have committed", async () => {
    const t = setup()
    t.append("ws_a", 1).end()
    await t.advance(1)
    t.append("ws_a", 2, "unknown").end()
    expect(t.local).toEqual([])
    await t.advance(10)
    expect(t.notified).toEqual(["ws_a:2"])
  })

  it("lets a carrier sent before a silent statement cover only what was owed before it was sent", async () => {
    const t = setup()
    t.append("ws_a", 1).end()
    await t.advance(10)
    const carrier = t.append("ws_a", 2)
    expect(carrier.carried).toBe(true)
    const silent = t.append("ws_a", 3)
    expect(silent.carried).toBe(false)
    // The later statement answers first.
    silent.end()
    carrier.end()
    await t.advance(20)
    expect(t.notified).toEqual(["ws_a:3"])
  })

  it("owes the others an append whose local listener threw, and survives a NOTIFY that fails", async () => {
    let failNotify = true
    const t = setup(10, {
      local: () => {
        throw new Error("a listener's own failure")
      },
      notify: async () => {
        if (failNotify) throw new Error("the store did not answer")
      },
    })
    t.append("ws_a", 1).end()
    await t.advance(1)
    t.append("ws_a", 2).end()
    await t.advance(10)
    // Tried once, failed, not retried (the feeds' sweep covers it); nothing was left unhandled.
    expect(t.notified).toEqual(["ws_a:2"])
    failNotify = false
    t.append("ws_a", 3).end()
    await t.advance(1)
    t.append("ws_a", 4).end()
    await t.advance(10)
    expect(t.notified).toEqual(["ws_a:2", "ws_a:4"])
  })

  it("owes what a carrier that failed may have committed", async () => {
    const t = setup()
    const carrier = t.append("ws_a", 1, "unknown")
    expect(carrier.carried).toBe(true)
    carrier.end()
    expect(t.local).toEqual([])
    await t.advance(10)
    expect(t.notified).toEqual(["ws_a:1"])
  })

  it("owes a statement that ends after flush sent a newer one's announcement", async () => {
    const t = setup()
    t.append("ws_a", 1).end()
    await t.advance(1)
    const older = t.append("ws_a", 2)
    const newer = t.append("ws_a", 3)
    newer.end()
    await t.a.flush()
    expect(t.notified).toEqual(["ws_a:3"])
    older.end()
    await t.advance(10)
    expect(t.notified).toEqual(["ws_a:3", "ws_a:2"])
  })
})
