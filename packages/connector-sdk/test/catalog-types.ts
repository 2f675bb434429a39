/**
 * Compile-time comparison of the SDK's hand-written event types with the service's catalog
 * (`tsc --noEmit -p packages/connector-sdk` fails on a difference, naming the event).
 */
import type { SystemEventData as CatalogData, SystemEventName as CatalogName } from "@agentgov/domain"
import type { SystemEventDataMap, SystemEventName } from "../src/index.ts"

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false

type NamesDiffer = Exclude<CatalogName, SystemEventName> | Exclude<SystemEventName, CatalogName>
export const sameNames: [NamesDiffer] extends [never] ? true : `names differ: ${NamesDiffer}` = true

type Differing = {
  [N in SystemEventName & CatalogName]: Equal<CatalogData<N>, SystemEventDataMap[N]> extends true ? never : N
}[SystemEventName & CatalogName]
export const sameData: [Differing] extends [never] ? true : `data differs: ${Differing}` = true
