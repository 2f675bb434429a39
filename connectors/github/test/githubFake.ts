import { type FakeAnswer, type FakeRequest, startScriptedFake, type VendorFake } from "@agentgov/connector-testing"

/**
 * A fake of the GitHub REST endpoints the connector uses (labels, issues, comments) for one
 * repository, on loopback, holding to what GitHub documents: `401 Bad credentials`; `404 Not
 * Found` for another repository; `422 Validation Failed` for a label that exists, a title over 256
 * characters or a body over 65,536; pagination by `per_page`/`page` with a `Link` header; and the
 * secondary rate limit: `403` with "You have exceeded a secondary rate limit" and `retry-after`.
 */

export const TOKEN = "ghp_fakeToken0123456789abcdefABCDEF0123"
export const REPOSITORY = "acme/agents"

export interface Issue {
  number: number
  title: string
  body: string
  labels: Array<string>
  state: "open" | "closed"
  state_reason: string | null
  comments: Array<string>
}

export interface GitHubFake extends VendorFake {
  readonly issues: Array<Issue>
  readonly labels: Map<string, { name: string; color: string; description: string }>
  readonly requests: ReadonlyArray<FakeRequest>
  /** The next issue or comment is made, but answered 502 (GitHub's "the write may have happened"). */
  readonly loseNextAnswer: () => void
  /** `f` runs when the next comment has been made, before it is answered (a test kills the connector there). */
  readonly onNextComment: (f: () => void) => void
  /**
   * The next close is refused with 422 on `state_reason`, as a GitHub Enterprise Server older than 3.4
   * refuses it (the comment before it was made).
   */
  readonly refuseNextClose: () => void
}

const validation = (message: string, code: string, field: string, resource: string): FakeAnswer => ({
  status: 422,
  body: {
    message: "Validation Failed",
    errors: [{ resource, code, field, message }],
    documentation_url: "https://docs.github.com/rest",
  },
})

const notFound: FakeAnswer = {
  status: 404,
  body: { message: "Not Found", documentation_url: "https://docs.github.com/rest" },
}

const issueJson = (base: string, i: Issue) => ({
  id: 1000 + i.number,
  number: i.number,
  title: i.title,
  body: i.body,
  state: i.state,
  state_reason: i.state_reason,
  labels: i.labels.map((name) => ({ name })),
  html_url: `https://github.com/${REPOSITORY}/issues/${i.number}`,
  url: `${base}/repos/${REPOSITORY}/issues/${i.number}`,
  comments: i.comments.length,
})

const page = (base: string, path: string, query: URLSearchParams, items: Array<unknown>): FakeAnswer => {
  const perPage = Math.min(100, Number(query.get("per_page") ?? 30))
  const n = Number(query.get("page") ?? 1)
  const slice = items.slice((n - 1) * perPage, n * perPage)
  const headers: Record<string, string> = {}
  if (n * perPage < items.length) {
    const next = new URLSearchParams(query)
    next.set("page", String(n + 1))
    headers.link = `<${base}${path}?${next}>; rel="next"`
  }
  return { status: 200, headers, body: slice }
}

