import { type AnyWebhookEvent, parseRetryAfter } from "@agentgov/connector-sdk"
import {
  dropBidiControls,
  type FormattedEvent,
  formatEvent,
  SEVERITY_STYLE,
  truncate,
  when,
} from "@agentgov/connector-sdk/format"
import {
  type DeliveryResult,
  dead,
  defineConnector,
  type Logger,
  ok,
  retry,
  type StateStore,
} from "@agentgov/connector-sdk/runtime"
import { retry as retryPlugin } from "@octokit/plugin-retry"
import { throttling } from "@octokit/plugin-throttling"
import { Octokit } from "@octokit/rest"

/**
 * The GitHub connector: an issue per enforcement and per rule violation (per agent), found again
 * by a hidden marker in its body and by the local store, so a repeat comments on the open issue
 * instead of opening another; an enforcement's resolution comments and closes it.
 */

/** GitHub's limits: an issue title 256 characters, a body or comment 65,536. */
export const GITHUB_LIMITS = { title: 256, body: 65_536 } as const

/** The labels the connector uses; created at start when missing. */
export const LABELS = {
  agentgov: { name: "agentgov", color: "5319e7", description: "Opened by the agentgov connector" },
  critical: { name: "severity: critical", color: "7a0916", description: "agentgov severity" },
  error: { name: "severity: error", color: "d92d20", description: "agentgov severity" },
  warning: { name: "severity: warning", color: "f79009", description: "agentgov severity" },
  info: { name: "severity: info", color: "2e90fa", description: "agentgov severity" },
  enforcement: { name: "type: enforcement", color: "b60205", description: "an agentgov enforcement" },
  violation: { name: "type: policy violation", color: "fbca04", description: "an agentgov policy violation" },
} as const

const OTHER_TYPE_COLOR = "c5def5"

const str = (v: unknown) => (typeof v === "string" && v !== "" ? v : undefined)

/** The issue an event belongs to: its enforcement, its rule and agent, or the event alone. */
export const issueKey = (event: AnyWebhookEvent): string => {
  const d = (event.data ?? {}) as Record<string, any>
  if (event.type.startsWith("enforcement.") && str(d.enforcementId)) return `enforcement:${d.enforcementId}`
  if (event.type === "policy.violated") {
    const v = Array.isArray(d.violations) ? d.violations[0] : undefined
    const rule = `${str(v?.policyId) ?? "-"}/${str(v?.ruleId) ?? str(v?.code) ?? "-"}`
    return `violation:${rule}:${str(d.agentId) ?? "-"}`
  }
  return `event:${event.id}`
}

/** The hidden line that names an issue's key; the first line of every issue the connector opens. */
export const marker = (key: string) => `<!-- agentgov:key=${key} -->`

/** The type label of an event. */
const typeLabel = (type: string): { name: string; color: string; description: string } =>
  type.startsWith("enforcement.")
    ? LABELS.enforcement
    : type === "policy.violated"
      ? LABELS.violation
      : { name: `type: ${truncate(type.split(".")[0]!, 40)}`, color: OTHER_TYPE_COLOR, description: "agentgov events" }

/**
 * Event text that notifies no one and references nothing: GitHub links `@name`, `@org/team`, `#n` and
 * `owner/repo#n` in the rendered text (a Markdown escape does not stop it), notifying the team and
 * adding a cross-reference to the issue's timeline; a zero-width space after `@` and `#` breaks them.
 * Titles too: an issue's title is rendered with its references. Unicode's bidirectional embedding, override and
 * isolate controls (U+202A–U+202E, U+2066–U+2069) are dropped: they reverse what a reader sees.
 */
