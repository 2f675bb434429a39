import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll } from "vitest"

const made: Array<string> = []
// Registered in each test file that imports this module, before the file's own hooks: after-hooks run as a stack,
// so this one runs last, once the children writing into the directories are gone.
afterAll(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** A fresh directory under the system's temporary one, removed when the test file is done. */
export const tempDir = (prefix: string): string => {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  made.push(dir)
  return dir
}
