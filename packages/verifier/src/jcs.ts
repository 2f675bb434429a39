/**
 * RFC 8785 JSON Canonicalization Scheme for values that came from JSON.parse
 * (or are JSON-shaped): object keys sorted by UTF-16 code units, numbers in
 * ECMAScript's shortest round-trip form, strings escaped as JSON.stringify does.
 *
 * JSON.stringify already writes numbers, strings and literals as RFC 8785 does (ECMAScript's Number::toString,
 * -0 as 0); only key order can differ. So, cheapest first:
 * - a value whose every object lists its keys in code-unit order, built of plain objects, arrays, strings,
 *   booleans, null and finite numbers, is JSON.stringify's as it is (events the service builds list their keys
 *   so; about a third of the general path's cost);
 * - otherwise a copy with every object's keys inserted in order is (about two thirds of it), unless an object
 *   holds a key an object cannot list in insertion order (integer-like keys come first, `__proto__` sets the
 *   prototype);
 * - and then the general path writes the text itself.
 * Each step walks the value once and stops at what rules it out, so the cost stays linear.
 */
export const canonicalize = (value: unknown): string => {
  if (inOrder(value)) return JSON.stringify(value)
  const copy = orderedCopy(value)
  return copy === UNORDERABLE ? general(value) : JSON.stringify(copy)
}

/** True when JSON.stringify writes `value` exactly as RFC 8785 does (see above). */
const inOrder = (value: unknown): boolean => {
  if (value === null) return true
  switch (typeof value) {
    case "boolean":
    case "string":
      return true
    case "number":
      return Number.isFinite(value)
    case "object": {
      if (Array.isArray(value)) {
        // A hole or an undefined element is not in order (JSON.stringify would write null; the general path refuses).
        for (let i = 0; i < value.length; i++) if (!inOrder(value[i])) return false
        return true
      }
      // Another prototype (a Date, a Buffer, a class) may carry toJSON or keys JSON.stringify sees otherwise.
      const proto = Object.getPrototypeOf(value)
      if (proto !== Object.prototype && proto !== null) return false
      let previous: string | undefined
      // for…in lists a plain object's own keys in Object.keys' order (integer-like keys first, ascending).
      for (const k in value) {
        if (previous !== undefined && !(previous < k)) return false
        previous = k
        const v = (value as Record<string, unknown>)[k]
        if (v !== undefined && !inOrder(v)) return false
      }
      return true
    }
    default:
      return false
  }
}

const UNORDERABLE: unique symbol = Symbol("a key an object cannot list in insertion order")

/**
 * `value` with every object's keys inserted in code-unit order, as plain objects and arrays (own enumerable keys
 * only, as the general path reads them), or UNORDERABLE. Refuses what the general path refuses, with its errors.
 */
const orderedCopy = (value: unknown): unknown => {
  if (value === null) return value
  switch (typeof value) {
    case "boolean":
    case "string":
      return value
    case "number":
      if (!Number.isFinite(value)) throw new TypeError("JCS: non-finite number")
      return value
    case "object": {
      if (Array.isArray(value)) {
        const out = new Array(value.length)
        for (let i = 0; i < value.length; i++) {
          // A hole or an undefined element is refused (the default case below), as the general path refuses it.
          const o = orderedCopy(value[i])
          if (o === UNORDERABLE) return UNORDERABLE
          out[i] = o
        }
        return out
      }
      const obj = value as Record<string, unknown>
      const keys = Object.keys(obj)
      for (let i = 0; i < keys.length; i++) {
        const first = keys[i]!.charCodeAt(0)
        // A key starting with a digit may be integer-like, listed first whatever the insertion order.
        if ((first >= 48 && first <= 57) || keys[i] === "__proto__") return UNORDERABLE
      }
      keys.sort()
      const out: Record<string, unknown> = {}
      for (let i = 0; i < keys.length; i++) {
        const k = keys[i]!
        const v = obj[k]
        if (v === undefined) continue
        const o = orderedCopy(v)
        if (o === UNORDERABLE) return UNORDERABLE
        out[k] = o
      }
      return out
    }
    default:
      throw new TypeError(`JCS: cannot canonicalize ${typeof value}`)
  }
}

const general = (value: unknown): string => {
  if (value === null) return "null"
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false"
    case "number":
      if (!Number.isFinite(value)) throw new TypeError("JCS: non-finite number")
      // ES Number::toString is exactly RFC 8785's number serialisation; -0 becomes 0.
      return Object.is(value, -0) ? "0" : String(value)
    case "string":
      return JSON.stringify(value)
    case "object": {
      // Plain loops, not map/join: this runs for every event hashed or verified.
      if (Array.isArray(value)) {
        let out = "["
        for (let i = 0; i < value.length; i++) out += (i === 0 ? "" : ",") + general(value[i])
        return `${out}]`
      }
      const obj = value as Record<string, unknown>
      const keys = Object.keys(obj)
      // Sorting (by UTF-16 code units, Array#sort's default) only when needed: many objects come in order.
      for (let i = 1; i < keys.length; i++) {
        if (!(keys[i - 1]! < keys[i]!)) {
          keys.sort()
          break
        }
      }
      let out = "{"
      let first = true
      for (let i = 0; i < keys.length; i++) {
        const k = keys[i]!
        const v = obj[k]
        if (v === undefined) continue
        out += `${first ? "" : ","}${JSON.stringify(k)}:${general(v)}`
        first = false
      }
      return `${out}}`
    }
    default:
      throw new TypeError(`JCS: cannot canonicalize ${typeof value}`)
  }
}
