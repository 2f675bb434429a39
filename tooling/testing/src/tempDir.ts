import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll } from "vitest"

/**
 * Temporary directories a test file makes, removed when the file is done. A module of its own
 * (`@agentgov/testing/tempDir`), not in the package's index: importing it registers a vitest hook.
 */

const made: Array<string> = []
// Registered in each test file that imports this module (test files are isolated, vitest's default), before the
// file's own hooks: after-hooks run as a stack, so this one runs last, once the children writing there are gone.
// A directory a process still writes into (one a timed-out test left) is left behind, not a failed file.
afterAll(() => {
  for (const dir of made.splice(0)) {
    try {
      rmSync(dir, { recursive: true, force: true, maxRetries: 3 })
    } catch {}
  }
})

/** A fresh directory under the system's temporary one, removed when the test file is done. */
export const tempDir = (prefix: string): string => {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  made.push(dir)
  return dir
}
