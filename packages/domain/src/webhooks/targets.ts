import { lookup } from "node:dns/promises"
import { BlockList, isIP } from "node:net"
import { ipv6Bytes } from "../shared/ipAddress.ts"

/**
 * Where webhooks may point (SSRF protection). Public addresses always, and
 * what the operator's allowlist names. Everything else — loopback, private,
 * link-local, CGNAT, unique-local, documentation, multicast, IPv4-mapped or
 * NAT64 forms of those, cloud metadata addresses — is refused, at
 * registration and again at each delivery after DNS resolution, whatever the
 * workspace's environment or the store: only the operator decides which of
 * their own services a workspace's webhooks may reach.
 */
export interface TargetPolicy {
  readonly allowlist: Allowlist
}

export interface Allowlist {
  readonly addresses: BlockList
  /** Lowercase host names; `.corp.example` (from `*.corp.example`) matches every name under it. */
  readonly hosts: ReadonlyArray<string>
}

export interface ResolvedAddress {
  readonly address: string
  readonly family: 4 | 6
}

/**
 * Resolves a host name to every address it has (the DNS of `lookup`, or a test's own). `group` is who asks (the
 * workspace whose webhook it is): `limitLookups` shares its turns among groups.
 */
export type Resolver = (host: string, group?: string) => Promise<ReadonlyArray<ResolvedAddress>>

/** getaddrinfo calls for webhooks at once: libuv's pool has 4 threads, shared with files, crypto and zlib. */
export const MAX_CONCURRENT_LOOKUPS = 2
/** How long a lookup waits for its turn before it fails: no attempt waits longer than its own time-out anyway. */
export const LOOKUP_WAIT_MS = 10_000

/**
 * `resolve` with at most `max` calls in flight, the rest waiting their turn (for at most `maxWaitMs`, then failing
 * with `ETIMEOUT` without having run), and one group's concurrent lookups of one host sharing one call. `dns.lookup` is
 * getaddrinfo on libuv's thread pool, and a lookup that waits for a slow authoritative server holds its thread until
 * the resolver gives up: webhooks pointing at such names (any workspace can register them) could hold every thread of
 * the pool, stalling the server's file, crypto and zlib work, not only deliveries. The wait's bound keeps the line
 * from growing without end when slow names keep coming faster than they fail.
 *
 * One group (a workspace) holds at most `perGroup` of the turns (`max - 1`): the others are always left at least one,
 * and a waiting lookup whose group is at its share lets the later ones of other groups pass. Otherwise one workspace's
 * webhooks at slow names held every turn, and every other workspace's lookups waited behind them until they failed,
 * so their attempts failed and their webhooks were disabled. Lookups without a group are not counted against any.
 */
export const limitLookups = (
  resolve: Resolver,
  max: number,
  maxWaitMs = LOOKUP_WAIT_MS,
  perGroup = Math.max(1, max - 1),
): Resolver => {
  let running = 0
  const held = new Map<string, number>()
  const waiting: Array<{ readonly group: string | undefined; readonly go: () => void }> = []
  const inFlight = new Map<string, Promise<ReadonlyArray<ResolvedAddress>>>()
  const mayRun = (group: string | undefined) => group === undefined || (held.get(group) ?? 0) < perGroup
  const hold = (group: string | undefined) => {
    running += 1
    if (group !== undefined) held.set(group, (held.get(group) ?? 0) + 1)
  }
  const release = (group: string | undefined) => {
    running -= 1
    if (group !== undefined) {
      const left = (held.get(group) ?? 1) - 1
      if (left > 0) held.set(group, left)
      else held.delete(group)
    }
    // The freed turn goes to the first in line whose group is under its share.
    while (running < max) {
      const next = waiting.findIndex((w) => mayRun(w.group))
      if (next < 0) break
      const [w] = waiting.splice(next, 1)
      hold(w!.group)
      w!.go()
    }
  }
  const slot = (group: string | undefined) =>
    new Promise<void>((go, fail) => {
      if (running < max && mayRun(group)) {
        hold(group)
        return go()
      }
      const entry = {
        group,
        go: () => {
          clearTimeout(timer)
          go()
        },
      }
      const timer = setTimeout(() => {
        const at = waiting.indexOf(entry)
        if (at >= 0) waiting.splice(at, 1)
        fail(Object.assign(new Error(`DNS lookup waited ${maxWaitMs} ms for its turn`), { code: "ETIMEOUT" }))
      }, maxWaitMs)
      waiting.push(entry)
    })
  const turn = async <T>(group: string | undefined, work: () => Promise<T>): Promise<T> => {
    await slot(group)
    try {
      return await work()
    } finally {
      release(group)
    }
  }
  return (host, group) => {
    // Shared within a group only: a lookup of a host another workspace's webhooks also name could otherwise wait in
    // the line of a group that is at its share (a workspace could hold back another's lookups by naming its hosts).
    const key = `${group ?? ""}\u0000${host.toLowerCase()}`
    let shared = inFlight.get(key)
    if (shared === undefined) {
      shared = turn(group, () => resolve(host)).finally(() => inFlight.delete(key))
      inFlight.set(key, shared)
    }
    return shared
  }
}

