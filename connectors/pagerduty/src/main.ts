import { runConnectorCli } from "@agentgov/connector-sdk/runtime"
import { pagerduty } from "./connector.ts"

await runConnectorCli(pagerduty)
