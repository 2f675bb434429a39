import { sharedConfig } from "@agentgov/testing/vitest"
import { defineProject, mergeConfig } from "vitest/config"

export default mergeConfig(
  sharedConfig,
  // logScan: every test server's logs go to one file, scanned for secrets when the run ends.
  defineProject({ test: { name: "server", globalSetup: ["./test/logScan.ts"] } }),
)
