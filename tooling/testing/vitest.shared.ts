import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"

/** The vitest configuration every package extends: one global setup, forked workers, two at a time. */
export const sharedConfig = defineConfig({
  test: {
    globalSetup: [fileURLToPath(new URL("./src/globalSetup.ts", import.meta.url))],
    include: ["test/**/*.test.ts"],
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
})
