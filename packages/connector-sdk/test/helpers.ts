import { createHmac } from "node:crypto"
import { type ConnectorApp, type ConnectorOptions, createConnector } from "../src/index.ts"

/** Signing done here with node:crypto, independently of the package's own signer. */
export const hmacHex = (secret: string, content: string | Buffer): string =>
  createHmac("sha256", Buffer.from(secret, "utf8")).update(content).digest("hex")

export const SECRET = "whsec_test_0123456789abcdefghijklmnopqrstuv"

let seq = 0
export const envelope = (type = "approval.requested", data: Record<string, unknown> = { approvalId: "apr_1" }) => {
  seq++
  return {
    id: `evt_test${seq}`,
    type,
    timestamp: "2026-11-20T12:00:00.000Z",
    workspaceId: "ws_test",
    data,
    metadata: { deliveryId: `dlv_test${seq}`, webhookId: "whk_test", attempt: 1 },
  }
}

/** Headers as the service sends them, for `body` signed with `secret` at `timestamp` (Unix seconds). */
export const signedHeaders = (
  body: string,
  options: { secret?: string; id?: string; timestamp?: number | string } = {},
): Record<string, string> => {
  const id = options.id ?? `dlv_${++seq}`
  const timestamp = String(options.timestamp ?? Math.floor(Date.now() / 1000))
  return {
    "content-type": "application/json",
    "x-svc-webhook-id": id,
    "x-svc-webhook-timestamp": timestamp,
    "x-svc-webhook-signature": `v1=${hmacHex(options.secret ?? SECRET, `${id}.${timestamp}.${body}`)}`,
  }
}

export const silent = { warn: () => {}, error: () => {} }

export interface Started {
  readonly app: ConnectorApp
  readonly url: string
  readonly endpoint: string
}

const started: Array<ConnectorApp> = []

/** A connector on a free loopback port; closed by `closeAll`. */
export const start = async (
  options: Partial<ConnectorOptions> = {},
  register: (app: ConnectorApp) => void = () => {},
): Promise<Started> => {
  const app = createConnector({ secret: SECRET, logger: silent, ...options })
  register(app)
  const { url } = await app.listen(0, "127.0.0.1")
  started.push(app)
  return { app, url, endpoint: `${url}${app.path}` }
}

export const closeAll = async () => {
  await Promise.all(started.splice(0).map((app) => app.close({ timeoutMs: 1000 })))
}

export const post = (endpoint: string, body: string, headers: Record<string, string>) =>
  fetch(endpoint, { method: "POST", headers, body })

/** A promise and its resolver, for handlers the test releases. */
export const gate = () => {
  let open!: () => void
  const promise = new Promise<void>((resolve) => {
    open = resolve
  })
  return { promise, open }
}
