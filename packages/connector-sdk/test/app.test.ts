import { request } from "node:http"
import { afterEach, describe, expect, it } from "vitest"
import {
  type AnyWebhookEvent,
  type DeadLetter,
  HandlerTimeoutError,
  NonRetryableError,
  RetryableError,
  type RetryInfo,
} from "../src/index.ts"
import { closeAll, envelope, gate, hmacHex, post, SECRET, signedHeaders, start } from "./helpers.ts"

afterEach(closeAll)

const deliver = (endpoint: string, env: object, options: { id?: string; timestamp?: number; secret?: string } = {}) => {
  const body = JSON.stringify(env)
  return post(endpoint, body, signedHeaders(body, options))
}

/** A sleep that records the waits asked for and returns at once: retries without wall-clock waits. */
const recordingSleep = () => {
  const waits: Array<number> = []
  const sleep = (ms: number, signal: AbortSignal) => {
    waits.push(ms)
    return signal.aborted ? Promise.reject(signal.reason) : Promise.resolve()
  }
  return { waits, sleep }
}

describe("routing", () => {
  it("runs every handler whose pattern matches: exact, alias, prefix.* and *", async () => {
    const calls: Array<string> = []
    const { app, endpoint } = await start({}, (app) =>
      app
        .on("approval.requested", (event) => {
          calls.push(`exact ${event.type} ${event.data.approvalId}`)
        })
        .on("approval.*", (event) => {
          calls.push(`approval.* ${event.type}`)
        })
        .on("enforcement.issued", (event) => {
          calls.push(`alias ${event.type} ${event.data.enforcementId}`)
        })
        .on("enforcement.*", (event) => {
          calls.push(`enforcement.* ${event.type}`)
        })
        .on("*", (event) => {
          calls.push(`* ${event.type}`)
        }),
    )

    const cases: Array<[object, Array<string>]> = [
      [
        envelope("approval.requested", { approvalId: "apr_9" }),
        ["exact approval.requested apr_9", "approval.* approval.requested", "* approval.requested"],
      ],
      [envelope("approval.decided"), ["approval.* approval.decided", "* approval.decided"]],
      [
        envelope("enforcement.created", { enforcementId: "enf_1" }),
        ["alias enforcement.created enf_1", "enforcement.* enforcement.created", "* enforcement.created"],
      ],
      [envelope("badge.earned"), ["* badge.earned"]],
      [envelope("deploy.finished", { build: 7 }), ["* deploy.finished"]],
      [envelope("approvalish.requested"), ["* approvalish.requested"]],
    ]
    for (const [env, expected] of cases) {
      calls.length = 0
      const res = await deliver(endpoint, env)
      expect(res.status).toBe(202)
      await app.idle()
      expect(calls.sort()).toEqual([...expected].sort())
    }
  })

  it("accepts (202) an event no handler wants, and refuses malformed patterns", async () => {
    const { endpoint, app } = await start({}, (app) => app.on("badge.earned", () => {}))
    const res = await deliver(endpoint, envelope("policy.evaluated"))
    expect(res.status).toBe(202)
    expect(await res.json()).toMatchObject({ ok: true, data: { handlers: 0 } })
    expect(() => app.on("enforcement.*.x", () => {})).toThrow(TypeError)
    expect(() => app.on("*.created", () => {})).toThrow(TypeError)
  })
})

