import { execFileSync } from "node:child_process"
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { reachableTempDir } from "@agentgov/testing"
import { afterAll, beforeEach, describe, expect, it, vi } from "vitest"
import { embeddedMajorVersion, runningClusterUrl, startEmbeddedPostgres } from "../src/EmbeddedPostgres.ts"

// What each start of the embedded PostgreSQL spends before PostgreSQL itself: `postgres --version` was spawned at
// every start of an existing cluster (0.2-0.3 s on a loaded machine), and a postmaster.pid's process command line
// read twice. The spawns and reads are counted through the real functions, wrapped.

vi.mock("node:child_process", async (original) => {
  const real = await original<typeof import("node:child_process")>()
  return { ...real, execFileSync: vi.fn(real.execFileSync) }
})
vi.mock("node:fs", async (original) => {
  const real = await original<typeof import("node:fs")>()
  return { ...real, readFileSync: vi.fn(real.readFileSync) }
})

const root = reachableTempDir("agentgov-embedded-cost-")
afterAll(() => rmSync(root, { recursive: true, force: true }))
beforeEach(() => {
  vi.mocked(execFileSync).mockClear()
  vi.mocked(readFileSync).mockClear()
})

/** How many times a binary was asked its version since the last clear. */
const versionAsked = () => vi.mocked(execFileSync).mock.calls.filter((c) => (c[1] ?? []).includes("--version")).length

describe.runIf(process.platform === "linux")("the embedded PostgreSQL's start", { timeout: 120_000 }, () => {
  it("asks the binary its version once, not at every start of the cluster", async () => {
    const dir = join(root, "cached", "pg")
    await (await startEmbeddedPostgres({ dir, ephemeral: true })).stop() // initdb: no cluster to compare yet
    expect(versionAsked()).toBe(0)
    await (await startEmbeddedPostgres({ dir, ephemeral: true })).stop()
    expect(versionAsked()).toBe(1)
    expect(existsSync(`${dir}.postgres-version`)).toBe(true)
    await (await startEmbeddedPostgres({ dir, ephemeral: true })).stop()
    await (await startEmbeddedPostgres({ dir, ephemeral: true })).stop()
    expect(versionAsked()).toBe(1)
  })

  it("asks again once the binary changed: replaced (an upgrade) or rewritten in place; ignores a bad cache", () => {
    const bin = join(root, "bin")
    mkdirSync(bin, { recursive: true })
    const postgres = join(bin, "postgres")
    const cache = join(root, "fake.postgres-version")
    const install = (version: string, via: "rename" | "in place") => {
      const script = `#!/bin/sh\necho "postgres (PostgreSQL) ${version}"\n`
      if (via === "in place") writeFileSync(postgres, script, { mode: 0o755 })
      else {
        writeFileSync(`${postgres}.new`, script, { mode: 0o755 })
        renameSync(`${postgres}.new`, postgres)
      }
    }
    install("17.2", "rename")
    expect(embeddedMajorVersion(postgres, cache)).toBe("17")
    expect(embeddedMajorVersion(postgres, cache)).toBe("17")
    expect(versionAsked()).toBe(1)
    // same size, another file: a package upgrade puts a new binary in place
    install("16.4", "rename")
    expect(embeddedMajorVersion(postgres, cache)).toBe("16")
    expect(versionAsked()).toBe(2)
    // the same file, rewritten
    install("18.10", "in place")
    expect(embeddedMajorVersion(postgres, cache)).toBe("18")
    expect(embeddedMajorVersion(postgres, cache)).toBe("18")
    expect(versionAsked()).toBe(3)
    // a cache that is not one (truncated, edited) is asked past, and rewritten
    writeFileSync(cache, '{"binary":')
    expect(embeddedMajorVersion(postgres, cache)).toBe("18")
    writeFileSync(cache, readFileSync(cache, "utf8").replace('"18"', '"x"'))
    expect(embeddedMajorVersion(postgres, cache)).toBe("18")
    expect(versionAsked()).toBe(5)
    // no binary: no version, and no refusal on a guess
    expect(embeddedMajorVersion(join(bin, "missing"), cache)).toBeUndefined()
  })

  it("reads a postmaster.pid's process command line once", () => {
    // a postmaster.pid left by a crash whose pid is now another process's (this one): not a cluster
    const dir = join(root, "stale", "pg")
    mkdirSync(dir, { recursive: true })
    writeFileSync(
      join(dir, "postmaster.pid"),
      `${process.pid}\n${dir}\n1795000000\n5432\n${dir}\n\n  1234  5678\nready   \n`,
    )
    expect(runningClusterUrl(dir)).toBeUndefined()
    const reads = vi.mocked(readFileSync).mock.calls.filter((c) => c[0] === `/proc/${process.pid}/cmdline`)
    expect(reads).toHaveLength(1)
  })
})
