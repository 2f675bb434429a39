import { spawnSync } from "node:child_process"
import { generateKeyPairSync, type KeyObject, sign } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { BADGE_TYP, verifyBadge } from "../src/badge.ts"

const cliPath = fileURLToPath(new URL("../src/cli.ts", import.meta.url))
const NOW = Date.parse("2030-01-01T12:00:00.000Z")

const keyPair = (kid: string) => {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519")
  return { kid, privateKey, jwk: { ...publicKey.export({ format: "jwk" }), kid, alg: "EdDSA", use: "sig" } }
}
const service = keyPair("key_service")
const stranger = keyPair("key_stranger")
const jwks = { keys: [service.jwk] }

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url")
const jws = (header: object, payload: object, key: KeyObject) => {
  const input = `${b64(header)}.${b64(payload)}`
  return `${input}.${sign(null, Buffer.from(input), key).toString("base64url")}`
}

const fields = {
  agentId: "agt_1",
  agentName: "billing-bot",
  tier: "silver",
  score: 742,
  issuedAt: new Date(NOW - 3_600_000).toISOString(),
  expiresAt: new Date(NOW + 20 * 3_600_000).toISOString(),
  issuer: "https://gov.example.com",
}
const badgeOf = (over: Partial<typeof fields> = {}, key = service) => {
  const f = { ...fields, ...over }
  const signature = jws(
    { alg: "EdDSA", typ: BADGE_TYP, kid: key.kid },
    { ...f, iss: f.issuer, sub: f.agentId, iat: Date.parse(f.issuedAt) / 1000, exp: Date.parse(f.expiresAt) / 1000 },
    key.privateKey,
  )
  return { ...f, signature }
}