describe("answering", () => {
  it("answers 202 before the handler finishes, then runs it to the end", async () => {
    const release = gate()
    let started = false
    let finished = false
    const { app, endpoint, url } = await start({}, (app) =>
      app.on("approval.requested", async () => {
        started = true
        await release.promise
        finished = true
      }),
    )
    const env = envelope()
    const res = await deliver(endpoint, env)
    expect(res.status).toBe(202)
    expect(await res.json()).toEqual({ ok: true, data: { eventId: env.id, handlers: 1 } })
    expect(finished).toBe(false)

    await expect.poll(() => started, { timeout: 10_000 }).toBe(true)
    const health = await (await fetch(`${url}/healthz`)).json()
    expect(health).toMatchObject({ status: "ok", inFlight: 1, queueDepth: 0 })

    release.open()
    await app.idle()
    expect(finished).toBe(true)
  })

  it("de-duplicates by event id: a redelivery is answered 200 and not run again", async () => {
    const seen: Array<string> = []
    const { app, endpoint } = await start({}, (app) =>
      app.on("*", (event) => {
        seen.push(event.id)
      }),
    )
    const env = envelope()
    expect((await deliver(endpoint, env, { id: "dlv_first" })).status).toBe(202)
    // the service's retry of the same event: a new attempt, newly signed
    const again = await deliver(
      endpoint,
      { ...env, metadata: { ...env.metadata, attempt: 2 } },
      {
        id: "dlv_first",
        timestamp: Math.floor(Date.now() / 1000) + 1,
      },
    )
    expect(again.status).toBe(200)
    expect(await again.json()).toEqual({ ok: true, data: { eventId: env.id, duplicate: true } })
    await app.idle()
    expect(seen).toEqual([env.id])
    expect(app.health()).toMatchObject({ received: 1, duplicates: 1 })
  })

  it("answers an exact replay of a request 200 without running the handler again", async () => {
    let runs = 0
    const { app, endpoint } = await start({}, (app) =>
      app.on("*", () => {
        runs++
      }),
    )
    const body = JSON.stringify(envelope())
    const headers = signedHeaders(body)
    expect((await post(endpoint, body, headers)).status).toBe(202)
    expect((await post(endpoint, body, headers)).status).toBe(200)
    await app.idle()
    expect(runs).toBe(1)
  })

  it("refuses unverified deliveries with 401 and never runs a handler for them", async () => {
    let runs = 0
    const { app, endpoint } = await start({}, (app) =>
      app.on("*", () => {
        runs++
      }),
    )
    const body = JSON.stringify(envelope())
    const good = signedHeaders(body)
    // Outside the 300 s window by a minute either way: whole seconds, signed before the requests go out, so a
    // margin of 1 s (301) let a slow run's clock catch up with the future one (webhook.test.ts checks the exact
    // edges on a fixed clock).
    const cases: Array<Record<string, string>> = [
      signedHeaders(body, { secret: "wrong" }),
      { ...good, "x-svc-webhook-signature": `v1=${"a".repeat(64)}` },
      { "content-type": "application/json" },
      signedHeaders(body, { timestamp: Math.floor(Date.now() / 1000) - 360 }),
      signedHeaders(body, { timestamp: Math.floor(Date.now() / 1000) + 360 }),
      { "content-type": "application/json", "x-svc-signature": hmacHex(SECRET, body) },
    ]
    for (const headers of cases) {
      const res = await post(endpoint, body, headers)
      expect(res.status).toBe(401)
      expect(await res.json()).toMatchObject({ ok: false, error: { code: "UNAUTHORIZED" } })
    }
    // a changed body under a good signature
    expect((await post(endpoint, body.replace("ws_test", "ws_evil"), good)).status).toBe(401)
    await app.idle()
    expect(runs).toBe(0)
  })

  it("accepts the legacy signature only when allowLegacy is on", async () => {
    let runs = 0
    const { app, endpoint } = await start({ allowLegacy: true }, (app) =>
      app.on("*", () => {
        runs++
      }),
    )
    const body = JSON.stringify(envelope())
    const headers = { "content-type": "application/json", "x-svc-signature": hmacHex(SECRET, body) }
    expect((await post(endpoint, body, headers)).status).toBe(202)
    // nothing dates a legacy delivery: a replay is caught by the event id alone
    expect((await post(endpoint, body, headers)).status).toBe(200)
    expect((await post(endpoint, body, { ...headers, "x-svc-signature": hmacHex("wrong", body) })).status).toBe(401)
    await app.idle()
    expect(runs).toBe(1)
  })

  it("answers 400 to a signed body that is not an event envelope", async () => {
    const { endpoint } = await start()
    for (const body of ["{not json", JSON.stringify({ hello: "world" })]) {
      const res = await post(endpoint, body, signedHeaders(body))
      expect(res.status).toBe(400)
      expect(await res.json()).toMatchObject({ ok: false, error: { code: "BAD_REQUEST" } })
    }
  })

  it("answers 405 to other methods, 404 to other paths, and serves a configured path", async () => {
    const { url, endpoint } = await start({ path: "/hooks/agentgov" })
    expect(endpoint).toBe(`${url}/hooks/agentgov`)
    const get = await fetch(endpoint)
    expect(get.status).toBe(405)
    expect(get.headers.get("allow")).toBe("POST")
    expect((await fetch(endpoint, { method: "PUT", body: "{}" })).status).toBe(405)
    expect((await deliver(`${url}/webhooks`, envelope())).status).toBe(404)
    expect((await deliver(endpoint, envelope())).status).toBe(202)
    const postHealth = await fetch(`${url}/healthz`, { method: "POST" })
    expect(postHealth.status).toBe(405)
  })

  it("answers 413 to a body over the limit, declared or streamed", async () => {
    let runs = 0
    const { app, endpoint } = await start({ maxBodyBytes: 1024 }, (app) =>
      app.on("*", () => {
        runs++
      }),
    )
    const big = JSON.stringify(envelope("deploy.finished", { log: "x".repeat(4096) }))
    const res = await post(endpoint, big, signedHeaders(big))
    expect(res.status).toBe(413)
    expect(await res.json()).toMatchObject({ ok: false, error: { code: "PAYLOAD_TOO_LARGE" } })

    // chunked, no Content-Length: cut off while streaming
    const streamed = await new Promise<number>((resolve, reject) => {
      const req = request(endpoint, { method: "POST", headers: signedHeaders(big) }, (r) => {
        r.resume()
        resolve(r.statusCode ?? 0)
      })
      req.on("error", reject)
      for (let i = 0; i < big.length; i += 512) req.write(big.slice(i, i + 512))
      req.end()
    })
    expect(streamed).toBe(413)

    const small = JSON.stringify(envelope())
    expect((await post(endpoint, small, signedHeaders(small))).status).toBe(202)
    await app.idle()
    expect(runs).toBe(1)
  })

  it("serves /healthz with the queue depth and the dead letters", async () => {
    const { url } = await start()
    const res = await fetch(`${url}/healthz`)
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toContain("application/json")
    expect(await res.json()).toEqual({
      status: "ok",
      queueDepth: 0,
      inFlight: 0,
      retrying: 0,
      deadLetters: 0,
      received: 0,
      duplicates: 0,
      succeeded: 0,
      failedAttempts: 0,
    })
  })
})

