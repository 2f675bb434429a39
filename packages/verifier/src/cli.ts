#!/usr/bin/env node
/**
 * agentgov-verify <bundle.json | -> [--jwks <file>] [--json]
 * agentgov-verify report <report.json> <bundle.json>... [--jwks <file>] [--json]
 * agentgov-verify badge <badge.json | badge.svg | jws-file | -> --jwks <file> [--agent <id>] [--issuer <url>] [--json]
 *
 * Verifies an audit-trail export bundle, a compliance report against bundles, or a trust badge (D13),
 * offline. Exit code 0: valid; 1: invalid; 2: usage or I/O error (a file unreadable or not JSON). Bundle,
 * report, badge and JWKS files may also be the API's response envelope `{ok: true, data: ...}` as saved by curl.
 */
import { readFileSync, realpathSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { verifyBadge } from "./badge.ts"
import { type BundleVerification, unwrapEnvelope, verifyBundle } from "./bundle.ts"
import type { Jwks } from "./checkpoint.ts"
import { type ReportVerification, verifyReport } from "./report.ts"

const USAGE =
  "usage: agentgov-verify <bundle.json | -> [--jwks <trusted-jwks.json>] [--json]\n" +
  "       agentgov-verify report <report.json> <bundle.json>... [--jwks <trusted-jwks.json>] [--json]\n" +
  "       agentgov-verify badge <badge.json | badge.svg | jws | -> --jwks <jwks.json> [--agent <agt_…>] [--issuer <url>] [--json]"

/** The parsed JSON of a file, or of stdin for "-"; throws with a message fit for the user. */
const readJson = (path: string, what: string): unknown => {
  let text: string
  try {
    text = readFileSync(path === "-" ? 0 : path, "utf8")
  } catch (e) {
    throw new Error(`cannot read the ${what} ${path}: ${(e as Error).message}`)
  }
  try {
    return JSON.parse(text)
  } catch (e) {
    throw new Error(`the ${what} ${path} is not JSON: ${(e as Error).message}`)
  }
}

const readJwks = (path: string): Jwks => {
  const jwks = unwrapEnvelope(readJson(path, "JWKS"))
  if (typeof jwks !== "object" || jwks === null || !Array.isArray((jwks as Jwks).keys)) {
    throw new Error(`the JWKS ${path} has no "keys" array`)
  }
  return jwks as Jwks
}

const short = (hash: string): string => `${hash.slice(0, 12)}…`

const summary = (r: BundleVerification): string[] => {
  const lines: string[] = []
  if (r.valid && r.checkpoint) {
    const { treeSize, rootHash, kid } = r.checkpoint
    lines.push(
      `OK: ${r.checked} event${r.checked === 1 ? "" : "s"}, checkpoint tree size ${treeSize}, root ${short(rootHash)}, signed by kid ${kid}`,
    )
    if (r.consistency) {
      lines.push(`consistent with the tree of size ${r.consistency.fromSize}, root ${r.consistency.fromRoot}`)
    }
  } else {
    lines.push(`INVALID: ${r.errors.length} error${r.errors.length === 1 ? "" : "s"}`)
    for (const e of r.errors) lines.push(`  ${e.sequence === undefined ? "" : `event ${e.sequence}: `}${e.reason}`)
  }
  for (const w of r.warnings) lines.push(`warning: ${w}`)
  return lines
}

const reportSummary = (r: ReportVerification): string[] => {
  const lines: string[] = []
  if (r.valid) lines.push(`OK: the report's signature, checkpoint and ${r.recounted} counted events verify and recount`)
  else {
    lines.push(`INVALID: ${r.errors.length} error${r.errors.length === 1 ? "" : "s"}`)
    for (const e of r.errors) lines.push(`  ${e.sequence === undefined ? "" : `event ${e.sequence}: `}${e.reason}`)
  }
  for (const w of r.warnings) lines.push(`warning: ${w}`)
  return lines
}

const parseReportOptions = (argv: string[]) => {
  try {
    const parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: { jwks: { type: "string" }, json: { type: "boolean" } },
    })
    if (parsed.positionals.length < 2) throw new Error("expected a report file and at least one bundle file")
    return parsed
  } catch (e) {
    throw new Error(`${(e as Error).message}\n${USAGE}`)
  }
}

const reportMain = (argv: string[]): number => {
  const { values, positionals } = parseReportOptions(argv)
  const trustedJwks = values.jwks === undefined ? undefined : readJwks(values.jwks)
  const [reportPath, ...bundlePaths] = positionals
  const report = readJson(reportPath!, "report")
  const bundles = bundlePaths.map((p) => readJson(p, "bundle"))
  const result = verifyReport(report, bundles, trustedJwks ? { trustedJwks } : {})
  const output = values.json ? [JSON.stringify({ ...result, bundles: undefined }, null, 2)] : reportSummary(result)
  process.stdout.write(`${output.join("\n")}\n`)
  return result.valid ? 0 : 1
}

