import { describe, expect, it } from "vitest"
import {
  checkUrlSyntax,
  classifyAddress,
  judgeAddresses,
  limitLookups,
  parseAllowlist,
  type ResolvedAddress,
} from "../../src/webhooks/targets.ts"

describe("classifyAddress", () => {
  it.each([
    ["8.8.8.8", "public"],
    ["93.184.216.34", "public"],
    ["2606:4700::1111", "public"],
    ["::ffff:8.8.8.8", "public"],
    ["64:ff9b::808:808", "public"],
    ["127.0.0.1", "loopback"],
    ["127.255.0.9", "loopback"],
    ["::1", "loopback"],
    ["::ffff:127.0.0.1", "loopback"],
    ["0.0.0.0", "private"],
    ["10.0.0.1", "private"],
    ["172.31.255.255", "private"],
    ["192.168.0.1", "private"],
    ["100.64.0.1", "private"],
    ["100.100.100.200", "private"],
    ["169.254.169.254", "private"],
    ["fd00:ec2::254", "private"],
    ["fc00::1", "private"],
    ["fe80::1", "private"],
    ["::ffff:10.0.0.1", "private"],
    ["::ffff:169.254.169.254", "private"],
    ["64:ff9b::a9fe:a9fe", "private"],
    ["64:ff9b::127.0.0.1", "loopback"],
    ["::", "private"],
    ["224.0.0.1", "private"],
    ["255.255.255.255", "private"],
    ["2001:db8::1", "private"],
    ["not an ip", "private"],
  ])("%s is %s", (ip, kind) => {
    expect(classifyAddress(ip)).toBe(kind)
  })
})

describe("the allowlist and the judgement", () => {
  const strict = { allowlist: parseAllowlist([]).allowlist }
  const a4 = (address: string) => ({ address, family: 4 as const })

  it("parses CIDRs, addresses and host patterns, and names the entries it cannot read", () => {
    const { problems } = parseAllowlist(["10.0.0.0/8", "fd00::/8", "127.0.0.1", "hooks.internal", "*.corp.example"])
    expect(problems).toEqual([])
    expect(parseAllowlist(["10.0.0.0/33", "what ever", "::1/129", "1.2.3.4/x"]).problems).toHaveLength(4)
  })

  it("refuses a host when any of its addresses is not public", () => {
    expect(judgeAddresses(strict, "h.example", [a4("8.8.8.8")])).toEqual({ ok: true })
    const mixed = judgeAddresses(strict, "h.example", [a4("8.8.8.8"), a4("10.0.0.5")])
    expect(mixed).toEqual({ ok: false, issue: expect.stringContaining("h.example resolves to a private") })
    // The address itself is not told: the refusal must not answer questions about internal DNS.
    expect(mixed.ok === false && mixed.issue).not.toContain("10.0.0.5")
  })

  it("loopback is refused like any other non-public address unless the allowlist names it", () => {
    expect(judgeAddresses(strict, "127.0.0.1", [a4("127.0.0.1")]).ok).toBe(false)
    expect(judgeAddresses(strict, "localhost", [a4("127.0.0.1"), { address: "::1", family: 6 }]).ok).toBe(false)
    const loopback = { allowlist: parseAllowlist(["127.0.0.1", "::1"]).allowlist }
    expect(judgeAddresses(loopback, "localhost", [a4("127.0.0.1"), { address: "::1", family: 6 }]).ok).toBe(true)
    expect(judgeAddresses(loopback, "x", [a4("127.0.0.2")]).ok).toBe(false)
    expect(judgeAddresses(loopback, "x", [a4("10.0.0.1")]).ok).toBe(false)
    expect(judgeAddresses(loopback, "x", [a4("0.0.0.0")]).ok).toBe(false)
  })

  it("the operator's allowlist admits its CIDRs and host names", () => {
    const policy = { allowlist: parseAllowlist(["10.1.0.0/16", "*.corp.example", "hooks.internal"]).allowlist }
    expect(judgeAddresses(policy, "x", [a4("10.1.2.3")]).ok).toBe(true)
    expect(judgeAddresses(policy, "x", [a4("10.2.0.1")]).ok).toBe(false)
    expect(judgeAddresses(policy, "a.b.corp.example", [a4("10.9.9.9")]).ok).toBe(true)
    expect(judgeAddresses(policy, "corp.example.evil", [a4("10.9.9.9")]).ok).toBe(false)
    expect(judgeAddresses(policy, "hooks.internal", [a4("192.168.1.1")]).ok).toBe(true)
    expect(judgeAddresses(policy, "x.hooks.internal", [a4("192.168.1.1")]).ok).toBe(false)
  })

  it("URL syntax: absolute http(s), a host, no credentials", () => {
    expect("url" in checkUrlSyntax("https://example.com/hook?x=1")).toBe(true)
    for (const bad of [
      "/relative",
      "ftp://example.com",
      "file:///etc/passwd",
      "http://u:p@example.com",
      "http://u@example.com",
      "javascript:alert(1)",
    ])
      expect(checkUrlSyntax(bad)).toEqual({ issue: expect.any(String) })
  })
})

