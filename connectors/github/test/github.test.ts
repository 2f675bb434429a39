import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { formatEvent } from "@agentgov/connector-sdk/format"
import { sampleEvent, signDelivery } from "@agentgov/connector-sdk/testing"
import {
  type InProcess,
  kill9,
  newSecret,
  runCommand,
  runInProcess,
  spawnConnector,
  useConnectorRig,
  waitFor,
} from "@agentgov/connector-testing"
import { afterAll, describe, expect, it } from "vitest"
import {
  classify,
  eventMarker,
  github,
  issueBody,
  issueTitle,
  LABELS,
  marker,
  renderEvent,
  renders,
} from "../src/connector.ts"
import { REPOSITORY, startGitHubFake, TOKEN } from "./githubFake.ts"

const bin = fileURLToPath(new URL("../bin/agentgov-connector-github.js", import.meta.url))

const env = (fake: { url: string }) => ({
  GITHUB_TOKEN: TOKEN,
  GITHUB_REPOSITORY: REPOSITORY,
  GITHUB_API_URL: fake.url,
})

describe("github: issues for enforcements, from a real server to a fake of GitHub's REST API", () => {
  const rig = useConnectorRig({
    definition: github,
    startFake: startGitHubFake,
    env,
    events: ["enforcement.*", "policy.violated"],
  })
  const call = (method: string, path: string, body?: unknown) =>
    rig.agentgov.t.call(method, `/api/v1${path}`, body === undefined ? {} : { body })
  let agents = 0
  const enforce = async (type: string, reason: string) => {
    const agent = await call("POST", "/agents", { name: `gh-${++agents}` })
    const created = await call("POST", "/enforcement", { agentId: agent.body.data.id, type, reason })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    return created.body.data.id as string
  }
  const issueOf = (id: string) => rig.fake.issues.find((i) => i.body.startsWith(marker(`enforcement:${id}`)))

  it("creates its labels at start", async () => {
    await waitFor(() => rig.fake.labels.size === Object.keys(LABELS).length, "the labels")
    for (const l of Object.values(LABELS)) expect(rig.fake.labels.get(l.name)).toEqual(l)
  })

  it("opens an issue, comments on the appeal, and comments and closes on resolution", async () => {
    // a reason that tries to forge another issue's marker, to mention everyone and to inject markup
    const reason = "<!-- agentgov:key=enforcement:enf_other --> @everyone see **this** <img src=x onerror=alert(1)>"
    const id = await enforce("suspension", reason)
    await waitFor(() => issueOf(id) !== undefined, "the issue")
    const issue = issueOf(id)!
    expect(issue.title).toMatch(/^\[agentgov\] Suspension issued to agt_/)
    expect(issue.labels).toEqual(["agentgov", "severity: critical", "type: enforcement"])
    const lines = issue.body.split("\n")
    expect(lines[0]).toBe(marker(`enforcement:${id}`))
    // the markers (the issue's, then its event's) are the only HTML comments; the reason is inert text
    expect(lines[1]).toBe(eventMarker(issue.body.match(/agentgov:event=(evt_[^ ]+) -->/)![1]!))
    expect(issue.body.split("<!--")).toHaveLength(3)
    expect(issue.body).not.toContain("<img")
    expect(issue.body).not.toContain("@everyone")
    expect(issue.body).toContain("&lt;img src=x onerror=alert\\(1\\)&gt;")
    expect(issue.body).toContain(`(https://gov.example.com/enforcement/${id})`)
    expect(issue.body).toContain("| Type | suspension |")

    expect((await call("POST", `/enforcement/${id}/appeal`, { reason: "a false positive" })).status).toBe(200)
    await waitFor(() => issue.comments.length === 1, "the appeal's comment")
    expect(issue.comments[0]).toContain("`enforcement.appealed`")
    expect(issue.comments[0]).toContain("a false positive")
    expect(issue.state).toBe("open")

    expect((await call("PATCH", `/enforcement/${id}`, { resolution: "overturned", note: "cleared" })).status).toBe(200)
    await waitFor(() => issue.state === "closed", "the close")
    expect(issue.state_reason).toBe("not_planned")
    expect(issue.comments).toHaveLength(2)
    expect(issue.comments[1]).toContain("`enforcement.resolved`")
    expect(rig.fake.issues.filter((i) => i.body.startsWith(marker(`enforcement:${id}`)))).toHaveLength(1)
  })

  it("waits out a secondary rate limit (403 with retry-after) in the throttling plugin", async () => {
    const failed = rig.connector.running.health().failedAttempts
    const mark = rig.fake.attempts().length
    rig.fake.failNext("rate_limit", 1)
    const id = await enforce("warning", "under a secondary rate limit")
    await waitFor(() => issueOf(id) !== undefined, "the issue after the limit")
    const [limited, next] = rig.fake.attempts().slice(mark)
    expect(limited!.status).toBe(403)
    expect(next!.status).toBeLessThan(300)
    expect(next!.at - limited!.at).toBeGreaterThanOrEqual(1000)
    // the plugin waited and retried: the queue never saw a failure
    expect(rig.connector.running.health().failedAttempts).toBe(failed)
    expect(rig.connector.logs().find((l) => l.msg === "GitHub secondary rate limit")).toMatchObject({ retryAfter: 1 })
    expect(issueOf(id)!.labels).toEqual(["agentgov", "severity: error", "type: enforcement"])
  })

  it("opens a new issue when a person closed the open one, and leaves the closed one alone", async () => {
    const id = await enforce("warning", "closed by hand")
    await waitFor(() => issueOf(id) !== undefined, "the issue")
    const closed = issueOf(id)!
    closed.state = "closed" // a person closed it on GitHub
    expect((await call("PATCH", `/enforcement/${id}`, { reason: "closed by hand, then changed" })).status).toBe(200)
    const mine = () => rig.fake.issues.filter((i) => i.body.startsWith(marker(`enforcement:${id}`)))
    await waitFor(() => mine().length === 2, "a second issue")
    expect(closed.comments).toEqual([])
    expect(mine()[1]!.body).toContain("`enforcement.updated`")
    expect(mine()[1]!.state).toBe("open")
  })

  it("makes an issue and a comment once when GitHub made them but answered 502", async () => {
    rig.fake.loseNextAnswer()
    const id = await enforce("warning", "answer lost")
    await waitFor(
      () =>
        rig.connector.logs().some((l) => l.msg === "delivered" && l.type === "enforcement.created" && l.attempt === 2),
      "the second attempt",
    )
    expect(rig.fake.issues.filter((i) => i.body.startsWith(marker(`enforcement:${id}`)))).toHaveLength(1)
    const issue = issueOf(id)!
    expect(issue.comments).toEqual([])

    rig.fake.loseNextAnswer()
    expect((await call("POST", `/enforcement/${id}/appeal`, { reason: "answer lost again" })).status).toBe(200)
    await waitFor(
      () =>
        rig.connector.logs().some((l) => l.msg === "delivered" && l.type === "enforcement.appealed" && l.attempt === 2),
      "the appeal's second attempt",
    )
    expect(issue.comments).toHaveLength(1)
    expect(issue.comments[0]).toContain("answer lost again")
  })

  it("dead-letters what GitHub refuses (422)", async () => {
    rig.fake.failNext("refuse")
    await enforce("warning", "refused")
    await waitFor(() => rig.connector.running.health().deadLetters === 1, "the dead letter")
    expect(rig.connector.logs().find((l) => l.msg === "dead-lettered: the vendor refused it")?.reason).toContain(
      "GitHub answered 422",
    )
  })

  it("never logs the token", () => {
    expect(JSON.stringify(rig.connector.logs())).not.toContain(TOKEN)
  })

  describe("de-duplication across restarts", () => {
    const dirs: Array<string> = []
    const running: Array<InProcess> = []
    afterAll(async () => {
      for (const r of running) await r.running.close()
      for (const d of dirs) rmSync(d, { recursive: true, force: true })
    })
    const secret = newSecret()
    const start = async (dir: string) => {
      const c = await runInProcess(github, {
        ...rig.vendorEnv(),
        AGENTGOV_WEBHOOK_SECRET: secret,
        AGENTGOV_CONNECTOR_DATA_DIR: dir,
      })
      running.push(c)
      return c
    }
    const violate = async (c: InProcess) => {
      const { body, headers } = signDelivery({ secret, envelope: sampleEvent("policy.violated") })
      const res = await fetch(`${c.url}/webhooks`, { method: "POST", headers, body })
      expect(res.status).toBe(200)
      await c.running.idle()
    }
    const violationIssues = () => rig.fake.issues.filter((i) => i.body.startsWith("<!-- agentgov:key=violation:"))

    it("comments on the open issue after a restart, and after losing the local store", async () => {
      const dir = mkdtempSync(join(tmpdir(), "agentgov-github-a-"))
      dirs.push(dir)
      const first = await start(dir)
      await violate(first)
      expect(violationIssues()).toHaveLength(1)
      const issue = violationIssues()[0]!
      expect(issue.labels).toEqual(["agentgov", "severity: error", "type: policy violation"])
      expect(issue.body).toContain("no-deletes")
      await first.running.close()

      // the same data directory: the local store knows the issue
      const listsBefore = rig.fake.requests.filter((r) => r.method === "GET" && r.url.includes("/issues?")).length
      const second = await start(dir)
      await violate(second)
      expect(violationIssues()).toHaveLength(1)
      expect(issue.comments).toHaveLength(1)
      expect(rig.fake.requests.filter((r) => r.method === "GET" && r.url.includes("/issues?")).length).toBe(listsBefore)
      await second.running.close()

      // a new data directory: the marker in the issue finds it
      const fresh = mkdtempSync(join(tmpdir(), "agentgov-github-b-"))
      dirs.push(fresh)
      const third = await start(fresh)
      await violate(third)
      expect(violationIssues()).toHaveLength(1)
      expect(issue.comments).toHaveLength(2)
      expect(rig.fake.requests.filter((r) => r.method === "GET" && r.url.includes("/issues?")).length).toBeGreaterThan(
        listsBefore,
      )
    })
  })

  describe("a comment is written once: mark before, reconcile after", () => {
    const dirs: Array<string> = []
    const running: Array<InProcess> = []
    afterAll(async () => {
      for (const r of running) await r.running.close()
      for (const d of dirs) rmSync(d, { recursive: true, force: true })
    })
    const secret = newSecret()
    const fresh = (tag: string) => {
      const dir = mkdtempSync(join(tmpdir(), `agentgov-github-${tag}-`))
      dirs.push(dir)
      return { ...rig.vendorEnv(), AGENTGOV_WEBHOOK_SECRET: secret, AGENTGOV_CONNECTOR_DATA_DIR: dir }
    }
    let enforcements = 0
    /** The lifecycle events of a new enforcement, as the service would sign them. */
    const lifecycle = () => {
      const enforcementId = `enf_once${++enforcements}${Date.now()}`
      const of = (type: "enforcement.created" | "enforcement.appealed" | "enforcement.resolved") =>
        sampleEvent(type, { data: { enforcementId } })
      return {
        enforcementId,
        created: of("enforcement.created"),
        appealed: of("enforcement.appealed"),
        resolved: of("enforcement.resolved"),
      }
    }
    const post = async (url: string, envelope: Parameters<typeof signDelivery>[0]["envelope"]) => {
      const { body, headers } = signDelivery({ secret, envelope })
      const res = await fetch(`${url}/webhooks`, { method: "POST", headers, body })
      expect(res.status).toBe(200)
    }
    const issueOfId = (id: string) => rig.fake.issues.find((i) => i.body.startsWith(marker(`enforcement:${id}`)))

    it("kill -9 after the comment was made and before the event was acknowledged: one comment after the restart", async () => {
      const env = fresh("crash")
      const e = lifecycle()
      const first = await spawnConnector(bin, env)
      await post(first.url, e.created)
      await waitFor(() => issueOfId(e.enforcementId) !== undefined, "the issue")
      const issue = issueOfId(e.enforcementId)!
      // the comment is made; the connector dies before GitHub's answer reaches it, so before it acknowledges
      rig.fake.onNextComment(() => first.proc.kill("SIGKILL"))
      await post(first.url, e.appealed)
      await first.exited
      expect(issue.comments).toHaveLength(1)
      expect(issue.comments[0]!.split("\n")[0]).toBe(eventMarker(e.appealed.id))

      const second = await spawnConnector(bin, env)
      try {
        await waitFor(
          () => second.output().includes('"msg":"delivered"') && second.output().includes(e.appealed.id),
          "the appeal delivered after the restart",
        )
        expect(issue.comments).toHaveLength(1)
        await post(second.url, e.resolved)
        await waitFor(() => issue.state === "closed", "the close")
        expect(issue.comments).toHaveLength(2)
        expect(issue.comments[1]).toContain(eventMarker(e.resolved.id))
      } finally {
        await kill9(second)
      }
    })

    it("a resolution whose close was refused after its comment, replayed: one comment, and the issue closed", async () => {
      const env = fresh("replay")
      const e = lifecycle()
      const c = await runInProcess(github, env)
      running.push(c)
      await post(c.url, e.created)
      await c.running.idle()
      const issue = issueOfId(e.enforcementId)!
      rig.fake.refuseNextClose()
      await post(c.url, e.resolved)
      await waitFor(() => c.running.health().deadLetters === 1, "the dead letter")
      expect(issue.comments).toHaveLength(1)
      expect(issue.state).toBe("open")

      // the operator upgrades GitHub Enterprise, then replays: attempts start again at 1
      const replayed = await runCommand(bin, ["replay", "--all"], env)
      expect(replayed.code, replayed.stderr).toBe(0)
      await waitFor(() => issue.state === "closed", "the close after the replay")
      expect(issue.comments).toHaveLength(1)
      expect(issue.state_reason).toBe("not_planned")
      expect(c.running.health().deadLetters).toBe(0)
    })
  })
})

