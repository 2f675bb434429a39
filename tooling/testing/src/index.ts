export { clusterUrl, pgConnect, withDatabase } from "./templates.ts"
export { makeTestStore, type TestStore } from "./testStore.ts"
