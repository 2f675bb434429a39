export { clusterUrl, pgConnect, reachableTempDir, withDatabase } from "./templates.ts"
export { makeTestStore, type TestStore } from "./testStore.ts"
