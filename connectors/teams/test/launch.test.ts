import { spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { delimiter, dirname, join } from "node:path"
import { pathToFileURL } from "node:url"
import { afterAll, describe, expect, it } from "vitest"
// @ts-expect-error: plain JavaScript, run by the bins without the TypeScript stripper
import { root } from "../../bundle.mjs"

/**
 * How the apps are launched (docs/decisions.md, "Connector apps run from one bundled file"): `npx
 * agentgov-connector-<name>` runs the bin through its `#!/usr/bin/env -S node <flags>` line and `npm start -w
 * @agentgov/connector-<name>` through the package's start script; both must give node the same flags, and the
 * forwarders (every app but e-mail, whose digests are CPU work) run V8 without its optimising compilers.
 */

const APPS = ["slack", "discord", "teams", "pagerduty", "github", "email"] as const
const FORWARDER_FLAGS = ["--optimize-for-size", "--max-semi-space-size=1", "--no-turbofan", "--no-maglev"]
const binOf = (name: string) => join(root, `connectors/${name}/bin/agentgov-connector-${name}.js`)

const shebangFlags = (name: string) => {
  const first = readFileSync(binOf(name), "utf8").split("\n", 1)[0]!
  const match = /^#!\/usr\/bin\/env -S node((?:\s+--\S+)*)\s*$/.exec(first)
  expect(match, first).not.toBeNull()
  return match![1]!.trim().split(/\s+/)
}

const startFlags = (name: string) => {
  const start: string = JSON.parse(readFileSync(join(root, `connectors/${name}/package.json`), "utf8")).scripts.start
  const match = new RegExp(`^exec node((?:\\s+--\\S+)*)\\s+bin/agentgov-connector-${name}\\.js$`).exec(start)
  expect(match, start).not.toBeNull()
  return match![1]!.trim().split(/\s+/)
}

describe("launching the connector apps", () => {
  const dir = mkdtempSync(join(tmpdir(), "agentgov-launch-"))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))
  // prints the script and node flags of each node process (npm's own too), then lets the command run
  const probe = join(dir, "probe.mjs")
  writeFileSync(
    probe,
    `process.stderr.write("EXECARGV " + JSON.stringify([process.argv[1], process.execArgv]) + "\\n")\n`,
  )
  const env = {
    PATH: `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ""}`,
    HOME: process.env.HOME ?? dir,
    NODE_OPTIONS: `--import ${pathToFileURL(probe).href}`,
    AGENTGOV_CONNECTOR_DATA_DIR: join(dir, "data"),
    AGENTGOV_WEBHOOK_SECRET: "whsec_launch_test_secret_0123456789",
    TEAMS_WEBHOOK_URL: "https://example.webhook.office.com/workflows/launch",
  }
  const execArgvOf = (run: ReturnType<typeof spawnSync>) => {
    const stderr = String(run.stderr)
    expect(run.status, stderr).toBe(0)
    const launched = [...stderr.matchAll(/^EXECARGV (.*)$/gm)]
      .map((m) => JSON.parse(m[1]!) as [string, Array<string>])
      .filter(([script]) => script.endsWith("agentgov-connector-teams.js"))
    expect(launched, stderr).toHaveLength(1)
    return launched[0]![1]
  }

  it("the bin's shebang and the start script give node the same flags; the forwarders run without the optimising compilers", () => {
    for (const name of APPS) {
      expect(startFlags(name), name).toEqual(shebangFlags(name))
      if (name !== "email") expect(shebangFlags(name), name).toEqual(FORWARDER_FLAGS)
    }
  })

  it("runs with those flags when started through its shebang, as npx does", { timeout: 60_000 }, () => {
    const run = spawnSync(binOf("teams"), ["check"], { env, cwd: dir, encoding: "utf8" })
    expect(execArgvOf(run)).toEqual(FORWARDER_FLAGS)
  })

  it("runs with those flags under npm start", { timeout: 60_000 }, () => {
    const run = spawnSync("npm", ["start", "--silent", "-w", "@agentgov/connector-teams", "--", "check"], {
      env,
      cwd: root,
      encoding: "utf8",
    })
    expect(execArgvOf(run)).toEqual(FORWARDER_FLAGS)
  })
})
