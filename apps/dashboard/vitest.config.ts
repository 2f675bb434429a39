import { sharedConfig } from "@agentgov/testing/vitest"
import { defineProject, mergeConfig } from "vitest/config"

// Not vite.config.ts: the browser tests run in Node, driving Chromium against a real server that serves the
// built dashboard. The server's logs are scanned for secrets at the end, as the server suite's are.
export default mergeConfig(
  sharedConfig,
  defineProject({
    test: {
      name: "dashboard",
      globalSetup: ["../server/test/logScan.ts"],
      testTimeout: 120_000,
      hookTimeout: 240_000,
    },
  }),
)
