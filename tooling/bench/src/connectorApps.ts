import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { chmodSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { setTimeout as sleep } from "node:timers/promises"
import { processRssBytes } from "./server.ts"

/**
 * The connector apps (connectors/*) as the benchmarks run them: each a child process started from its
 * `bin` with its shebang's node flags, as `npx agentgov-connector-<name>` starts it, subscribed through a signed webhook of the bench
 * server, and delivering to a vendor fake on loopback that answers as the vendor documents its success
 * (Slack `{ok: true, ts}`, a Discord message for `?wait=true`, Teams 202, PagerDuty 202) and records
 * when each tagged event arrived.
 */

/** Milliseconds since the epoch, sub-millisecond: send times here and arrival times in the fakes. */
export const now = () => performance.timeOrigin + performance.now()

/** A tag the bench puts in an event's data; the connectors render data values, so it shows in the vendor's body. */
export const TAG = /btq[a-f0-9]{6}n\d+/g

export interface VendorFake {
  readonly url: string
  /** First arrival of each tag (epoch ms). */
  readonly arrivals: Map<string, number>
  /** Requests received. */
  readonly requests: () => number
  readonly close: () => Promise<void>
}

type Answer = { readonly status: number; readonly body?: unknown }

/** A loopback vendor fake: `answer` gives the vendor's success answer to a request; every tag in the body is recorded. */
export const startVendorFake = async (
  answer: (method: string, path: string, body: string) => Answer,
  tags: RegExp = TAG,
): Promise<VendorFake> => {
  const arrivals = new Map<string, number>()
  let requests = 0
  const server = createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const at = now()
      requests++
      const raw = Buffer.concat(chunks).toString("utf8")
      for (const [tag] of raw.matchAll(tags)) if (!arrivals.has(tag)) arrivals.set(tag, at)
      const a = answer(req.method ?? "GET", req.url ?? "/", raw)
      const body = a.body === undefined ? "" : JSON.stringify(a.body)
      res.writeHead(a.status, a.body === undefined ? {} : { "content-type": "application/json" }).end(body)
    })
  })
  server.keepAliveTimeout = 30_000
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    arrivals,
    requests: () => requests,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections()
        server.close(() => r())
      }),
  }
}

let slackTs = 0
let discordId = 0

/** The vendors' documented success answers, by connector. */
export const VENDOR_ANSWERS = {
  slack: (_m: string, path: string, body: string): Answer => {
    const fields = body.startsWith("{") ? JSON.parse(body) : Object.fromEntries(new URLSearchParams(body))
    const ts = `1764000000.${String(++slackTs).padStart(6, "0")}`
    return path.endsWith("chat.update")
      ? { status: 200, body: { ok: true, channel: fields.channel, ts: fields.ts, text: fields.text } }
      : { status: 200, body: { ok: true, channel: fields.channel, ts, message: { text: fields.text } } }
  },
  discord: (_m: string, _p: string, body: string): Answer => {
    const b = JSON.parse(body)
    return {
      status: 200,
      body: { id: String(++discordId), channel_id: "1", content: b.content ?? "", embeds: b.embeds },
    }
  },
  teams: (): Answer => ({ status: 202 }),
  pagerduty: (_m: string, _p: string, body: string): Answer => ({
    status: 202,
    body: { status: "success", message: "Event processed", dedup_key: JSON.parse(body).dedup_key },
  }),
} as const

export type ConnectorName = keyof typeof VENDOR_ANSWERS

/** The vendor settings of each connector, pointed at its fake. */
export const vendorEnv = (name: ConnectorName, fakeUrl: string): Record<string, string> => {
  switch (name) {
    case "slack":
      return { SLACK_BOT_TOKEN: "xoxb-1-bench-token", SLACK_CHANNEL: "C0AGENTGOV", SLACK_API_URL: `${fakeUrl}/api/` }
    case "discord":
      return {
        DISCORD_WEBHOOK_URL: "https://discord.com/api/webhooks/1234567890/bench-token",
        DISCORD_API_URL: `${fakeUrl}/api`,
      }
    case "teams":
      return { TEAMS_WEBHOOK_URL: `${fakeUrl}/workflows/bench` }
    case "pagerduty":
      return {
        PAGERDUTY_ROUTING_KEY: "0123456789abcdef0123456789abcdef",
        PAGERDUTY_EVENTS_URL: `${fakeUrl}/v2/enqueue`,
      }
  }
}

