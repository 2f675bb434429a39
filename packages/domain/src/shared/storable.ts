import { Effect } from "effect"
import { InvalidInput } from "./errors.ts"

const MAX_DEPTH = 32

/**
 * Finds what JSON allows but PostgreSQL's jsonb and text do not keep, or what
 * would not survive a round trip byte-for-byte (and so would break the chain
 * hash): NUL characters and unpaired surrogates, in keys or values; and
 * nesting deeper than 32 levels. Returns the path and issue of the first.
 */
export const findUnstorable = (
  value: unknown,
  path: Array<string | number> = [],
): { path: Array<string | number>; issue: string } | undefined => {
  // One path stack for the whole walk (this runs on every request body): copied only for the answer.
  const stack = [...path]
  const issue = walk(value, stack)
  return issue === undefined ? undefined : { path: stack, issue }
}

const UNSTORABLE = "contains a NUL character or an unpaired surrogate"

/** The issue of the first unstorable part, with `stack` left at its path; undefined when all is storable. */
const walk = (value: unknown, stack: Array<string | number>): string | undefined => {
  if (stack.length > MAX_DEPTH) return `nested deeper than ${MAX_DEPTH} levels`
  if (typeof value === "number") {
    // JSON.parse turns 1e400 into Infinity, which JSON cannot carry back and JCS cannot hash.
    return Number.isFinite(value) ? undefined : "number out of range"
  }
  if (typeof value === "string") return value.includes("\u0000") || !value.isWellFormed() ? UNSTORABLE : undefined
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      stack.push(i)
      const found = walk(value[i], stack)
      if (found !== undefined) return found
      stack.pop()
    }
    return undefined
  }
  if (value !== null && typeof value === "object") {
    for (const k of Object.keys(value)) {
      stack.push(k)
      if (k.includes("\u0000") || !k.isWellFormed()) return `key ${UNSTORABLE}`
      const found = walk((value as Record<string, unknown>)[k], stack)
      if (found !== undefined) return found
      stack.pop()
    }
  }
  return undefined
}

const formatField = (path: ReadonlyArray<string | number>) =>
  path.reduce<string>(
    (out, seg) => (typeof seg === "number" ? `${out}[${seg}]` : out === "" ? seg : `${out}.${seg}`),
    "",
  )

/**
 * The domain's own guard against the same: services are the last step before
 * the database, so input that reached them by any path (a transport, the CLI,
 * a worker) fails as a 422 naming the field, never as a database defect.
 */
export const requireStorable = (
  input: unknown,
  base: ReadonlyArray<string | number> = [],
): Effect.Effect<void, InvalidInput> => {
  const found = findUnstorable(input, [...base])
  return found
    ? Effect.fail(new InvalidInput({ field: formatField(found.path) || "input", message: found.issue }))
    : Effect.void
}
