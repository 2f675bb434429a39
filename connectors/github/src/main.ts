import { runConnectorCli } from "@agentgov/connector-sdk/runtime"
import { github } from "./connector.ts"

await runConnectorCli(github)