export const systemResolver: Resolver = limitLookups(
  async (host) =>
    (await lookup(host, { all: true, verbatim: true })).map((a) => ({ address: a.address, family: a.family as 4 | 6 })),
  MAX_CONCURRENT_LOOKUPS,
)

const LOOPBACK = new BlockList()
LOOPBACK.addSubnet("127.0.0.0", 8, "ipv4")
LOOPBACK.addAddress("::1", "ipv6")

const NOT_PUBLIC = new BlockList()
for (const [net, bits] of [
  ["0.0.0.0", 8], // "this network": 0.0.0.0 reaches the local host
  ["10.0.0.0", 8],
  ["100.64.0.0", 10], // CGNAT (and 100.100.100.200, a metadata address)
  ["127.0.0.0", 8],
  ["169.254.0.0", 16], // link-local, 169.254.169.254 metadata
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["192.88.99.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
] as const)
  NOT_PUBLIC.addSubnet(net, bits, "ipv4")
for (const [net, bits] of [
  ["::", 96], // unspecified, loopback, IPv4-compatible
  ["64:ff9b:1::", 48], // local-use NAT64
  ["100::", 64],
  ["2001::", 23], // IETF protocol assignments, Teredo
  ["2001:db8::", 32],
  ["2002::", 16], // 6to4
  ["fc00::", 7], // unique-local, fd00:ec2::254 metadata
  ["fe80::", 10],
  ["fec0::", 10],
  ["ff00::", 8],
] as const)
  NOT_PUBLIC.addSubnet(net, bits, "ipv6")

/** `public`, `loopback` or `private` (every other address a webhook must not reach). */
export const classifyAddress = (ip: string): "public" | "loopback" | "private" => {
  const family = isIP(ip)
  if (family === 0) return "private"
  const type = family === 4 ? "ipv4" : "ipv6"
  if (LOOPBACK.check(ip, type)) return "loopback"
  if (NOT_PUBLIC.check(ip, type)) return "private"
  if (family === 6) {
    const bytes = ipv6Bytes(ip)
    // NAT64 (64:ff9b::/96) carries an IPv4 address in its last 32 bits: judge that one.
    if (bytes.readUInt32BE(0) === 0x0064ff9b && bytes.readUInt32BE(4) === 0 && bytes.readUInt32BE(8) === 0)
      return classifyAddress([...bytes.subarray(12)].join("."))
  }
  return "public"
}

/**
 * Parses the operator's allowlist: CIDRs (`10.1.0.0/16`, `fd00::/8`), single
 * addresses, host names (`hooks.internal`) and `*.suffix` patterns. Returns
 * the problems with entries it cannot read.
 */
export const parseAllowlist = (
  entries: ReadonlyArray<string>,
): { readonly allowlist: Allowlist; readonly problems: ReadonlyArray<string> } => {
  const addresses = new BlockList()
  const hosts: Array<string> = []
  const problems: Array<string> = []
  for (const raw of entries) {
    const entry = raw.trim().toLowerCase()
    if (entry === "") continue
    const [ip, bits, ...rest] = entry.split("/")
    const family = isIP(ip!)
    if (family !== 0) {
      const max = family === 4 ? 32 : 128
      const prefix = bits === undefined ? max : Number(bits)
      if (rest.length > 0 || !/^\d*$/.test(bits ?? "") || !Number.isInteger(prefix) || prefix < 0 || prefix > max) {
        problems.push(`"${raw}": not a CIDR (prefix length 0..${max})`)
        continue
      }
      addresses.addSubnet(ip!, prefix, family === 4 ? "ipv4" : "ipv6")
    } else if (/^(\*\.)?[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*\.?$/.test(entry)) {
      hosts.push(entry.startsWith("*.") ? entry.slice(1).replace(/\.$/, "") : entry.replace(/\.$/, ""))
    } else {
      problems.push(`"${raw}": expected a CIDR, an IP address, a host name or *.domain`)
    }
  }
  return { allowlist: { addresses, hosts }, problems }
}

export const EMPTY_ALLOWLIST: Allowlist = parseAllowlist([]).allowlist

/** The host of a URL as DNS and `isIP` want it: brackets off IPv6, lowercase, no trailing dot. */
export const hostOf = (url: URL): string =>
  url.hostname
    .replace(/^\[(.*)\]$/, "$1")
    .toLowerCase()
    .replace(/\.$/, "")

const hostAllowed = (allowlist: Allowlist, host: string) =>
  allowlist.hosts.some((h) => (h.startsWith(".") ? host.endsWith(h) : host === h))

/** A URL's syntax: absolute http(s), a host, no credentials. Returns the issue, or the parsed URL. */
export const checkUrlSyntax = (raw: string): { readonly url: URL } | { readonly issue: string } => {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return { issue: "not an absolute URL" }
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return { issue: "only http and https URLs are allowed" }
  if (url.username !== "" || url.password !== "") return { issue: "credentials in the URL are not allowed" }
  if (hostOf(url) === "") return { issue: "the URL has no host" }
  return { url }
}

/** Judges every address a host resolved to; one refused address refuses the host. */
export const judgeAddresses = (
  policy: TargetPolicy,
  host: string,
  addresses: ReadonlyArray<ResolvedAddress>,
): { readonly ok: true } | { readonly ok: false; readonly issue: string } => {
  if (hostAllowed(policy.allowlist, host)) return { ok: true }
  for (const { address, family } of addresses) {
    if (policy.allowlist.addresses.check(address, family === 4 ? "ipv4" : "ipv6")) continue
    const kind = classifyAddress(address)
    if (kind === "public") continue
    // A name's addresses are not told: that would answer questions about the operator's internal DNS.
    const what = address === host ? `${address} is` : `${host} resolves to`
    return {
      ok: false,
      issue: `${what} ${kind === "loopback" ? "a loopback" : "a private or reserved"} address; webhooks must target public addresses unless the operator's allowlist names this one`,
    }
  }
  return { ok: true }
}

/**
 * Resolves a URL's host and judges every address. `pinned` are the addresses
 * to connect to: the caller connects to one of them and nowhere else, so a DNS
 * answer that changes between the check and the connection (rebinding) cannot
 * lead the request elsewhere. `unresolved` means DNS gave no answer. `group` (the workspace) is passed to the
 * resolver, which shares its turns among groups.
 */
export const resolveTarget = async (
  policy: TargetPolicy,
  url: URL,
  resolver: Resolver,
  group?: string,
): Promise<
  | { readonly ok: true; readonly pinned: ReadonlyArray<ResolvedAddress> }
  | { readonly ok: false; readonly issue: string; readonly unresolved?: true }
> => {
  const host = hostOf(url)
  const literal = isIP(host)
  let addresses: ReadonlyArray<ResolvedAddress>
  if (literal !== 0) addresses = [{ address: host, family: literal as 4 | 6 }]
  else {
    try {
      addresses = await resolver(host, group)
    } catch (e) {
      return {
        ok: false,
        issue: `${host} did not resolve (${(e as NodeJS.ErrnoException).code ?? "DNS error"})`,
        unresolved: true,
      }
    }
    if (addresses.length === 0) return { ok: false, issue: `${host} did not resolve`, unresolved: true }
  }
  const judged = judgeAddresses(policy, host, addresses)
  return judged.ok ? { ok: true, pinned: addresses } : judged
}