describe("verifyBadge", () => {
  const badge = badgeOf()

  it("accepts the JSON, the API's envelope, the SVG and the JWS alone", () => {
    const svg = `<svg xmlns="http://www.w3.org/2000/svg"><metadata id="agentgov-badge">${badge.signature}</metadata></svg>`
    for (const presented of [
      badge,
      JSON.stringify(badge),
      JSON.stringify({ ok: true, data: badge }),
      svg,
      badge.signature,
    ]) {
      const r = verifyBadge(presented, jwks, { agentId: "agt_1", issuer: fields.issuer, now: NOW })
      expect(r).toEqual({ valid: true, kid: service.kid, claims: { ...fields, certifications: [] } })
    }
  })

  it.each([
    ["a JSON field changed", { ...badge, tier: "platinum" }, "bad_signature"],
    ["a JSON field added", { ...badge, verifiedBy: "agentgov official" }, "bad_signature"],
    ["a JSON field added, as text", JSON.stringify({ ...badge, note: "all good" }), "bad_signature"],
    ["a field beside the envelope's data", { ok: true, data: badge, verifiedBy: "agentgov official" }, "bad_signature"],
    [
      "a signature beside the envelope's data",
      JSON.stringify({ ok: true, data: badge, signature: "a.b.c" }),
      "bad_signature",
    ],
    ["a key not in the JWKS", badgeOf({}, stranger), "unknown_key"],
    ["garbage", "hello", "malformed"],
    ["an SVG without metadata", "<svg></svg>", "malformed"],
  ])("%s → %s", (_, presented, reason) => {
    expect(verifyBadge(presented, jwks, { now: NOW })).toMatchObject({ valid: false, reason })
  })

  it("refuses crafted SVGs (many unclosed <metadata tags) as malformed", () => {
    // Within the API's 64 KiB limit on a presented badge; the public verify route runs this on the event loop. The
    // pattern reads them in linear time (jwsOfSvg); tests assert no timings, so the cases only check the answer.
    for (const crafted of [
      `<${"<metadata".repeat(7_000)}`,
      `<${"<metadata x".repeat(5_900)}>`,
      `<metadata>${"a.".repeat(30_000)}`,
      `<${"<metadata>".repeat(6_000)}</metadata>`,
    ])
      expect(verifyBadge(crafted, jwks, { now: NOW })).toMatchObject({ valid: false, reason: "malformed" })
    // What a badge's own SVG holds still reads, attributes and whitespace included.
    const svg = `<svg><metadata id="agentgov-badge" class='x'>\n  ${badge.signature}\n</metadata></svg>`
    expect(verifyBadge(svg, jwks, { agentId: "agt_1", issuer: fields.issuer, now: NOW })).toMatchObject({ valid: true })
  })

  it("the certifications a badge names are among its verified claims; named otherwise than signed, refused", () => {
    const signed = { ...fields, certifications: ["gdpr", "soc2"] }
    const signature = jws(
      { alg: "EdDSA", typ: BADGE_TYP, kid: service.kid },
      { ...signed, iss: fields.issuer, sub: fields.agentId, exp: Date.parse(fields.expiresAt) / 1000 },
      service.privateKey,
    )
    // The JWS alone (or the SVG) shows them only through the claims.
    expect(verifyBadge(signature, jwks, { now: NOW })).toEqual({ valid: true, kid: service.kid, claims: signed })
    expect(verifyBadge({ ...signed, signature }, jwks, { now: NOW })).toMatchObject({ valid: true })
    expect(verifyBadge({ ...signed, certifications: ["soc2"], signature }, jwks, { now: NOW })).toMatchObject({
      valid: false,
      reason: "bad_signature",
    })
    const odd = jws(
      { alg: "EdDSA", typ: BADGE_TYP, kid: service.kid },
      { ...fields, certifications: "soc2", iss: fields.issuer, sub: fields.agentId },
      service.privateKey,
    )
    expect(verifyBadge(odd, jwks, { now: NOW })).toMatchObject({ valid: false, reason: "malformed" })
  })

  it("certifications shown nested too deep to serialise are refused as altered, not thrown (third pass)", () => {
    // A badge's JSON presented as text is parsed without a depth limit (the API limits an object body's depth, not a
    // string's): comparing the shown list by serialising it overflowed the stack, a 500 from the public verify route.
    const deep = `${"[".repeat(20_000)}${"]".repeat(20_000)}`
    const text = `${JSON.stringify(badge).slice(0, -1)},"certifications":${deep}}`
    expect(verifyBadge(text, jwks, { now: NOW })).toMatchObject({ valid: false, reason: "bad_signature" })
    const signed = { ...fields, certifications: ["gdpr", "soc2"] }
    const signature = jws(
      { alg: "EdDSA", typ: BADGE_TYP, kid: service.kid },
      { ...signed, iss: fields.issuer, sub: fields.agentId },
      service.privateKey,
    )
    expect(verifyBadge(JSON.stringify({ ...signed, signature }), jwks, { now: NOW })).toMatchObject({ valid: true })
    // Not the signed list: another order, a nested list, a list of other values.
    for (const shown of [["soc2", "gdpr"], [["gdpr"], "soc2"], [1, 2], "gdpr,soc2", null, []]) {
      expect(verifyBadge({ ...signed, certifications: shown, signature }, jwks, { now: NOW })).toMatchObject({
        valid: false,
        reason: "bad_signature",
      })
    }
  })

  it("a payload changed after signing does not verify", () => {
    const [h, , s] = badge.signature.split(".")
    const forged = `${h}.${b64({ ...fields, tier: "platinum", sub: "agt_1" })}.${s}`
    expect(verifyBadge(forged, jwks, { now: NOW })).toMatchObject({ valid: false, reason: "bad_signature" })
  })

  it("a key the JWKS does not hold, a retired key it still holds, and a header that is not EdDSA", () => {
    expect(verifyBadge(badgeOf({}, stranger), jwks, { now: NOW })).toMatchObject({
      valid: false,
      reason: "unknown_key",
    })
    // A rotated-out key stays in the served JWKS until what it signed has expired: its badges still verify.
    const retired = keyPair("key_retired")
    const served = { keys: [service.jwk, retired.jwk] }
    expect(verifyBadge(badgeOf({}, retired), served, { now: NOW })).toMatchObject({
      valid: true,
      kid: "key_retired",
      claims: { tier: "silver" },
    })
    // Signed by the service's key but declaring another algorithm (none, HS256): refused, whatever the bytes say.
    const claims = {
      ...fields,
      iss: fields.issuer,
      sub: fields.agentId,
      iat: NOW / 1000 - 3_600,
      exp: NOW / 1000 + 3_600,
    }
    for (const alg of ["none", "HS256"])
      expect(
        verifyBadge(jws({ alg, typ: BADGE_TYP, kid: service.kid }, claims, service.privateKey), jwks, { now: NOW }),
      ).toMatchObject({ valid: false })
    expect(
      verifyBadge(jws({ alg: "EdDSA", typ: BADGE_TYP, kid: service.kid }, claims, service.privateKey), jwks, {
        now: NOW,
      }),
    ).toMatchObject({ valid: true })
  })

  it("expired, another agent's, another issuer's", () => {
    expect(verifyBadge(badge, jwks, { now: NOW + 21 * 3_600_000 })).toMatchObject({ valid: false, reason: "expired" })
    expect(verifyBadge(badge, jwks, { agentId: "agt_2", now: NOW })).toMatchObject({
      valid: false,
      reason: "other_agent",
    })
    expect(verifyBadge(badge, jwks, { issuer: "https://evil.example", now: NOW })).toMatchObject({
      valid: false,
      reason: "wrong_issuer",
    })
  })
})