export const startGitHubFake = async (): Promise<GitHubFake> => {
  const issues: Array<Issue> = []
  const labels = new Map<string, { name: string; color: string; description: string }>()
  let base = ""
  let loseAnswer = false
  let afterComment: (() => void) | undefined
  let refuseClose = false
  const lost = (made: FakeAnswer): FakeAnswer => {
    if (!loseAnswer) return made
    loseAnswer = false
    return { status: 502, body: { message: "Server Error" } }
  }
  const answer = (r: FakeRequest): FakeAnswer => {
    const auth = String(r.headers.authorization ?? "")
    if (auth !== `token ${TOKEN}` && auth !== `bearer ${TOKEN}`)
      return { status: 401, body: { message: "Bad credentials", documentation_url: "https://docs.github.com/rest" } }
    const url = new URL(r.url, "http://fake")
    const prefix = `/repos/${REPOSITORY}`
    if (!url.pathname.startsWith(`${prefix}/`)) return notFound
    const path = url.pathname.slice(prefix.length)
    const body = r.raw === "" ? {} : JSON.parse(r.raw)
    if (path === "/labels" && r.method === "GET")
      return page(base, url.pathname, url.searchParams, [...labels.values()])
    if (path === "/labels" && r.method === "POST") {
      if (typeof body.name !== "string" || body.name === "")
        return validation("name is missing", "missing_field", "name", "Label")
      if ([...labels.keys()].some((k) => k.toLowerCase() === body.name.toLowerCase()))
        return validation("already_exists", "already_exists", "name", "Label")
      labels.set(body.name, { name: body.name, color: body.color, description: body.description ?? "" })
      return { status: 201, body: labels.get(body.name) }
    }
    if (path === "/issues" && r.method === "GET") {
      const state = url.searchParams.get("state") ?? "open"
      const wanted = (url.searchParams.get("labels") ?? "").split(",").filter((l) => l !== "")
      const list = issues
        .filter((i) => state === "all" || i.state === state)
        .filter((i) => wanted.every((l) => i.labels.includes(l)))
        .sort((a, b) => b.number - a.number)
        .map((i) => issueJson(base, i))
      return page(base, url.pathname, url.searchParams, list)
    }
    if (path === "/issues" && r.method === "POST") {
      if (typeof body.title !== "string" || body.title === "")
        return validation("title is missing", "missing_field", "title", "Issue")
      if (body.title.length > 256)
        return validation("title is too long (maximum is 256 characters)", "custom", "title", "Issue")
      if ((body.body ?? "").length > 65_536)
        return validation("body is too long (maximum is 65536 characters)", "custom", "body", "Issue")
      for (const l of body.labels ?? [])
        if (!labels.has(l)) labels.set(l, { name: l, color: "ededed", description: "" })
      const issue: Issue = {
        number: issues.length + 1,
        title: body.title,
        body: body.body ?? "",
        labels: body.labels ?? [],
        state: "open",
        state_reason: null,
        comments: [],
      }
      issues.push(issue)
      return lost({ status: 201, body: issueJson(base, issue) })
    }
    const one = /^\/issues\/(\d+)(\/comments)?$/.exec(path)
    const issue = one ? issues[Number(one[1]) - 1] : undefined
    if (!one || !issue) return notFound
    if (one[2] && r.method === "POST") {
      if (typeof body.body !== "string" || body.body === "")
        return validation("body is missing", "missing_field", "body", "IssueComment")
      if (body.body.length > 65_536)
        return validation("body is too long (maximum is 65536 characters)", "custom", "body", "IssueComment")
      issue.comments.push(body.body)
      const f = afterComment
      afterComment = undefined
      f?.()
      return lost({ status: 201, body: { id: issue.comments.length, body: body.body } })
    }
    if (one[2] && r.method === "GET") {
      const list = issue.comments.map((c, i) => ({ id: i + 1, body: c }))
      return page(base, url.pathname, url.searchParams, list)
    }
    if (!one[2] && r.method === "GET") return { status: 200, body: issueJson(base, issue) }
    if (!one[2] && r.method === "PATCH") {
      if (body.state !== undefined && !["open", "closed"].includes(body.state))
        return validation("state is invalid", "invalid", "state", "Issue")
      if (refuseClose && body.state === "closed") {
        refuseClose = false
        return validation("state_reason is not a permitted key", "invalid", "state_reason", "Issue")
      }
      if (body.state) issue.state = body.state
      if (body.state_reason !== undefined) issue.state_reason = body.state_reason
      return { status: 200, body: issueJson(base, issue) }
    }
    return notFound
  }
  const { http, attempts, failNext } = await startScriptedFake(answer, {
    rateLimit: (seconds) => ({
      status: 403,
      headers: { "retry-after": String(seconds), "x-ratelimit-remaining": "4000" },
      body: {
        message: "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
        documentation_url:
          "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits",
      },
    }),
    refuse: () => validation("title is too long (maximum is 256 characters)", "custom", "title", "Issue"),
  })
  base = http.url
  return {
    url: http.url,
    issues,
    labels,
    requests: http.requests,
    loseNextAnswer: () => {
      loseAnswer = true
    },
    onNextComment: (f) => {
      afterComment = f
    },
    refuseNextClose: () => {
      refuseClose = true
    },
    accepted: () => issues.flatMap((i) => [`${i.title}\n${i.body}`, ...i.comments]),
    attempts,
    failNext,
    close: http.close,
  }
}
