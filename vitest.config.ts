import { defineConfig } from "vitest/config"

/**
 * `npm test`: every package's suite in one vitest run (one worker pool, one
 * global setup per project), closing with a plain "N passed, N failed" line.
 */
export default defineConfig({
  test: {
    projects: ["packages/*", "apps/*", "connectors/*/vitest.config.ts", "tooling/bench"],
    reporters: ["default", "./tooling/testing/src/SummaryReporter.ts"],
    maxWorkers: 2,
  },
})
