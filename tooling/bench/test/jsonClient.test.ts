import { createServer, type Server, type Socket } from "node:net"
import { afterEach, expect, it } from "vitest"
import { jsonClient } from "../src/server.ts"

/**
 * The bench's JSON client keeps connections alive across benchmarks, some of which leave the server
 * idle for longer than its keep-alive timeout: a request that takes a socket the server has just
 * closed must not fail the benchmark that sent it.
 */

let server: Server | undefined
afterEach(() => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())))

it("sends a request again, once, when the kept-alive socket it took was closed without an answer", async () => {
  const answered: Array<number> = []
  let connections = 0
  // Answers the first request on each connection, and closes the connection on the second without
  // answering: what a server's keep-alive timeout does to a request racing it.
  server = createServer((socket: Socket) => {
    const connection = ++connections
    let requests = 0
    socket.on("data", () => {
      requests += 1
      if (requests > 1) return socket.destroy()
      answered.push(connection)
      const body = JSON.stringify({ ok: true, connection })
      socket.write(
        `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: keep-alive\r\n\r\n${body}`,
      )
    })
  })
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as { port: number }
  const { call, close } = jsonClient(`http://127.0.0.1:${port}`, "key", 1)
  try {
    expect((await call("GET", "/a")).body).toEqual({ ok: true, connection: 1 })
    expect((await call("GET", "/b")).body).toEqual({ ok: true, connection: 2 })
    expect(answered).toEqual([1, 2])
  } finally {
    close()
  }
})