export const quiet = (text: string): string => dropBidiControls(text).replace(/[@#]/g, "$&\u200b")

/**
 * Event text as inert Markdown: no HTML (so no forged marker, no markup), no @mention or #reference
 * that would notify or link, no emphasis, links or tables from the event's own characters.
 */
export const inert = (text: string): string =>
  quiet(
    text
      .replace(/&/g, "&amp;")
      .replace(/</g, "&lt;")
      .replace(/>/g, "&gt;")
      .replace(/([\\`*_{}[\]()#+!|~])/g, "\\$1")
      .replace(/\r?\n/g, " "),
  )

const row = (label: string, value: string) => `| ${inert(label)} | ${inert(value)} |`

/** The Markdown of one event: a heading line, the summary, the fields as a table, the link. */
export const renderEvent = (m: FormattedEvent): string => {
  const style = SEVERITY_STYLE[m.severity]
  const lines = [
    `**${style.emoji} ${style.label}** · \`${m.eventType.replace(/`/g, "")}\` · ${when(m.timestamp) ?? m.timestamp}`,
    "",
  ]
  if (m.summary !== "") lines.push(`> ${inert(m.summary)}`, "")
  if (m.fields.length > 0) lines.push("| | |", "|---|---|", ...m.fields.map((f) => row(f.label, f.value)), "")
  if (m.link) lines.push(`[${inert(m.link.label)}](${encodeURI(m.link.url)})`, "")
  lines.push(`<sub>agentgov event \`${m.eventId.replace(/`/g, "")}\`</sub>`)
  return lines.join("\n")
}

const fit = (text: string) => truncate(text, GITHUB_LIMITS.body - 100)

/** The hidden first line of every comment the connector writes: the event it renders. */
export const eventMarker = (eventId: string) => `<!-- agentgov:event=${eventId} -->`

/**
 * Whether `text` (an issue's body, a comment) is the rendering of event `eventId`: its hidden marker, or
 * the visible line every rendering ends with (comments written before the marker existed).
 */
export const renders = (text: string, eventId: string) =>
  text.includes(eventMarker(eventId)) || text.includes(`<sub>agentgov event \`${eventId}\`</sub>`)

/**
 * The writes go once through Octokit (`retries: 0`): a 5xx whose write GitHub in fact made would
 * be made twice by the retry plugin. The queue retries instead, and looks first.
 */
const ONCE = { request: { retries: 0 } } as const

/** The events whose comment on issue `key` the connector started to write (the newest last). */
const COMMENT_MARKS = 100
const marksKey = (key: string) => `comments:${key}`
const marked = (state: StateStore, key: string): Array<string> => {
  try {
    const ids = JSON.parse(state.get(marksKey(key)) ?? "[]")
    return Array.isArray(ids) ? ids.filter((id): id is string => typeof id === "string") : []
  } catch {
    return []
  }
}

/**
 * Comments event `m` on issue `number` of `key` exactly once. Mark before, reconcile after: the event's id
 * is stored in the local store before the comment is written, and the comment's first line is the event's
 * hidden marker; an event found marked (its earlier attempt may have written the comment and then crashed,
 * lost GitHub's answer, or been dead-lettered after it and replayed, which starts its attempts again) first
 * looks for a comment carrying its marker, and writes none when there is one.
 */
const commentOnce = async (client: Client, key: string, number: number, m: FormattedEvent, state: StateStore) => {
  const { owner, repo, octokit } = client
  const marks = marked(state, key)
  if (marks.includes(m.eventId)) {
    const comments = await octokit.paginate(octokit.rest.issues.listComments, {
      owner,
      repo,
      issue_number: number,
      per_page: 100,
    })
    if ((comments as ReadonlyArray<{ body?: string }>).some((c) => renders(c.body ?? "", m.eventId))) return
  } else {
    state.set(marksKey(key), JSON.stringify([...marks, m.eventId].slice(-COMMENT_MARKS)))
  }
  await octokit.rest.issues.createComment({
    owner,
    repo,
    issue_number: number,
    body: fit(`${eventMarker(m.eventId)}\n${renderEvent(m)}`),
    ...ONCE,
  })
}

/**
 * The body of a new issue: the marker, the event's own hidden marker (so a body cut to GitHub's limit
 * still names its event), the event, and what happens next.
 */
export const issueBody = (key: string, m: FormattedEvent): string =>
  fit(
    [
      marker(key),
      eventMarker(m.eventId),
      renderEvent(m),
      "",
      key.startsWith("enforcement:")
        ? "_Later events of this enforcement are added as comments; its resolution closes this issue._"
        : key.startsWith("violation:")
          ? "_Repeats of this rule's violation by this agent are added as comments while this issue is open._"
          : "",
    ].join("\n"),
  )

export const issueTitle = (m: FormattedEvent) => truncate(`[agentgov] ${quiet(m.title)}`, GITHUB_LIMITS.title)