export interface ConnectorChild {
  readonly name: ConnectorName
  readonly url: string
  readonly pid: number
  readonly secret: string
  readonly fake: VendorFake
  readonly rssBytes: () => number | undefined
  /** Warnings and errors the connector logged. */
  readonly problems: Array<string>
  readonly stop: () => Promise<void>
}

/** The node flags of a bin's `#!/usr/bin/env -S node <flags>` line: what `npx agentgov-connector-<name>` runs it with. */
export const shebangFlags = (bin: string): Array<string> => {
  const first = readFileSync(bin, "utf8").split("\n", 1)[0] ?? ""
  const match = /^#!\/usr\/bin\/env -S node((?:\s+--\S+)*)\s*$/.exec(first)
  if (!match) throw new Error(`${bin} does not start with "#!/usr/bin/env -S node [flags]": ${first}`)
  return match[1]!
    .trim()
    .split(/\s+/)
    .filter((f) => f !== "")
}

/** Starts connector `name` from its bin (a fresh data directory) with its vendor fake; waits for its "listening" line. */
export const startConnectorChild = async (
  root: string,
  name: ConnectorName,
  env: Record<string, string> = {},
): Promise<ConnectorChild> => {
  const fake = await startVendorFake(VENDOR_ANSWERS[name])
  const dataDir = mkdtempSync(join(tmpdir(), `agentgov-bench-${name}-`))
  chmodSync(dataDir, 0o700)
  const secret = `whsec_${randomBytes(24).toString("hex")}`
  const bin = join(root, `connectors/${name}/bin/agentgov-connector-${name}.js`)
  const child: ChildProcess = spawn(process.execPath, [...shebangFlags(bin), bin], {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? "/tmp",
      PORT: "0",
      HOST: "127.0.0.1",
      LOG_LEVEL: "info",
      AGENTGOV_WEBHOOK_SECRET: secret,
      AGENTGOV_CONNECTOR_DATA_DIR: dataDir,
      AGENTGOV_DASHBOARD_URL: "https://gov.example.com",
      ...vendorEnv(name, fake.url),
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  })
  const problems: Array<string> = []
  const output: Array<string> = []
  const listening = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error(`connector ${name} did not listen within 30 s`)), 30_000)
    const fail = (e: Error) => {
      clearTimeout(timer)
      child.kill("SIGKILL")
      reject(new Error(`${e.message}\n${output.join("\n")}`))
    }
    child.once("exit", (code) => fail(new Error(`connector ${name} exited with ${code} while starting`)))
    createInterface({ input: child.stderr! }).on("line", (line) => {
      output.push(line)
      problems.push(line)
    })
    createInterface({ input: child.stdout! }).on("line", (line) => {
      let entry: { level?: string; msg?: string; url?: string } = {}
      try {
        entry = JSON.parse(line)
      } catch {
        problems.push(line)
        return
      }
      if (entry.msg === "listening" && entry.url) {
        clearTimeout(timer)
        child.removeAllListeners("exit")
        resolve(entry.url)
      } else if (entry.level === "warn" || entry.level === "error") problems.push(line)
      if (output.length < 200) output.push(line)
    })
  })
  const url = await listening.catch(async (error: unknown) => {
    await fake.close()
    rmSync(dataDir, { recursive: true, force: true })
    throw error
  })
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((r) => child.once("exit", () => r()))
      const kill = setTimeout(() => child.kill("SIGKILL"), 15_000)
      child.kill("SIGTERM")
      await exited
      clearTimeout(kill)
    }
    await fake.close()
    rmSync(dataDir, { recursive: true, force: true })
  }
  return { name, url, pid: child.pid!, secret, fake, rssBytes: () => processRssBytes(child.pid!), problems, stop }
}

/** Polls until every tag in `tags` has arrived at every fake, or `ms` passed. */
export const waitForArrivals = async (fakes: ReadonlyArray<VendorFake>, tags: ReadonlyArray<string>, ms: number) => {
  const deadline = performance.now() + ms
  while (performance.now() < deadline && fakes.some((f) => tags.some((t) => !f.arrivals.has(t)))) await sleep(10)
}

/** A run-unique tag prefix; a tag is the prefix and a number (letters and digits only: no formatter escapes them). */
export const tagPrefix = () => `btq${randomBytes(3).toString("hex")}n`
