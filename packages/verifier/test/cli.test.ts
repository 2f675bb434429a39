import { spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
import { CountedBuilder, EVENT_METRICS, type Metrics, REPORT_FORMAT, signReport } from "../src/index.ts"
import { copy, makeBundle, makeChain, makeSigner } from "./fixtures.ts"

const cliPath = fileURLToPath(new URL("../src/cli.ts", import.meta.url))
const binPath = fileURLToPath(new URL("../bin/agentgov-verify.js", import.meta.url))
const hasDist = existsSync(new URL("../dist/cli.js", import.meta.url))
const dir = mkdtempSync(join(tmpdir(), "agentgov-verify-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const signer = makeSigner("ckp_cli")
const bundle = makeBundle(makeChain(12), signer, { from: 3, to: 7 })

const write = (name: string, value: unknown): string => {
  const path = join(dir, name)
  writeFileSync(path, typeof value === "string" ? value : JSON.stringify(value))
  return path
}

const validFile = write("valid.json", bundle)
const tampered = copy(bundle)
tampered.events[1].data.step = 99
const tamperedFile = write("tampered.json", tampered)
const jwksFile = write("jwks.json", signer.jwks)
// What `curl $B/api/v1/events/export` and `curl $B/.well-known/jwks.json` save.
const envelopedFile = write("enveloped.json", { ok: true, data: bundle })
const envelopedTamperedFile = write("enveloped-tampered.json", { ok: true, data: tampered })
const envelopedJwksFile = write("enveloped-jwks.json", { ok: true, data: signer.jwks })

const run = (args: string[], input?: string, script = cliPath) =>
  spawnSync(process.execPath, [script, ...args], { encoding: "utf8", ...(input === undefined ? {} : { input }) })

describe("agentgov-verify", () => {
  it("prints a summary and exits 0 for a valid bundle", () => {
    const r = run([validFile, "--jwks", jwksFile])
    expect(r.stderr).toBe("")
    expect(r.status).toBe(0)
    expect(r.stdout).toBe(
      `OK: 5 events, checkpoint tree size 12, root ${bundle.checkpoint.rootHash.slice(0, 12)}…, signed by kid ckp_cli\n`,
    )
  })

  it("warns when no trusted key is given", () => {
    const r = run([validFile])
    expect(r.status).toBe(0)
    expect(r.stdout).toMatch(/^OK: .*\nwarning: the checkpoint key is not pinned/)
  })

  it("lists the errors and exits 1 for a tampered bundle", () => {
    const r = run([tamperedFile, "--jwks", jwksFile])
    expect(r.status).toBe(1)
    expect(r.stdout).toBe(
      "INVALID: 1 error\n  event 4: hash does not match the event's prevHash, type, data and timestamp\n",
    )
  })

  it("prints the result as JSON with --json", () => {
    const ok = run(["--json", validFile, "--jwks", jwksFile])
    expect(ok.status).toBe(0)
    expect(JSON.parse(ok.stdout)).toMatchObject({ valid: true, checked: 5, errors: [], warnings: [] })
    const bad = run([tamperedFile, "--json"])
    expect(bad.status).toBe(1)
    expect(JSON.parse(bad.stdout)).toMatchObject({ valid: false, errors: [{ sequence: 4 }] })
  })

  it("accepts the API's response envelope around the bundle and the JWKS", () => {
    const bare = run([validFile, "--jwks", jwksFile])
    for (const args of [
      [envelopedFile, "--jwks", jwksFile],
      [validFile, "--jwks", envelopedJwksFile],
      [envelopedFile, "--jwks", envelopedJwksFile],
    ]) {
      const r = run(args)
      expect(r.status).toBe(0)
      expect(r.stdout).toBe(bare.stdout)
    }
    const bad = run([envelopedTamperedFile, "--jwks", envelopedJwksFile])
    expect(bad.status).toBe(1)
    expect(bad.stdout).toBe(run([tamperedFile, "--jwks", jwksFile]).stdout)
    const piped = run(["-", "--jwks", jwksFile], JSON.stringify({ ok: true, data: bundle }))
    expect(piped.status).toBe(0)
  })

  it("reads the bundle from stdin for -", () => {
    const r = run(["-", "--jwks", jwksFile], JSON.stringify(bundle))
    expect(r.status).toBe(0)
    expect(r.stdout).toMatch(/^OK: 5 events/)
  })

  it.each([
    ["a missing file", [join(dir, "missing.json")], /cannot read the bundle/],
    ["a file that is not JSON", [write("garbage.json", "{ nope")], /is not JSON/],
    ["a JWKS without keys", [validFile, "--jwks", write("nokeys.json", {})], /has no "keys" array/],
    ["no bundle argument", [], /usage: agentgov-verify/],
    ["an unknown option", [validFile, "--verbose"], /Unknown option/],
  ])("exits 2 with a message on stderr for %s", (_, args, message) => {
    const r = run(args)
    expect(r.status).toBe(2)
    expect(r.stdout).toBe("")
    expect(r.stderr).toMatch(message)
  })
})

describe("agentgov-verify report", () => {
  const chain = makeChain(12)
  const whole = makeBundle(chain, signer)
  const report = (sequences: Array<[number, number]>) =>
    signReport(
      {
        format: REPORT_FORMAT,
        id: "rpt_cli",
        workspaceId: whole.workspaceId,
        framework: "soc2",
        catalogueVersion: "test",
        agentId: null,
        period: { from: chain[0]!.timestamp, to: "2026-01-01T00:00:00.000Z" },
        generatedAt: "2025-01-02T00:00:00.000Z",
        checkpoint: whole.checkpoint,
        chain: { valid: true, checked: 12 },
        counted: { ...new CountedBuilder(0).done(), sequences },
        metrics: Object.fromEntries(EVENT_METRICS.map((m) => [m.name, 0])) as Metrics,
        activity: [],
        controls: [],
        summary: { result: "compliant", met: 0, partial: 0, notMet: 0, notApplicable: 0 },
      },
      signer.privateKey,
      signer.kid,
    )
  const wholeFile = write("whole.json", whole)

  // A hang is the failure this guards against: the timeout only turns one into a failed assertion.
  it("exits 1 with the errors for a report counting ranges no bundle could hold, without walking them", () => {
    const r = spawnSync(
      process.execPath,
      [cliPath, "report", write("huge.json", report([[1, Number.MAX_SAFE_INTEGER]])), wholeFile, "--jwks", jwksFile],
      { encoding: "utf8", timeout: 60_000 },
    )
    expect(r.stderr).toBe("")
    expect(r.status).toBe(1)
    expect(r.stdout).toMatch(/^INVALID: /)
    expect(r.stdout).toContain(`${Number.MAX_SAFE_INTEGER - 12 - 20} more counted events are not in the bundle`)
  })

  it("exits 1, not 2, for a report whose counted ranges are malformed", () => {
    const bad = { ...report([[1, 12]]), counted: { count: 1, sequences: [5], idsDigest: "" } }
    const r = run(["report", write("malformed-report.json", bad), wholeFile, "--jwks", jwksFile])
    expect(r.stderr).toBe("")
    expect(r.status).toBe(1)
    expect(r.stdout).toContain('"counted.sequences[0]" is not a range')
  })

  it("names every command in its usage", () => {
    const r = run([])
    expect(r.status).toBe(2)
    expect(r.stderr).toMatch(/agentgov-verify report <report\.json>/)
    expect(r.stderr).toMatch(/agentgov-verify badge </)
  })

  it.each(["--help", "-h", "help"])("%s prints the usage on stdout and exits 0", (flag) => {
    const r = run([flag])
    expect(r.status).toBe(0)
    expect(r.stderr).toBe("")
    expect(r.stdout).toMatch(/^usage: agentgov-verify <bundle\.json/)
    expect(r.stdout).toMatch(/agentgov-verify badge </)
  })
})

describe("bin/agentgov-verify.js", () => {
  // Without a build it falls back to src/cli.ts (this Node strips types); with one it runs dist/cli.js.
  it(`runs the CLI (${hasDist ? "dist" : "src"}) with its exit codes 0, 1 and 2`, () => {
    const ok = run([envelopedFile, "--jwks", jwksFile], undefined, binPath)
    expect(ok.stderr).toBe("")
    expect(ok.status).toBe(0)
    expect(ok.stdout).toBe(run([validFile, "--jwks", jwksFile]).stdout)
    const bad = run([tamperedFile, "--jwks", jwksFile], undefined, binPath)
    expect(bad.status).toBe(1)
    expect(bad.stdout).toMatch(/^INVALID: 1 error\n/)
    const usage = run([], undefined, binPath)
    expect(usage.status).toBe(2)
    expect(usage.stdout).toBe("")
    expect(usage.stderr).toMatch(/usage: agentgov-verify/)
  })
})
