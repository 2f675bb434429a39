import { randomBytes } from "node:crypto"
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"

/**
 * `install` and `uninstall`: the connector registers (or removes) its own webhook through the
 * service's API, and keeps the signing secret in its data directory (`webhook.json`, mode 0600).
 *
 * The secret is made here and written before the webhook is created, so that a crash between the
 * two never leaves a webhook whose secret nobody has: running `install` again finds the webhook by
 * its URL and sets the stored secret on it (a rotation without overlap). Both commands are
 * idempotent.
 */

/** What `webhook.json` holds. */
export interface InstalledWebhook {
  readonly secret: string
  readonly webhookId?: string
  readonly url?: string
  readonly events?: ReadonlyArray<string>
  readonly agentgovUrl?: string
  readonly installedAt?: string
}

export const WEBHOOK_FILE = "webhook.json"

/** The stored installation, or undefined. Throws when the file exists but is unreadable. */
export const readInstalled = (dataDir: string): InstalledWebhook | undefined => {
  const path = join(dataDir, WEBHOOK_FILE)
  if (!existsSync(path)) return undefined
  const parsed = JSON.parse(readFileSync(path, "utf8")) as InstalledWebhook
  if (typeof parsed.secret !== "string" || parsed.secret === "") throw new Error(`${path} holds no secret`)
  return parsed
}

const writeInstalled = (dataDir: string, value: InstalledWebhook): void => {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  const path = join(dataDir, WEBHOOK_FILE)
  const tmp = `${path}.tmp`
  writeFileSync(tmp, `${JSON.stringify(value, null, 2)}\n`, { mode: 0o600 })
  chmodSync(tmp, 0o600)
  renameSync(tmp, path)
}

/** The service's API, called with the connector's key. */
export interface ApiTarget {
  /** `AGENTGOV_URL`: the service's base URL (`/api/v1` is added). */
  readonly baseUrl: string
  readonly apiKey: string
  readonly fetch?: typeof fetch
}

/** An API call that failed; its message is the service's error code and message (never the key). */
export class InstallError extends Error {
  override readonly name = "InstallError"
  readonly status: number | undefined
  constructor(message: string, status?: number) {
    super(message)
    this.status = status
  }
}

interface WebhookView {
  readonly id: string
  readonly url: string
  readonly events: ReadonlyArray<string>
  readonly enabled: boolean
}