describe("background work", () => {
  it("retries a failing handler, honouring Retry-After, with exponential backoff otherwise", async () => {
    const { waits, sleep } = recordingSleep()
    const retries: Array<RetryInfo> = []
    let attempts = 0
    const { app, endpoint } = await start(
      {
        sleep,
        random: () => 0,
        retry: { maxAttempts: 6, initialDelayMs: 100 },
        onRetry: (info) => {
          retries.push(info)
        },
      },
      (app) =>
        app.on("approval.requested", (_event, context) => {
          attempts++
          expect(context.attempt).toBe(attempts)
          if (attempts === 1) throw new RetryableError("slow down", { retryAfterMs: 1234 })
          // as Octokit and most HTTP clients throw on 429
          if (attempts === 2) throw Object.assign(new Error("429"), { response: { headers: { "retry-after": "7" } } })
          // as Slack's WebClient throws (seconds)
          if (attempts === 3) throw Object.assign(new Error("rate limited"), { retryAfter: 2 })
          if (attempts === 4) throw new Error("flaky")
          if (attempts === 5) throw new Error("flaky again")
        }),
    )
    expect((await deliver(endpoint, envelope())).status).toBe(202)
    await app.idle()
    expect(attempts).toBe(6)
    // with random() = 0 the backoff is half of 100·2^(n−1): attempt 4 → 400, attempt 5 → 800
    expect(waits).toEqual([1234, 7000, 2000, 400, 800])
    expect(retries.map((r) => r.attempt)).toEqual([1, 2, 3, 4, 5])
    expect(app.deadLetters()).toEqual([])
    expect(app.health()).toMatchObject({ succeeded: 1, failedAttempts: 5, retrying: 0 })
  })

  it("jitters the backoff within [half, full] of the exponential delay, capped", async () => {
    const { waits, sleep } = recordingSleep()
    const { app, endpoint } = await start(
      { sleep, random: () => 0.999, retry: { maxAttempts: 5, initialDelayMs: 100, maxDelayMs: 300 } },
      (app) =>
        app.on("*", () => {
          throw new Error("down")
        }),
    )
    await deliver(endpoint, envelope())
    await app.idle()
    expect(waits).toHaveLength(4)
    expect(waits[0]).toBeGreaterThan(50)
    expect(waits[0]).toBeLessThanOrEqual(100)
    expect(waits[1]).toBeLessThanOrEqual(200)
    expect(waits[2]).toBeLessThanOrEqual(300)
    expect(waits[3]).toBeLessThanOrEqual(300)
  })

  it("dead-letters a job after its last attempt, reports it, and can run it again", async () => {
    const { sleep } = recordingSleep()
    const letters: Array<DeadLetter> = []
    let failing = true
    let attempts = 0
    const { app, endpoint, url } = await start(
      {
        sleep,
        retry: { maxAttempts: 3, initialDelayMs: 1 },
        onDeadLetter: (letter) => {
          letters.push(letter)
        },
      },
      (app) =>
        app.on("badge.earned", () => {
          attempts++
          if (failing) throw new Error("vendor down")
        }),
    )
    const env = envelope("badge.earned")
    await deliver(endpoint, env)
    await app.idle()
    expect(attempts).toBe(3)
    expect(letters).toHaveLength(1)
    expect(letters[0]).toMatchObject({
      event: { id: env.id },
      pattern: "badge.earned",
      attempts: 3,
      reason: "max_attempts",
      error: { name: "Error", message: "vendor down" },
    })
    expect(app.deadLetters()).toEqual(letters)
    expect(await (await fetch(`${url}/healthz`)).json()).toMatchObject({ deadLetters: 1, failedAttempts: 3 })

    failing = false
    expect(app.retryDeadLetters()).toBe(1)
    await app.idle()
    expect(attempts).toBe(4)
    expect(app.deadLetters()).toEqual([])
  })

  it("dead-letters at once on a NonRetryableError, and retries only the handler that failed", async () => {
    const { sleep } = recordingSleep()
    const runs = { ok: 0, bad: 0 }
    const { app, endpoint } = await start({ sleep }, (app) =>
      app
        .on("*", () => {
          runs.ok++
        })
        .on("approval.*", () => {
          runs.bad++
          throw new NonRetryableError("channel does not exist")
        }),
    )
    await deliver(endpoint, envelope())
    await app.idle()
    expect(runs).toEqual({ ok: 1, bad: 1 })
    expect(app.deadLetters()).toMatchObject([{ reason: "non_retryable", attempts: 1, pattern: "approval.*" }])
  })

  it("fails an attempt that runs past handlerTimeoutMs and aborts its signal", async () => {
    const { sleep } = recordingSleep()
    const signals: Array<AbortSignal> = []
    const { app, endpoint } = await start({ sleep, handlerTimeoutMs: 20, retry: { maxAttempts: 2 } }, (app) =>
      app.on("*", (_event, { signal }) => {
        signals.push(signal)
        return new Promise(() => {}) // never settles
      }),
    )
    await deliver(endpoint, envelope())
    await app.idle()
    expect(signals).toHaveLength(2)
    expect(signals.every((s) => s.aborted)).toBe(true)
    const [letter] = app.deadLetters()
    expect(letter?.cause).toBeInstanceOf(HandlerTimeoutError)
  })

  it("runs at most `concurrency` handlers at once and queues the rest", async () => {
    const release = gate()
    let running = 0
    let peak = 0
    const { app, endpoint } = await start({ concurrency: 2 }, (app) =>
      app.on("*", async () => {
        running++
        peak = Math.max(peak, running)
        await release.promise
        running--
      }),
    )
    for (let i = 0; i < 5; i++) expect((await deliver(endpoint, envelope())).status).toBe(202)
    await expect.poll(() => app.health().inFlight, { timeout: 10_000 }).toBe(2)
    expect(app.health().queueDepth).toBe(3)
    release.open()
    await app.idle()
    expect(peak).toBe(2)
    expect(app.health()).toMatchObject({ succeeded: 5, queueDepth: 0, inFlight: 0 })
  })

  it("answers 503 with Retry-After when the queue is full, and accepts the event once there is room", async () => {
    const release = gate()
    const seen: Array<string> = []
    const { app, endpoint } = await start({ concurrency: 1, maxQueueSize: 2 }, (app) =>
      app.on("*", async (event) => {
        seen.push(event.id)
        await release.promise
      }),
    )
    expect((await deliver(endpoint, envelope())).status).toBe(202)
    expect((await deliver(endpoint, envelope())).status).toBe(202)
    const third = envelope()
    const body = JSON.stringify(third)
    const headers = signedHeaders(body)
    const full = await post(endpoint, body, headers)
    expect(full.status).toBe(503)
    expect(full.headers.get("retry-after")).toMatch(/^\d+$/)
    release.open()
    await app.idle()
    // the retry of the refused delivery, even with the very same headers, is not taken for a duplicate
    expect((await post(endpoint, body, headers)).status).toBe(202)
    await app.idle()
    expect(seen).toContain(third.id)
  })

  it("passes the event as received to handlers typed by name", async () => {
    const received: Array<AnyWebhookEvent> = []
    const { app, endpoint } = await start({}, (app) =>
      app.on("trust.score.changed", (event) => {
        const newScore: number = event.data.newScore
        expect(typeof newScore).toBe("number")
        received.push(event)
      }),
    )
    const env = envelope("trust.score.changed", { agentId: "agt_1", newScore: 700 })
    await deliver(endpoint, env)
    await app.idle()
    expect(received).toEqual([env])
  })
})

