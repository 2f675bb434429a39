import { randomBytes } from "node:crypto"
import { makeTestStore } from "@agentgov/testing"
import { decodeJwt } from "jose"
import { describe, expect, it } from "vitest"
import { loadConfig } from "../src/config.ts"
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
