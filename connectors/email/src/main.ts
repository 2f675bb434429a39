import { runConnectorCli } from "@agentgov/connector-sdk/runtime"
import { email } from "./connector.ts"

await runConnectorCli(email)
