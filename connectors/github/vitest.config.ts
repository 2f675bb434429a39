import { sharedConfig } from "@agentgov/testing/vitest"
import { defineProject, mergeConfig } from "vitest/config"

// The connector-sdk resolves to its TypeScript source (the `@agentgov/source` export condition).
const conditions = ["@agentgov/source", "module", "node", "development|production"]

export default mergeConfig(
  sharedConfig,
  defineProject({ resolve: { conditions }, ssr: { resolve: { conditions } }, test: { name: "connector-github" } }),
)
