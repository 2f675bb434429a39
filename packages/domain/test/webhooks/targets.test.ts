import { describe, expect, it } from "vitest"
import { checkUrlSyntax, classifyAddress, judgeAddresses, parseAllowlist } from "../../src/webhooks/targets.ts"

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