describe("limitLookups (the system resolver's bound on getaddrinfo)", () => {
  /** A lookup whose answers the test gives, one host at a time; counts the calls in flight. */
  const controlled = () => {
    const pending = new Map<string, Array<(a: ReadonlyArray<ResolvedAddress>) => void>>()
    let inFlight = 0
    let most = 0
    const calls: Array<string> = []
    const resolve = (host: string) =>
      new Promise<ReadonlyArray<ResolvedAddress>>((answer) => {
        calls.push(host)
        most = Math.max(most, ++inFlight)
        pending.set(host, [
          ...(pending.get(host) ?? []),
          (a) => {
            inFlight--
            answer(a)
          },
        ])
      })
    const answer = (host: string) => {
      for (const f of pending.get(host) ?? []) f([{ address: "93.184.216.34", family: 4 }])
      pending.delete(host)
    }
    return { resolve, answer, calls, most: () => most, inFlight: () => inFlight }
  }
  const settle = () => new Promise((r) => setImmediate(r))

  it("keeps at most two lookups in flight, whatever the hosts (slow names could hold every thread of libuv's pool)", async () => {
    const dns = controlled()
    const resolver = limitLookups(dns.resolve, 2)
    const answers = Array.from({ length: 6 }, (_, i) => resolver(`slow-${i}.attacker.example`))
    await settle()
    expect(dns.inFlight()).toBe(2)
    expect(dns.calls).toEqual(["slow-0.attacker.example", "slow-1.attacker.example"])
    // One answer lets the next in line go, in order.
    dns.answer("slow-0.attacker.example")
    await settle()
    expect(dns.calls.at(-1)).toBe("slow-2.attacker.example")
    for (let i = 1; i < 6; i++) {
      dns.answer(`slow-${i}.attacker.example`)
      await settle()
    }
    expect((await Promise.all(answers)).every((a) => a[0]!.address === "93.184.216.34")).toBe(true)
    expect(dns.most()).toBe(2)
    expect(dns.inFlight()).toBe(0)
  })

  it("shares one lookup among concurrent ones of the same host, and frees its turn when it fails", async () => {
    const dns = controlled()
    let failing = true
    const resolver = limitLookups(async (host) => {
      if (failing && host === "gone.example") throw Object.assign(new Error("queryA ENOTFOUND"), { code: "ENOTFOUND" })
      return dns.resolve(host)
    }, 1)
    await expect(resolver("gone.example")).rejects.toThrow(/ENOTFOUND/)
    failing = false
    const same = [resolver("hooks.example"), resolver("HOOKS.example"), resolver("hooks.example")]
    await settle()
    expect(dns.calls).toEqual(["hooks.example"])
    dns.answer("hooks.example")
    expect((await Promise.all(same)).length).toBe(3)
    // Answered: the next lookup of the host asks again.
    const again = resolver("hooks.example")
    await settle()
    expect(dns.calls).toEqual(["hooks.example", "hooks.example"])
    dns.answer("hooks.example")
    await again
  })

  it("one workspace's slow names hold at most one of the two turns: another workspace's lookup runs at once", async () => {
    const dns = controlled()
    const resolver = limitLookups(dns.resolve, 2, 50)
    // The attacker's webhooks at names of a slow authoritative server, many more than there are turns.
    const held = Array.from({ length: 5 }, (_, i) => resolver(`slow-${i}.attacker.example`, "ws_attacker"))
    // The attacker also names the victim's host: its lookup waits in the attacker's line, not shared with the victim's.
    const named = resolver("hooks.victim.example", "ws_attacker")
    const settled = Promise.allSettled([...held, named])
    await settle()
    expect(dns.calls).toEqual(["slow-0.attacker.example"])
    const victim = resolver("hooks.victim.example", "ws_victim")
    await settle()
    expect(dns.calls).toEqual(["slow-0.attacker.example", "hooks.victim.example"])
    dns.answer("hooks.victim.example")
    expect((await victim)[0]!.address).toBe("93.184.216.34")
    // The attacker's own line moves one at a time, in order; what waits past the bound fails without running.
    dns.answer("slow-0.attacker.example")
    await settle()
    expect(dns.calls.at(-1)).toBe("slow-1.attacker.example")
    expect(dns.most()).toBe(2)
    await expect(named).rejects.toMatchObject({ code: "ETIMEOUT" })
    dns.answer("slow-1.attacker.example")
    const results = await settled
    expect(results.map((r) => r.status)).toEqual([
      "fulfilled",
      "fulfilled",
      "rejected",
      "rejected",
      "rejected",
      "rejected",
    ])
    expect(dns.calls).toHaveLength(3)
  })

  it("fails a lookup that waited too long for its turn, without running it, so the line cannot grow without end", async () => {
    const dns = controlled()
    const resolver = limitLookups(dns.resolve, 1, 20)
    const held = resolver("slow.attacker.example")
    const late = resolver("hooks.example")
    await expect(late).rejects.toMatchObject({ code: "ETIMEOUT" })
    dns.answer("slow.attacker.example")
    await held
    expect(dns.calls).toEqual(["slow.attacker.example"])
    // The slot is free again: the next lookup runs at once.
    const next = resolver("hooks.example")
    await settle()
    expect(dns.calls).toEqual(["slow.attacker.example", "hooks.example"])
    dns.answer("hooks.example")
    await next
  })
})
