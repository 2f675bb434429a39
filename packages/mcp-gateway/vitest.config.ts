import { sharedConfig } from "@agentgov/testing/vitest"
import { defineProject, mergeConfig } from "vitest/config"

// Workspace packages resolve to their TypeScript source (the `@agentgov/source` export condition),
// so the tests never depend on a stale or missing `dist` of @agentgov/connector-sdk.
const conditions = ["@agentgov/source", "module", "node", "development|production"]

export default mergeConfig(
  sharedConfig,
  defineProject({
    resolve: { conditions },
    ssr: { resolve: { conditions } },
    test: { name: "mcp-gateway" },
  }),
)