describe("agentgov-verify badge", () => {
  const dir = mkdtempSync(join(tmpdir(), "agentgov-badge-"))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))
  const write = (name: string, text: string) => {
    const path = join(dir, name)
    writeFileSync(path, text)
    return path
  }
  const fresh = badgeOf({
    issuedAt: new Date().toISOString(),
    expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
  })
  const jwksFile = write("jwks.json", JSON.stringify(jwks))
  const run = (args: string[]) => spawnSync(process.execPath, [cliPath, "badge", ...args], { encoding: "utf8" })

  it("exits 0 for a valid badge and says what it holds", () => {
    const r = run([
      write("badge.json", JSON.stringify({ ok: true, data: fresh })),
      "--jwks",
      jwksFile,
      "--agent",
      "agt_1",
    ])
    expect(r.stderr).toBe("")
    expect(r.status).toBe(0)
    expect(r.stdout).toMatch(/^OK: billing-bot \(agt_1\) holds silver at 742/)
  })

  it("exits 1, not 2, for a badge whose claims are nested too deep to print (--json)", () => {
    // Unsigned claims of an unknown key are shown in the answer: printing them must not overflow the stack.
    const deep = `${"[".repeat(20_000)}${"]".repeat(20_000)}`
    const header = Buffer.from(JSON.stringify({ alg: "EdDSA", typ: BADGE_TYP, kid: "key_unknown" })).toString(
      "base64url",
    )
    const payload = Buffer.from(`{"agentId":"agt_1","x":${deep}}`).toString("base64url")
    const r = run([write("deep.jws", `${header}.${payload}.AAAA`), "--jwks", jwksFile, "--json"])
    expect(r.stderr).toBe("")
    expect(r.status).toBe(1)
    expect(JSON.parse(r.stdout)).toMatchObject({ valid: false, reason: "unknown_key" })
  })

  it("exits 1 with the reason for a bad one, 2 without --jwks", () => {
    const r = run([write("tampered.json", JSON.stringify({ ...fresh, score: 999 })), "--jwks", jwksFile, "--json"])
    expect(r.status).toBe(1)
    expect(JSON.parse(r.stdout)).toMatchObject({ valid: false, reason: "bad_signature" })
    const usage = run([write("b.jws", fresh.signature)])
    expect(usage.status).toBe(2)
    expect(usage.stderr).toContain("--jwks is required")
  })
})
