import { appendFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

/**
 * The logs of the whole server suite, scanned for secrets (issue 34). A vitest global setup: it
 * points AGENTGOV_TEST_LOG_FILE at a fresh file that every test server's logger (helpers.ts, at
 * debug level) and every child server's stderr (childServer.ts) append to, and at the end of the
 * run fails it when a line holds an API key, an SDK token, a webhook secret, a bearer credential,
 * a private key, a password in a URL, or a secret-named field with a value.
 */
export const SECRET_PATTERNS: ReadonlyArray<readonly [string, RegExp]> = [
  ["an API key", /svc_(?:ws|ag_sk)_(?:live|test)_[A-Za-z0-9]{8,}/],
  [
    "a session, sign-in link, invitation or OAuth secret",
    /svc_(?:sess|signin|inv|oauth_(?:at|rt|cs|code))_[A-Za-z0-9]{8,}/,
  ],
  ["a webhook secret", /whsec_[A-Za-z0-9_-]{6,}/],
  ["a JWT (SDK token)", /eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}/],
  ["a bearer credential", /Bearer\s+[A-Za-z0-9._~+/=-]{8,}/i],
  ["a private key", /-----BEGIN [A-Z ]*PRIVATE KEY-----|"d"\s*:\s*"[A-Za-z0-9_-]{32,}"/],
  ["a password in a URL", /[a-z]+:\/\/[^:/\s"@]+:[^@\s"/]+@/i],
  [
    "a secret-named field with a value",
    /"(?:password|secret|apiKey|api_key|token|accessToken|masterKey|master_key|privateKey|private_key|authorization|clientSecret)"\s*:\s*"[^"]{4,}"/i,
  ],
]

/** Every line of `text` that holds a secret, with what it holds. */
export const findSecrets = (text: string): Array<{ line: number; what: string; text: string }> => {
  const found: Array<{ line: number; what: string; text: string }> = []
  text.split("\n").forEach((l, i) => {
    for (const [what, re] of SECRET_PATTERNS) if (re.test(l)) found.push({ line: i + 1, what, text: l.slice(0, 300) })
  })
  return found
}

/** Appends to the suite's log file when the global setup made one (a no-op otherwise). */
export const sinkLine = (line: string): void => {
  const file = process.env.AGENTGOV_TEST_LOG_FILE
  if (file) appendFileSync(file, line.endsWith("\n") ? line : `${line}\n`)
}

export default function setup() {
  const dir = mkdtempSync(join(tmpdir(), "agentgov-logs-"))
  const file = join(dir, "server-suite.log")
  appendFileSync(file, "")
  process.env.AGENTGOV_TEST_LOG_FILE = file
  return () => {
    const text = readFileSync(file, "utf8")
    const found = findSecrets(text)
    rmSync(dir, { recursive: true, force: true })
    delete process.env.AGENTGOV_TEST_LOG_FILE
    if (found.length > 0)
      throw new Error(
        `the server suite's logs hold secrets (${found.length} line(s)):\n${found
          .slice(0, 20)
          .map((f) => `  line ${f.line}, ${f.what}: ${f.text}`)
          .join("\n")}`,
      )
    process.stderr.write(`log scan: ${text.split("\n").length - 1} log lines of the server suite, no secret found\n`)
  }
}
