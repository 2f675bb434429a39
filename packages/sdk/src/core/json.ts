import type { JsonObject } from "../types.ts"

/** A `{…}` literal or `JSON.parse` result: what may be sent as a guard context as it is (not an array, class instance or Map). */
export const isPlainObject = (v: unknown): v is JsonObject =>
  typeof v === "object" && v !== null && !Array.isArray(v) && Object.getPrototypeOf(v) === Object.prototype

/** Any non-array object: what a decoded JSON object is. */
export const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v)
