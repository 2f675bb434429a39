import { sharedConfig } from "@agentgov/testing/vitest"
import { defineProject, mergeConfig } from "vitest/config"

export default mergeConfig(sharedConfig, defineProject({ test: { name: "bench" } }))
