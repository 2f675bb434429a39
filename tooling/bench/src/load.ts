import { connect, type Socket } from "node:net"

/**
 * The load generator of the HTTP throughput benchmarks: closed-loop HTTP/1.1
 * on raw keep-alive sockets. Each connection writes a prebuilt request, reads
 * the answer (status line, Content-Length, body) and writes the next; nothing
 * else. Load generator, server and PostgreSQL share two cores, so the client
 * must take as little of them as it can: node:http's client spends ~100 µs of
 * CPU per request, more than the echo server it measures (~50 µs), which
 * capped that baseline at about half its rate (docs/decisions.md); this one
 * spends ~30 µs.
 */

export interface Load {
  readonly requests: number
  readonly seconds: number
  /** Write of the request to the last byte of its answer, one per request. */
  readonly latenciesMs: Array<number>
}

const HEADER_END = Buffer.from("\r\n\r\n")

/** A request's bytes, built once and sent as often as needed: a GET, or a POST of a JSON body. */
export const requestBytes = (
  url: string,
  path: string,
  headers: Readonly<Record<string, string>>,
  body?: string,
): Buffer => {
  const payload = body === undefined ? undefined : Buffer.from(body, "utf8")
  const lines = [
    `${payload ? "POST" : "GET"} ${path} HTTP/1.1`,
    `host: ${new URL(url).host}`,
    "connection: keep-alive",
    ...(payload ? ["content-type: application/json", `content-length: ${payload.length}`] : []),
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
  ]
  const head = Buffer.from(`${lines.join("\r\n")}\r\n\r\n`, "latin1")
  return payload ? Buffer.concat([head, payload]) : head
}

/** One keep-alive connection sending `requestOf(next())` until `until`; every answer must be a 200. */
const loop = (socket: Socket, until: number, next: () => Buffer, latenciesMs: Array<number>) =>
  new Promise<void>((resolve, reject) => {
    let pending: Buffer = Buffer.alloc(0)
    let need = -1
    let t0 = 0
    let done = false
    const fail = (error: Error) => {
      if (done) return
      done = true
      socket.destroy()
      reject(error)
    }
    const send = () => {
      if (performance.now() >= until) {
        done = true
        socket.end()
        return resolve()
      }
      t0 = performance.now()
      socket.write(next())
    }
    socket.on("data", (chunk: Buffer) => {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk])
      while (!done) {
        if (need < 0) {
          const end = pending.indexOf(HEADER_END)
          if (end < 0) return
          const head = pending.subarray(0, end).toString("latin1")
          if (!head.startsWith("HTTP/1.1 200 ")) return fail(new Error(`answered ${head.split("\r\n")[0]}`))
          const length = /\r\ncontent-length: *(\d+)/i.exec(head)
          if (!length) return fail(new Error("an answer without Content-Length"))
          need = end + HEADER_END.length + Number(length[1])
        }
        if (pending.length < need) return
        pending = pending.subarray(need)
        need = -1
        latenciesMs.push(performance.now() - t0)
        send()
      }
    })
    socket.on("error", fail)
    socket.on("close", () => fail(new Error("the server closed the connection")))
    send()
  })

const openSockets = (url: string, connections: number): Promise<Array<Socket>> => {
  const { hostname, port } = new URL(url)
  return Promise.all(
    Array.from(
      { length: connections },
      () =>
        new Promise<Socket>((resolve, reject) => {
          const socket = connect({ host: hostname, port: Number(port), noDelay: true })
          socket.once("connect", () => resolve(socket)).once("error", reject)
        }),
    ),
  )
}

/** `connections` keep-alive connections, each sending `requestOf(i)` (i counting up across them) for `ms`. */
export const drive = async (
  url: string,
  connections: number,
  ms: number,
  requestOf: (i: number) => Buffer,
): Promise<Load> => {
  const [load] = await driveTogether([{ url, connections, requestOf }], ms)
  return load!
}

export interface Target {
  readonly url: string
  readonly connections: number
  readonly requestOf: (i: number) => Buffer
}

/**
 * Several servers loaded over the same window: every connection is opened first, then all start on one clock
 * (the targets' connections taking turns) and stop at the same instant, so that no target has the machine to
 * itself while another is still connecting.
 */
export const driveTogether = async (targets: ReadonlyArray<Target>, ms: number): Promise<Array<Load>> => {
  const opened = await Promise.all(targets.map((t) => openSockets(t.url, t.connections)))
  const latencies = targets.map((): Array<number> => [])
  const ends = targets.map(() => 0)
  const nexts = targets.map((t) => {
    let n = 0
    return () => t.requestOf(n++)
  })
  const start = performance.now()
  const loops = targets.map((): Array<Promise<void>> => [])
  const most = Math.max(...targets.map((t) => t.connections))
  for (let c = 0; c < most; c++)
    targets.forEach((_, k) => {
      const socket = opened[k]![c]
      if (socket) loops[k]!.push(loop(socket, start + ms, nexts[k]!, latencies[k]!))
    })
  await Promise.all(
    loops.map((ls, k) =>
      Promise.all(ls).then(() => {
        ends[k] = performance.now()
      }),
    ),
  )
  return targets.map((_, k) => ({
    requests: latencies[k]!.length,
    seconds: (ends[k]! - start) / 1000,
    latenciesMs: latencies[k]!,
  }))
}
