import { readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { PATCHES, patchedFiles } from "../../../tooling/patches/apply.mjs"

/**
 * The postgres.js this package loads carries every patch of tooling/patches, in both of its builds (`src`, the ESM
 * the service and its tests load; `cjs/src`, for a bundler that takes `default`): an install that skipped the
 * postinstall (`--ignore-scripts`), or a copy npm nested under a workspace, would otherwise run unpatched, unnoticed.
 */
describe("the installed postgres.js", () => {
  // <package>/src/index.js and <package>/cjs/src/index.js
  const fromEsm = dirname(dirname(fileURLToPath(import.meta.resolve("postgres"))))
  const fromCjs = dirname(dirname(dirname(createRequire(import.meta.url).resolve("postgres"))))

  it("is one copy, whichever of its entry points is loaded", () => {
    expect(fromCjs).toBe(fromEsm)
  })

  it("carries every patch of tooling/patches, in each file the patch edits", () => {
    expect(PATCHES.length).toBeGreaterThan(0)
    for (const patch of PATCHES)
      for (const [file] of patchedFiles(patch))
        expect(readFileSync(join(fromEsm, file), "utf8"), `${file}: ${patch.name}`).toContain(patch.mark)
  })
})