type GitHub = InstanceType<ReturnType<typeof Octokit.plugin>>

interface Client {
  readonly octokit: GitHub
  readonly owner: string
  readonly repo: string
  /** Label names known to exist. */
  readonly labels: Set<string>
  /** The start's label creation, awaited before each delivery (and tried again when it failed). */
  ready: Promise<void> | undefined
  readonly log: Logger
}

const statusOf = (error: unknown) => (error as { status?: number }).status

const ensureLabel = async (client: Client, label: { name: string; color: string; description: string }) => {
  if (client.labels.has(label.name)) return
  try {
    await client.octokit.rest.issues.createLabel({ owner: client.owner, repo: client.repo, ...label })
  } catch (error) {
    // 422 already_exists: someone made it since we listed
    if (statusOf(error) !== 422) throw error
  }
  client.labels.add(label.name)
}

const ensureLabels = async (client: Client) => {
  const existing = await client.octokit.paginate(client.octokit.rest.issues.listLabelsForRepo, {
    owner: client.owner,
    repo: client.repo,
    per_page: 100,
  })
  for (const l of existing) client.labels.add(l.name)
  for (const label of Object.values(LABELS)) await ensureLabel(client, label)
}

/**
 * The open issue of `key`: the local store's, while it is open (one a person closed, deleted or
 * moved is forgotten), else the one among the open agentgov issues whose first line is the marker.
 */
const findIssue = async (
  client: Client,
  key: string,
  state: StateStore,
): Promise<{ readonly number: number; readonly body: string } | undefined> => {
  const known = state.get(`issue:${key}`)
  if (known !== undefined) {
    try {
      const { data } = await client.octokit.rest.issues.get({
        owner: client.owner,
        repo: client.repo,
        issue_number: Number(known),
      })
      if (data.state === "open") return { number: Number(known), body: data.body ?? "" }
    } catch (error) {
      if (statusOf(error) !== 404 && statusOf(error) !== 410) throw error
    }
    state.delete(`issue:${key}`)
  }
  const needle = marker(key)
  for await (const page of client.octokit.paginate.iterator(client.octokit.rest.issues.listForRepo, {
    owner: client.owner,
    repo: client.repo,
    labels: LABELS.agentgov.name,
    state: "open",
    per_page: 100,
  })) {
    const issues = page.data as ReadonlyArray<{ number: number; body?: string | null; pull_request?: unknown }>
    const found = issues.find((i) => !i.pull_request && (i.body ?? "").split("\n")[0] === needle)
    if (found) {
      state.set(`issue:${key}`, String(found.number))
      return { number: found.number, body: found.body ?? "" }
    }
  }
  return undefined
}

/** GitHub's wait after a secondary rate limit that names none ("at least one minute"). */
const SECONDARY_WAIT_MS = 60_000

/** What a GitHub failure (after the plugins' own waiting and retrying) means for the queue. */
export const classify = (error: unknown): DeliveryResult => {
  const status = statusOf(error)
  const headers = ((error as { response?: { headers?: Record<string, string> } }).response?.headers ?? {}) as Record<
    string,
    string | undefined
  >
  // delay-seconds or an HTTP-date, as parseRetryAfter reads it for every connector; an empty or garbled value
  // is no wait at all (Number("") is 0: the queue would have gone again at once)
  const header = headers["retry-after"]
  const after = header === undefined ? undefined : parseRetryAfter(header)
  if (status === 403 || status === 429) {
    if (after !== undefined || headers["x-ratelimit-remaining"] === "0") {
      const reset = Number(headers["x-ratelimit-reset"]) * 1000 - Date.now()
      const afterMs = after ?? (Number.isFinite(reset) ? Math.max(0, reset) : undefined)
      return retry(`GitHub rate limit (${status})`, { ...(afterMs === undefined ? {} : { afterMs }), pauseAll: true })
    }
    // a rate limit that names no usable wait (a secondary one without either header, a 429 alone, a Retry-After
    // that is empty or garbled): GitHub asks for at least a minute's wait
    if (status === 429 || header !== undefined || /secondary rate limit/i.test((error as Error).message ?? ""))
      return retry(`GitHub secondary rate limit (${status})`, { afterMs: SECONDARY_WAIT_MS, pauseAll: true })
  }
  if (status === undefined || status >= 500) return retry((error as Error).message ?? String(error))
  // 401 bad credentials, 403 no access, 404 no such repository, 410 issues disabled, 422 refused
  return dead(`GitHub answered ${status}: ${truncate((error as Error).message ?? "", 300)}`)
}

