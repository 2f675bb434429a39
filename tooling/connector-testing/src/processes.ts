import { type ChildProcess, spawn } from "node:child_process"
import { createServer, type IncomingHttpHeaders } from "node:http"
import type { AddressInfo } from "node:net"
import type { ConnectorDefinition, RunningConnector } from "@agentgov/connector-sdk/runtime"
import { startConnector } from "@agentgov/connector-sdk/runtime"

/**
 * Connector processes for the tests: in-process (`startConnector`) for most scenarios, and real
 * child processes (`node bin/agentgov-connector-<name>.js`) for the CLI, a kill -9 and a restart.
 */

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Polls `check` until it holds, or fails naming `what`. */
export const waitFor = async (check: () => boolean | Promise<boolean>, what: string, ms = 20_000) => {
  const deadline = Date.now() + ms
  for (;;) {
    if (await check()) return
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(25)
  }
}

export interface InProcess {
  readonly running: RunningConnector
  readonly url: string
  /** The JSON log lines so far, parsed. */
  readonly logs: () => Array<Record<string, any>>
}

export const runInProcess = async (
  definition: ConnectorDefinition<any, any>,
  env: Record<string, string>,
): Promise<InProcess> => {
  const lines: Array<string> = []
  const running = await startConnector(definition, {
    env: { PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "debug", ...env },
    log: (l) => lines.push(l),
  })
  return { running, url: running.url, logs: () => lines.map((l) => JSON.parse(l)) }
}

export interface ChildConnector {
  readonly proc: ChildProcess
  readonly url: string
  readonly output: () => string
  readonly exited: Promise<number | null>
}

const children = new Set<ChildProcess>()
process.once("exit", () => {
  for (const c of children) c.kill("SIGKILL")
})

const spawnBin = (bin: string, args: ReadonlyArray<string>, env: Record<string, string>) => {
  const proc = spawn(process.execPath, ["--conditions=@agentgov/source", bin, ...args], {
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  })
  children.add(proc)
  const out = { stdout: "", stderr: "" }
  proc.stdout!.setEncoding("utf8").on("data", (c: string) => {
    out.stdout += c
  })
  proc.stderr!.setEncoding("utf8").on("data", (c: string) => {
    out.stderr += c
  })
  const exited = new Promise<number | null>((resolve) =>
    proc.once("close", (code) => {
      children.delete(proc)
      resolve(code)
    }),
  )
  return { proc, out, exited }
}

/** Runs a command of the connector's CLI to its end. */
export const runCommand = async (
  bin: string,
  args: ReadonlyArray<string>,
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> => {
  const { proc, out, exited } = spawnBin(bin, args, env)
  const timer = setTimeout(() => proc.kill("SIGKILL"), 60_000)
  const code = await exited
  clearTimeout(timer)
  return { code, ...out }
}

/** Starts the connector's CLI (`start`) and waits for its "listening" log line. */
export const spawnConnector = async (bin: string, env: Record<string, string>): Promise<ChildConnector> => {
  const { proc, out, exited } = spawnBin(bin, [], { PORT: "0", HOST: "127.0.0.1", ...env })
  const output = () => `--- stdout\n${out.stdout}\n--- stderr\n${out.stderr}`
  let url: string | undefined
  let ended = false
  void exited.then(() => {
    ended = true
  })
  await waitFor(
    () => {
      if (ended) throw new Error(`the connector exited\n${output()}`)
      for (const line of out.stdout.split("\n")) {
        if (!line.includes('"listening"')) continue
        try {
          url = JSON.parse(line).url
        } catch {
          // a partial line
        }
      }
      return url !== undefined
    },
    "the connector to listen",
    30_000,
  )
  return { proc, url: url!, output, exited }
}

export const kill9 = async (child: ChildConnector) => {
  child.proc.kill("SIGKILL")
  await child.exited
}

// -----------------------------------------------------------------------------------------------
// A plain HTTP recorder, the base of the vendor fakes and of the redelivery proxy

export interface FakeRequest {
  readonly method: string
  /** Path and query. */
  readonly url: string
  readonly headers: IncomingHttpHeaders
  readonly raw: string
  readonly at: number
}

export interface FakeAnswer {
  readonly status: number
  readonly headers?: Record<string, string>
  readonly body?: unknown
}

export interface HttpFake {
  readonly url: string
  readonly requests: Array<FakeRequest>
  readonly close: () => Promise<void>
}

/** A loopback HTTP server answering each request with `handle`, recording them all. */
export const startHttpFake = async (
  handle: (r: FakeRequest) => FakeAnswer | Promise<FakeAnswer>,
  port = 0,
): Promise<HttpFake> => {
  const requests: Array<FakeRequest> = []
  const server = createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", async () => {
      const r: FakeRequest = {
        method: req.method ?? "GET",
        url: req.url ?? "/",
        headers: req.headers,
        raw: Buffer.concat(chunks).toString("utf8"),
        at: Date.now(),
      }
      requests.push(r)
      try {
        const answer = await handle(r)
        const body =
          answer.body === undefined ? "" : typeof answer.body === "string" ? answer.body : JSON.stringify(answer.body)
        res.writeHead(answer.status, {
          ...(typeof answer.body === "object" ? { "content-type": "application/json" } : {}),
          ...answer.headers,
        })
        res.end(body)
      } catch (error) {
        res.writeHead(500).end(String(error))
      }
    })
  })
  await new Promise<void>((r) => server.listen(port, "127.0.0.1", () => r()))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: async () => {
      server.closeAllConnections()
      await new Promise<void>((r) => server.close(() => r()))
    },
  }
}

/** The part of a vendor fake every vendor shares: scripted failures, and a record of each answer. */
export interface ScriptedFake {
  readonly http: HttpFake
  readonly attempts: () => ReadonlyArray<{ readonly status: number; readonly at: number }>
  readonly failNext: (kind: "rate_limit" | "refuse", retryAfterSeconds?: number) => void
}

/**
 * An HTTP fake answering with `answer`, except that `failNext` makes the next request get the
 * vendor's documented rate-limit answer (built from the `Retry-After` seconds) or refusal.
 */
export const startScriptedFake = async (
  answer: (r: FakeRequest) => FakeAnswer,
  failures: { readonly rateLimit: (retryAfterSeconds: number) => FakeAnswer; readonly refuse: () => FakeAnswer },
): Promise<ScriptedFake> => {
  const attempts: Array<{ status: number; at: number }> = []
  let next: FakeAnswer | undefined
  const http = await startHttpFake((r) => {
    const a = next ?? answer(r)
    next = undefined
    attempts.push({ status: a.status, at: r.at })
    return a
  })
  return {
    http,
    attempts: () => attempts,
    failNext: (kind, retryAfterSeconds = 1) => {
      next = kind === "rate_limit" ? failures.rateLimit(retryAfterSeconds) : failures.refuse()
    },
  }
}
