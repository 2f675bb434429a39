/**
 * Textual IP addresses read as bytes, for the checks that compare addresses by prefix (webhook targets against
 * the private ranges, the anonymous limit's IPv6 /64 buckets). The input is an address `net.isIP` accepted.
 */

/** The 16 bytes of an IPv6 address in any textual form (`::`, embedded dotted IPv4). */
export const ipv6Bytes = (ip: string): Buffer => {
  let text = ip
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text)
  if (dotted) {
    const [a, b, c, d] = dotted[1]!.split(".").map(Number) as [number, number, number, number]
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const [head = "", tail] = text.split("::")
  const left = head === "" ? [] : head.split(":")
  const right = tail === undefined || tail === "" ? [] : tail.split(":")
  const groups = tail === undefined ? left : [...left, ...Array(8 - left.length - right.length).fill("0"), ...right]
  const out = Buffer.alloc(16)
  for (const [i, g] of groups.entries()) out.writeUInt16BE(Number.parseInt(g, 16) & 0xffff, i * 2)
  return out
}
