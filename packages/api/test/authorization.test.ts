import type { IncomingMessage } from "node:http"
import { describe, expect, it } from "vitest"
import { authorizationOf, bearerOfRequest } from "../src/rest/http.ts"

/**
 * A request as node:http presents it: `headers` keeps the first Authorization header, `headersDistinct` all, and
 * `rawHeaders` every header as sent, names in the sender's case (here alternately `Authorization` and
 * `AUTHORIZATION`, among others).
 */
const requestWith = (...authorization: Array<string>) =>
  ({
    headers: authorization.length === 0 ? {} : { authorization: authorization[0] },
    headersDistinct: authorization.length === 0 ? {} : { authorization },
    rawHeaders: [
      "Host",
      "api.example",
      ...authorization.flatMap((value, i) => [i % 2 === 0 ? "Authorization" : "AUTHORIZATION", value]),
      "Authorization-Extra",
      "x",
    ],
  }) as unknown as IncomingMessage

/**
 * The one rule of every route that reads the Authorization header (the API, the event stream, /metrics, OAuth client
 * authentication): several headers are never read as the first of them, which node:http keeps, while a proxy in front
 * may have acted on the last.
 */
describe("bearerOfRequest", () => {
  it("reads the credential of one Bearer header, the scheme in any case", () => {
    expect(bearerOfRequest(requestWith("Bearer abc"))).toBe("abc")
    expect(bearerOfRequest(requestWith("bearer abc"))).toBe("abc")
    expect(bearerOfRequest(requestWith())).toBeUndefined()
    expect(bearerOfRequest(requestWith("Basic abc"))).toBeUndefined()
  })

  it("reads nothing from several headers, whichever comes first and even when one is empty", () => {
    for (const headers of [
      ["Bearer abc", "Bearer xyz"],
      ["Bearer xyz", "Bearer abc"],
      ["Bearer abc", "Bearer abc"],
      ["Bearer abc", ""],
      ["Bearer abc,"],
    ]) {
      expect(bearerOfRequest(requestWith(...headers)), JSON.stringify(headers)).toBeUndefined()
    }
    expect(authorizationOf(requestWith("Bearer abc", ""))).toBe("Bearer abc, ")
  })
})
