export { ephemeralPorts, freePort } from "./ports.ts"
export { cuttableProxy } from "./proxy.ts"
export { clusterUrl, pgConnect, reachableTempDir, withDatabase } from "./templates.ts"
export { type EmptyDatabase, makeEmptyDatabase, makeTestStore, type TestStore } from "./testStore.ts"
