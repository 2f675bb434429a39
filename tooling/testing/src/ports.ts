import { readFileSync } from "node:fs"
import { type AddressInfo, createServer } from "node:net"

/** Below the ports the kernel hands out; ports under this are the well-known ones (PostgreSQL, Redis, …). */
const LOWEST = 10_000

/**
 * The kernel's range of ephemeral ports: where it picks the local port of every outgoing connection, and the port
 * of a listener bound to 0 (Linux: /proc/sys/net/ipv4/ip_local_port_range; elsewhere IANA's 49152–65535).
 */
export const ephemeralPorts = (): readonly [number, number] => {
  try {
    const [low, high] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/).map(Number)
    if (Number.isInteger(low) && Number.isInteger(high) && low! > LOWEST) return [low!, high!]
  } catch {
    // Not Linux.
  }
  return [49_152, 65_535]
}

const canListen = (port: number) =>
  new Promise<boolean>((resolve) => {
    const server = createServer()
    server.once("error", () => resolve(false))
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)))
  })

/**
 * A TCP port on 127.0.0.1 that was free a moment ago, for a server a test starts itself and must name before it
 * listens (its public URL, an identity provider's redirect URI). Chosen at random below the ephemeral range: a port
 * from that range (what listening on 0 gives) may be taken by any process's next outgoing connection before the
 * server binds it, and the dashboard suite once failed so (EADDRINUSE). Below it, only another such choice or a
 * server of the machine could take it, and the port is tried first.
 */
export const freePort = async (): Promise<number> => {
  const [low] = ephemeralPorts()
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = LOWEST + Math.floor(Math.random() * (low - LOWEST))
    if (await canListen(port)) return port
  }
  // A machine using every port below the range: the kernel's choice, as before.
  const server = createServer()
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => resolve())
  })
  const { port } = server.address() as AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}
