#!/usr/bin/env node
// agentgov-verify: runs the compiled CLI in ../dist (built by `npm run build`, and by prepack for the
// published package; works on Node >= 20) or, in the repository without a build, the TypeScript source
// (which needs a Node that strips types: >= 22.18 or >= 23.6).
import { existsSync } from "node:fs"

const dist = new URL("../dist/cli.js", import.meta.url)
const cli = existsSync(dist) ? dist : new URL("../src/cli.ts", import.meta.url)
let main
try {
  ;({ main } = await import(cli.href))
} catch (e) {
  if (e?.code !== "ERR_UNKNOWN_FILE_EXTENSION") throw e
  process.stderr.write(
    `agentgov-verify: this Node (${process.version}) cannot run the TypeScript source; build the package first (npm run build -w @agentgov/verifier)\n`,
  )
  process.exit(2)
}
process.exitCode = main(process.argv.slice(2))