const api = async (target: ApiTarget, method: string, path: string, body?: unknown): Promise<any> => {
  const base = target.baseUrl.replace(/\/+$/, "")
  let res: Response
  try {
    res = await (target.fetch ?? fetch)(`${base}/api/v1${path}`, {
      method,
      headers: {
        authorization: `Bearer ${target.apiKey}`,
        accept: "application/json",
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    })
  } catch (error) {
    throw new InstallError(`cannot reach ${base}: ${(error as Error).message}`)
  }
  const text = await res.text()
  let json: any
  try {
    json = text === "" ? undefined : JSON.parse(text)
  } catch {
    json = undefined
  }
  if (res.status === 404 && method !== "POST") return undefined
  if (!res.ok) {
    const err = json?.error
    const detail = err?.details?.field ? ` (${err.details.field})` : ""
    throw new InstallError(
      `${method} ${path} answered ${res.status}${err ? `: ${err.code}: ${err.message}${detail}` : ""}`,
      res.status,
    )
  }
  return json
}

const findByUrl = async (target: ApiTarget, url: string): Promise<WebhookView | undefined> => {
  let cursor: string | null | undefined
  for (let page = 0; page < 50; page++) {
    const query = new URLSearchParams({ limit: "100" })
    if (cursor) query.set("cursor", cursor)
    const body = await api(target, "GET", `/webhooks?${query}`)
    const found = (body?.data as Array<WebhookView> | undefined)?.find((w) => w.url === url)
    if (found) return found
    if (!body?.meta?.hasMore) return undefined
    cursor = body.meta.cursor
  }
  return undefined
}

const sameSet = (a: ReadonlyArray<string>, b: ReadonlyArray<string>) =>
  a.length === b.length && [...a].sort().join("\n") === [...b].sort().join("\n")

/** What `install` did. */
export interface InstallResult {
  readonly webhookId: string
  /** `created`, `updated` (URL or events changed, or re-enabled), `adopted` (found by URL, secret set) or `unchanged`. */
  readonly action: "created" | "updated" | "adopted" | "unchanged"
  readonly url: string
  readonly events: ReadonlyArray<string>
}

/**
 * Registers the connector's webhook: `url` (the public URL of its `/webhooks`) for `events`.
 * Idempotent: a second run changes nothing (or brings the webhook back in line with the settings).
 */
export const installWebhook = async (
  target: ApiTarget,
  dataDir: string,
  url: string,
  events: ReadonlyArray<string>,
  description: string,
): Promise<InstallResult> => {
  let stored = readInstalled(dataDir)
  if (stored === undefined) {
    stored = { secret: `whsec_${randomBytes(32).toString("base64url")}` }
    writeInstalled(dataDir, stored)
  }
  const secret = stored.secret
  const save = (webhookId: string) =>
    writeInstalled(dataDir, {
      secret,
      webhookId,
      url,
      events,
      agentgovUrl: target.baseUrl,
      installedAt: stored.installedAt ?? new Date().toISOString(),
    })

  const known: WebhookView | undefined =
    stored.webhookId === undefined
      ? undefined
      : (await api(target, "GET", `/webhooks/${encodeURIComponent(stored.webhookId)}`))?.data
  if (known !== undefined) {
    const patch: Record<string, unknown> = {}
    if (known.url !== url) patch.url = url
    if (!sameSet(known.events, events)) patch.events = events
    if (!known.enabled) patch.enabled = true
    if (Object.keys(patch).length > 0) await api(target, "PATCH", `/webhooks/${known.id}`, patch)
    save(known.id)
    return { webhookId: known.id, action: Object.keys(patch).length > 0 ? "updated" : "unchanged", url, events }
  }

  const byUrl = await findByUrl(target, url)
  if (byUrl !== undefined) {
    // Its secret may be one this directory never saw: set ours, with no overlap.
    await api(target, "POST", `/webhooks/${byUrl.id}/rotate`, { secret, overlapSeconds: 0 })
    const patch: Record<string, unknown> = {}
    if (!sameSet(byUrl.events, events)) patch.events = events
    if (!byUrl.enabled) patch.enabled = true
    if (Object.keys(patch).length > 0) await api(target, "PATCH", `/webhooks/${byUrl.id}`, patch)
    save(byUrl.id)
    return { webhookId: byUrl.id, action: "adopted", url, events }
  }

  const created = await api(target, "POST", "/webhooks", { url, events, secret, description })
  const id = created?.data?.id as string
  save(id)
  return { webhookId: id, action: "created", url, events }
}

/** What `uninstall` did. */
export interface UninstallResult {
  readonly webhookId: string | undefined
  readonly action: "deleted" | "not_installed"
}

/**
 * Deletes the connector's webhook (the one stored, else the one registered for `url`) and forgets
 * the secret. Idempotent: nothing to delete is not an error.
 */
export const uninstallWebhook = async (target: ApiTarget, dataDir: string, url: string): Promise<UninstallResult> => {
  const stored = readInstalled(dataDir)
  let id = stored?.webhookId
  if (id !== undefined && (await api(target, "GET", `/webhooks/${encodeURIComponent(id)}`)) === undefined)
    id = undefined
  id ??= (await findByUrl(target, url))?.id
  let action: UninstallResult["action"] = "not_installed"
  if (id !== undefined) {
    await api(target, "DELETE", `/webhooks/${encodeURIComponent(id)}`)
    action = "deleted"
  }
  rmSync(join(dataDir, WEBHOOK_FILE), { force: true })
  return { webhookId: id, action }
}