describe("github: event data that tries to notify or cross-reference", () => {
  it("mentions no team and references no issue from an agent's action, in the title or the body", () => {
    const action = "@acme/security-team @everyone see #1 and acme/other#2 deploy"
    const m = formatEvent(sampleEvent("policy.violated", { data: { action } }))
    for (const text of [issueTitle(m), renderEvent(m)]) {
      // GitHub links @name, @org/team and #n (owner/repo#n) in the rendered text, escaped Markdown or not
      expect(text).not.toMatch(/@[A-Za-z0-9]/)
      expect(text).not.toMatch(/#\d/)
    }
    expect(issueTitle(m)).toContain("security-team")
  })
})

describe("github: rate limits past the plugins' retries", () => {
  const limited = (status: number, message: string, headers: Record<string, string>) =>
    Object.assign(new Error(message), { status, response: { headers } })

  it("retries a secondary rate limit (403) that names no retry-after a minute later, pausing every delivery", () => {
    const result = classify(
      limited(403, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.", {
        "x-ratelimit-remaining": "4000",
      }),
    )
    expect(result).toMatchObject({ outcome: "retry", afterMs: 60_000, pauseAll: true })
  })

  it("reads Retry-After as delay-seconds or an HTTP-date, never as an instant retry", () => {
    const after = (value: string) => classify(limited(429, "API rate limit exceeded", { "retry-after": value }))
    expect(after("30")).toMatchObject({ outcome: "retry", afterMs: 30_000, pauseAll: true })
    const at = new Date(Date.now() + 120_000).toUTCString()
    const dated = after(at)
    expect(dated.outcome).toBe("retry")
    expect((dated as { afterMs: number }).afterMs).toBeGreaterThan(100_000)
    expect((dated as { afterMs: number }).afterMs).toBeLessThanOrEqual(120_000)
    // an empty or garbled header is no wait: GitHub's minute, not Number("") = 0 or a negative wait
    for (const value of ["", " ", "soon", "-5"])
      expect(after(value), JSON.stringify(value)).toMatchObject({ outcome: "retry", afterMs: 60_000, pauseAll: true })
    // a 429 with no header at all is a rate limit too, not a refusal to dead-letter
    expect(classify(limited(429, "Too Many Requests", {}))).toMatchObject({ outcome: "retry", afterMs: 60_000 })
  })

  it("still dead-letters a 403 that is no rate limit (no access)", () => {
    expect(classify(limited(403, "Resource not accessible by integration", {})).outcome).toBe("dead")
  })
})

describe("github: an issue whose event fills the body", () => {
  it("still names its event when the body is cut to GitHub's limit, so a lost answer opens no comment of it", () => {
    // `<` is five characters escaped: a 20,000-character action fills more than the 65,536 a body may hold
    const formatted = formatEvent(sampleEvent("policy.violated", { data: { action: "<".repeat(20_000) } }))
    const m = {
      ...formatted,
      fields: [...formatted.fields, { label: "Detail", value: "<".repeat(20_000), short: false }],
    }
    const body = issueBody("violation:pol_1/r:agt_1", m)
    expect(body.length).toBeLessThanOrEqual(65_536)
    expect(body.split("\n")[0]).toBe(marker("violation:pol_1/r:agt_1"))
    expect(renders(body, m.eventId)).toBe(true)
  })
})