const parseOptions = (argv: string[]) => {
  try {
    const parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: { jwks: { type: "string" }, json: { type: "boolean" } },
    })
    if (parsed.positionals.length !== 1) throw new Error("expected exactly one bundle file")
    return parsed
  } catch (e) {
    throw new Error(`${(e as Error).message}\n${USAGE}`)
  }
}

const readText = (path: string, what: string): string => {
  try {
    return readFileSync(path === "-" ? 0 : path, "utf8")
  } catch (e) {
    throw new Error(`cannot read the ${what} ${path}: ${(e as Error).message}`)
  }
}

/**
 * The badge check as JSON. A refused badge's claims are what it presented, unsigned, and may be nested too deep to
 * serialise: then they are left out, and the result (invalid, exit 1) is printed without them.
 */
const jsonOfBadgeCheck = (result: ReturnType<typeof verifyBadge>): string => {
  try {
    return JSON.stringify(result, null, 2)
  } catch {
    const { claims: _, ...rest } = result as { claims?: unknown }
    return JSON.stringify({ ...rest, claims: "not shown: nested too deep to print" }, null, 2)
  }
}

/** `agentgov-verify badge …`: a badge's JSON, SVG or JWS against a JWKS saved from the service. */
const badgeMain = (argv: string[]): number => {
  let parsed: ReturnType<
    typeof parseArgs<{
      args: string[]
      allowPositionals: true
      options: {
        jwks: { type: "string" }
        agent: { type: "string" }
        issuer: { type: "string" }
        json: { type: "boolean" }
      }
    }>
  >
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        jwks: { type: "string" },
        agent: { type: "string" },
        issuer: { type: "string" },
        json: { type: "boolean" },
      },
    })
    if (parsed.positionals.length !== 1) throw new Error("expected exactly one badge file")
    if (parsed.values.jwks === undefined) throw new Error("--jwks is required: save <origin>/.well-known/jwks.json")
  } catch (e) {
    throw new Error(`${(e as Error).message}\n${USAGE}`)
  }
  const { values, positionals } = parsed
  const jwks = readJwks(values.jwks!)
  const text = readText(positionals[0]!, "badge").trim()
  const result = verifyBadge(text, jwks, {
    ...(values.agent !== undefined ? { agentId: values.agent } : {}),
    ...(values.issuer !== undefined ? { issuer: values.issuer } : {}),
  })
  if (values.json) process.stdout.write(`${jsonOfBadgeCheck(result)}\n`)
  else if (result.valid) {
    const c = result.claims
    process.stdout.write(
      `OK: ${c.agentName} (${c.agentId}) holds ${c.tier} at ${c.score}, issued ${c.issuedAt} by ${c.issuer}, expires ${c.expiresAt}, signed by kid ${result.kid}\n`,
    )
  } else process.stdout.write(`INVALID: ${result.reason}\n`)
  return result.valid ? 0 : 1
}

/** Runs the CLI on `argv` (without node and the script), writes to stdout/stderr and returns the exit code. */
export const main = (argv: string[]): number => {
  try {
    // Asked for: the usage on stdout, exit 0 (a usage error prints it on stderr, exit 2).
    if (argv.length === 1 && (argv[0] === "--help" || argv[0] === "-h" || argv[0] === "help")) {
      process.stdout.write(`${USAGE}\n`)
      return 0
    }
    if (argv[0] === "report") return reportMain(argv.slice(1))
    if (argv[0] === "badge") return badgeMain(argv.slice(1))
    const { values, positionals } = parseOptions(argv)
    const trustedJwks = values.jwks === undefined ? undefined : readJwks(values.jwks)
    const bundle = readJson(positionals[0]!, "bundle")
    const result = verifyBundle(bundle, trustedJwks ? { trustedJwks } : {})
    const output = values.json ? [JSON.stringify(result, null, 2)] : summary(result)
    process.stdout.write(`${output.join("\n")}\n`)
    return result.valid ? 0 : 1
  } catch (e) {
    process.stderr.write(`agentgov-verify: ${(e as Error).message}\n`)
    return 2
  }
}

/** Whether this module is the script node was started with (rather than imported, e.g. by bin/agentgov-verify.js). */
const isEntryPoint = (): boolean => {
  const script = process.argv[1]
  if (script === undefined) return false
  try {
    return realpathSync(script) === realpathSync(fileURLToPath(import.meta.url))
  } catch {
    return false
  }
}

if (isEntryPoint()) process.exitCode = main(process.argv.slice(2))
