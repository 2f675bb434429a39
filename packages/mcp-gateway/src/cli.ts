import { realpathSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { ConfigError, parseConfig, USAGE } from "./config.ts"
import { startGateway } from "./run.ts"

/** Runs the gateway until stdin closes (stdio) or a signal; resolves with the exit code. */
export const main = async (argv: ReadonlyArray<string>): Promise<number> => {
  let config: ReturnType<typeof parseConfig>
  try {
    config = parseConfig(argv, process.env)
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error
    process.stderr.write(error.message ? `agentgov-mcp-gateway: ${error.message}\n\n${USAGE}\n` : `${USAGE}\n`)
    return error.message ? 2 : 0
  }
  let running: Awaited<ReturnType<typeof startGateway>>
  try {
    running = await startGateway(config)
  } catch (error) {
    process.stderr.write(
      `agentgov-mcp-gateway: could not start the MCP server "${config.server}": ${(error as Error).message}\n`,
    )
    return 1
  }
  return new Promise<number>((resolve) => {
    let stopping = false
    const stop = () => {
      if (stopping) return
      stopping = true
      running.close().then(
        () => resolve(0),
        () => resolve(1),
      )
    }
    process.once("SIGINT", stop)
    process.once("SIGTERM", stop)
    // A stdio client ends the session by closing our stdin.
    if (!config.listen) process.stdin.once("end", stop)
  })
}

const isEntryPoint = () => {
  try {
    return realpathSync(process.argv[1] ?? "") === realpathSync(fileURLToPath(import.meta.url))
  } catch {
    return false
  }
}

// Exit once closed: the SDK token refresher and the stdio streams would keep an idle process alive.
if (isEntryPoint()) process.exit(await main(process.argv.slice(2)))
