import { runConnectorCli } from "@agentgov/connector-sdk/runtime"
import { teams } from "./connector.ts"

await runConnectorCli(teams)
