import { randomBytes } from "node:crypto"
import { makeTestStore } from "@agentgov/testing"
import { decodeJwt } from "jose"
import { describe, expect, it } from "vitest"
import { loadConfig, urlHostOf } from "../src/config.ts"
import { startServer } from "../src/server.ts"

/**
 * The public base URL names the tokens' issuer, the OpenAPI document's servers and links. Derived from HOST
 * and PORT when AGENTGOV_PUBLIC_URL is unset, it must carry the port bound when PORT=0 picked one.
 */
describe("the public URL with PORT=0", () => {
  it("is the bound port when derived, and AGENTGOV_PUBLIC_URL as given otherwise", async () => {
    for (const given of [undefined, "https://gov.example.com"]) {
      const store = await makeTestStore()
      const config = loadConfig({
        PORT: "0",
        HOST: "127.0.0.1",
        AGENTGOV_MASTER_KEY: randomBytes(32).toString("hex"),
        ...(given ? { AGENTGOV_PUBLIC_URL: given } : {}),
      })
      const server = await startServer({ ...config, trustWorker: false }, { store: store.layer })
      try {
        const expected = given ?? `http://127.0.0.1:${server.port}`
        expect(server.port).toBeGreaterThan(0)
        expect(server.publicUrl).toBe(expected)
        const doc = (await (await fetch(`${server.url}/api/v1/openapi.json`)).json()) as {
          servers: Array<{ url: string }>
        }
        expect(doc.servers[0]!.url).toBe(`${expected}/api/v1`)
        const key = server.bootstrapped!.apiKey
        const token = await fetch(`${server.url}/api/v1/tokens`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}` },
        })
        const body = (await token.json()) as { data: { token: string } }
        expect(decodeJwt(body.data.token).iss).toBe(expected)
      } finally {
        await server.close()
        await store.cleanup()
      }
    }
  })
})

describe("an IPv6 HOST", () => {
  it("starts, and its URLs put the address in brackets", async () => {
    const store = await makeTestStore()
    const config = loadConfig({
      PORT: "0",
      HOST: "::1",
      AGENTGOV_MASTER_KEY: randomBytes(32).toString("hex"),
      AGENTGOV_METRICS_PORT: "0",
      AGENTGOV_METRICS_HOST: "::1",
    })
    // It used to die at start: `new URL("http://::1:0")` is no URL.
    const server = await startServer({ ...config, trustWorker: false }, { store: store.layer })
    try {
      expect(server.url).toBe(`http://[::1]:${server.port}`)
      expect(server.publicUrl).toBe(`http://[::1]:${server.port}`)
      expect(server.metricsUrl).toMatch(/^http:\/\/\[::1\]:\d+\/metrics$/)
      const ping = await fetch(`${server.url}/api/v1/openapi.json`)
      expect(ping.status).toBe(200)
      const doc = (await ping.json()) as { servers: Array<{ url: string }> }
      expect(doc.servers[0]!.url).toBe(`http://[::1]:${server.port}/api/v1`)
      expect((await fetch(server.metricsUrl!)).status).toBe(200)
    } finally {
      await server.close()
      await store.cleanup()
    }
  })

  it("derives the public URL and the local URL by the address's kind", () => {
    expect(loadConfig({ HOST: "::", PORT: "3000" }).publicUrl).toBe("http://localhost:3000")
    expect(loadConfig({ HOST: "fe80::1", PORT: "3000" }).publicUrl).toBe("http://[fe80::1]:3000")
    expect(loadConfig({ HOST: "0.0.0.0", PORT: "3000" }).publicUrl).toBe("http://localhost:3000")
    expect(urlHostOf("::")).toBe("[::1]")
    expect(urlHostOf("0.0.0.0")).toBe("127.0.0.1")
    expect(urlHostOf("::1")).toBe("[::1]")
    expect(urlHostOf("[::1]")).toBe("[::1]")
    expect(urlHostOf("10.0.0.5")).toBe("10.0.0.5")
  })
})
