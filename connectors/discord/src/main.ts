import { runConnectorCli } from "@agentgov/connector-sdk/runtime"
import { discord } from "./connector.ts"

await runConnectorCli(discord)
