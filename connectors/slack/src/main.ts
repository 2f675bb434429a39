import { runConnectorCli } from "@agentgov/connector-sdk/runtime"
import { slack } from "./connector.ts"

await runConnectorCli(slack)
