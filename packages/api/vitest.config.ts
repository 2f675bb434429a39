import { sharedConfig } from "@agentgov/testing/vitest"

export default sharedConfig
