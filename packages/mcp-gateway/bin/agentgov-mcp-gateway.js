#!/usr/bin/env node
// agentgov-mcp-gateway: runs the compiled CLI in ../dist (built by `npm run build`, and by prepack for the
// published package; Node >= 20) or, in the repository without a build, the TypeScript source (a Node that
// strips types, >= 22.18, started with `--conditions=@agentgov/source`).
import { existsSync } from "node:fs"

const dist = new URL("../dist/cli.js", import.meta.url)
const cli = existsSync(dist) ? dist : new URL("../src/cli.ts", import.meta.url)
const { main } = await import(cli.href)
// Exit once closed: the SDK token refresher and the stdio streams would keep an idle process alive.
process.exit(await main(process.argv.slice(2)))
