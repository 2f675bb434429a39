import { type AddressInfo, connect, createServer, type Server, type Socket } from "node:net"

/**
 * A TCP proxy to the test database that can be cut (every connection closed, none accepted) and restored, or
 * made to hang (every connection closed; new ones accepted, counted, and never answered: a server that is down
 * behind a balancer or a firewall that drops packets).
 */
export const cuttableProxy = async (url: string) => {
  const target = new URL(url)
  const sockets = new Set<Socket>()
  let hanging = false
  let attempts = 0
  const serve = () =>
    createServer((client) => {
      attempts += 1
      if (hanging) {
        sockets.add(client)
        client.on("error", () => client.destroy()).on("close", () => sockets.delete(client))
        return
      }
      const upstream = connect(Number(target.port || 5432), target.hostname)
      for (const s of [client, upstream]) {
        sockets.add(s)
        s.on("error", () => s.destroy()).on("close", () => {
          sockets.delete(s)
          client.destroy()
          upstream.destroy()
        })
      }
      client.pipe(upstream).pipe(client)
    })
  let server: Server = serve()
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
  const port = (server.address() as AddressInfo).port
  const via = new URL(url)
  via.hostname = "127.0.0.1"
  via.port = String(port)
  return {
    url: via.toString(),
    cut: async () => {
      await new Promise<void>((r) => {
        server.close(() => r())
        for (const s of sockets) s.destroy()
      })
    },
    restore: async () => {
      server = serve()
      await new Promise<void>((r) => server.listen(port, "127.0.0.1", r))
    },
    hang: () => {
      hanging = true
      for (const s of sockets) s.destroy()
    },
    /** Connections made to the proxy so far. */
    attempts: () => attempts,
    close: async () => {
      for (const s of sockets) s.destroy()
      await new Promise<void>((r) => (server.listening ? server.close(() => r()) : r()))
    },
  }
}