const THROTTLE_RETRIES = 2

export const github = defineConnector({
  name: "github",
  description: "opens, comments on and closes GitHub issues for enforcements and policy violations",
  defaultEvents: ["enforcement.*", "policy.violated"],
  settings: {
    token: {
      env: "GITHUB_TOKEN",
      description: "a token with Issues read and write on the repository (fine-grained) or `repo` (classic)",
      required: true,
      secret: true,
    },
    repository: {
      env: "GITHUB_REPOSITORY",
      description: "owner/name of the repository the issues go to",
      required: true,
      check: (v) => (/^[A-Za-z0-9-]+\/[A-Za-z0-9._-]+$/.test(v) ? undefined : "must be owner/name"),
    },
    apiUrl: {
      env: "GITHUB_API_URL",
      description: "the REST API's base URL (GitHub Enterprise Server: https://<host>/api/v3)",
      kind: "https",
      default: "https://api.github.com",
    },
  },
  setup: (settings, { log }): Client => {
    const [owner, repo] = settings.repository.split("/") as [string, string]
    const GitHub = Octokit.plugin(throttling, retryPlugin)
    // the plugins wait for GitHub's rate limits (the throttling plugin also spaces writes a second
    // apart, as GitHub asks); past THROTTLE_RETRIES, the error goes to the queue, which waits too
    const onLimit =
      (kind: string) =>
      (retryAfter: number, options: { method?: string; url?: string }, _o: unknown, retryCount: number) => {
        log.warn(`GitHub ${kind} rate limit`, { retryAfter, method: options.method, url: options.url, retryCount })
        return retryCount < THROTTLE_RETRIES
      }
    const octokit = new GitHub({
      auth: settings.token,
      baseUrl: settings.apiUrl.replace(/\/+$/, ""),
      userAgent: "agentgov-connector-github",
      log: { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} },
      throttle: { onRateLimit: onLimit("primary"), onSecondaryRateLimit: onLimit("secondary") },
      retry: { retries: 2 },
      request: { timeout: 20_000 },
    })
    const client: Client = { octokit, owner, repo, labels: new Set(), ready: undefined, log }
    client.ready = ensureLabels(client)
    client.ready.catch((error: unknown) => {
      log.warn("creating the labels failed; tried again with the first event", { error: (error as Error).message })
      client.ready = undefined
    })
    return client
  },
  orderingKey: (event) => issueKey(event),
  deliver: async (event, { client, severity, dashboardUrl, state, log }) => {
    try {
      client.ready ??= ensureLabels(client)
      await client.ready
      const key = issueKey(event)
      const m = formatEvent(event, { severity, dashboardUrl })
      const { owner, repo, octokit } = client
      const found = await findIssue(client, key, state)
      if (event.type === "enforcement.resolved") {
        if (found === undefined) {
          log.info("no open issue for this enforcement; nothing to close", { key })
          return ok()
        }
        await commentOnce(client, key, found.number, m, state)
        const overturned = (event.data as { resolution?: string }).resolution === "overturned"
        await octokit.rest.issues.update({
          owner,
          repo,
          issue_number: found.number,
          state: "closed",
          state_reason: overturned ? "not_planned" : "completed",
        })
        state.delete(`issue:${key}`)
        state.delete(marksKey(key))
        return ok()
      }
      // an earlier attempt opened this very issue, and its answer was lost
      if (found && renders(found.body, m.eventId)) return ok()
      if (found) {
        await commentOnce(client, key, found.number, m, state)
        return ok()
      }
      const type = typeLabel(m.eventType)
      await ensureLabel(client, type)
      const created = await octokit.rest.issues.create({
        owner,
        repo,
        title: issueTitle(m),
        body: issueBody(key, m),
        labels: [LABELS.agentgov.name, LABELS[m.severity].name, type.name],
        ...ONCE,
      })
      state.set(`issue:${key}`, String(created.data.number))
      log.info("issue opened", { key, number: created.data.number })
      return ok()
    } catch (error) {
      return classify(error)
    }
  },
})