describe("close", () => {
  it("stops accepting, waits for running handlers, then resolves", async () => {
    const release = gate()
    let finished = false
    let runs = 0
    const { app, endpoint, url } = await start({}, (app) =>
      app.on("*", async () => {
        runs++
        await release.promise
        finished = true
      }),
    )
    await deliver(endpoint, envelope())
    await expect.poll(() => app.health().inFlight, { timeout: 10_000 }).toBe(1)

    let closed = false
    const closing = app.close({ timeoutMs: 5000 }).then((result) => {
      closed = true
      return result
    })
    const during = await deliver(endpoint, envelope()).then(
      (r) => r.status,
      () => "refused",
    )
    expect([503, "refused"]).toContain(during)
    expect(closed).toBe(false)

    release.open()
    expect(await closing).toEqual({ drained: true, abandoned: 0, deadLettered: 0 })
    expect(finished).toBe(true)
    expect(runs).toBe(1)
    await expect(fetch(`${url}/healthz`)).rejects.toThrow()
  })

  it("gives up after its timeout: aborts running handlers and dead-letters queued and waiting jobs", async () => {
    const never = new Promise<void>(() => {})
    const signals: Array<AbortSignal> = []
    const letters: Array<DeadLetter> = []
    const { app, endpoint } = await start(
      {
        concurrency: 1,
        handlerTimeoutMs: 0,
        onDeadLetter: (l) => {
          letters.push(l)
        },
      },
      (app) =>
        app.on("*", async (_event, { signal }) => {
          signals.push(signal)
          await never
        }),
    )
    await deliver(endpoint, envelope())
    await deliver(endpoint, envelope())
    await expect.poll(() => app.health(), { timeout: 10_000 }).toMatchObject({ inFlight: 1, queueDepth: 1 })

    const result = await app.close({ timeoutMs: 50 })
    expect(result).toEqual({ drained: false, abandoned: 1, deadLettered: 1 })
    expect(signals).toHaveLength(1)
    expect(signals[0]?.aborted).toBe(true)
    expect(letters.map((l) => l.reason)).toEqual(["shutdown"])
  })

  it("dead-letters jobs waiting for a retry instead of waiting out their backoff", async () => {
    // a real timer, long enough that only close() can end the wait
    const { app, endpoint } = await start({ retry: { initialDelayMs: 60_000 } }, (app) =>
      app.on("*", () => {
        throw new Error("down")
      }),
    )
    await deliver(endpoint, envelope())
    await expect.poll(() => app.health().retrying, { timeout: 10_000 }).toBe(1)
    const result = await app.close({ timeoutMs: 5000 })
    expect(result).toEqual({ drained: true, abandoned: 0, deadLettered: 1 })
    expect(app.deadLetters()).toMatchObject([{ reason: "shutdown", attempts: 1, error: { message: "down" } }])
  })
})
