import { sharedConfig } from "@agentgov/testing/vitest"
import { defineProject, mergeConfig } from "vitest/config"

// Not vite.config.ts: the browser tests run in Node, driving Chromium against a real server that serves the
// built dashboard. (In the root run, the server suite's log scan also reads this suite's server logs.)
export default mergeConfig(
  sharedConfig,
  defineProject({
    test: {
      name: "dashboard",
      testTimeout: 120_000,
      hookTimeout: 240_000,
    },
  }),
)
