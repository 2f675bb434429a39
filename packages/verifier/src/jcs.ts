/**
 * RFC 8785 JSON Canonicalization Scheme for values that came from JSON.parse
 * (or are JSON-shaped): object keys sorted by UTF-16 code units, numbers in
 * ECMAScript's shortest round-trip form, strings escaped as JSON.stringify does.
 *
 * For plain data (plain objects, arrays, strings, booleans, null, finite numbers) JSON.stringify writes numbers
 * (ECMAScript's Number::toString, -0 as 0), strings and literals exactly as RFC 8785 does; only the key order can
 * differ. So, cheapest first:
 * - a value whose every object lists its keys in code-unit order is JSON.stringify's as it is (the guard's events
 *   list their keys so; about a third of the general path's cost on a small event);
 * - otherwise a copy with every object's keys inserted in order is (about two thirds), unless an object holds a
 *   key an object cannot list in insertion order (integer-like keys come first, ascending; `__proto__` sets the
 *   prototype);
 * - and otherwise, or when the copy fails for any reason, the general path writes the text itself, and is the one
 *   that refuses what JSON cannot hold (non-finite numbers, undefined, functions, symbols, BigInt).
 * Each walk is linear and stops at what rules its path out. What JSON.stringify would read differently from the
 * general path is ruled out of the first two: any other prototype (a Date, a Map, a class, an array subclass), an
 * own `toJSON` (enumerable or not), raw JSON (`JSON.rawJSON`), a `toJSON` on the intrinsic prototypes. Outside the
 * contract, as before: getters with side effects and Proxies (a getter may now be read more than once), boxed
 * primitives given another prototype, and nesting beyond JSON.stringify's own depth limit (about 4,400 levels;
 * stored event data is capped at 32).
 */
export const canonicalize = (value: unknown): string => {
  // A toJSON on Array.prototype or Object.prototype would be called by JSON.stringify on every object and array.
  if ("toJSON" in Array.prototype) return general(value)
  if (inOrder(value)) return JSON.stringify(value)
  let copy: unknown
  try {
    copy = orderedCopy(value)
  } catch {
    copy = UNORDERABLE
  }
  return copy === UNORDERABLE ? general(value) : JSON.stringify(copy)
}

/** JSON.parse's own raw JSON objects (`JSON.rawJSON`), which JSON.stringify writes as their text. */
const isRawJSON = (JSON as { isRawJSON?: (value: unknown) => boolean }).isRawJSON ?? (() => false)

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
        if (Object.getPrototypeOf(value) !== Array.prototype || Object.hasOwn(value, "toJSON")) return false
        // A hole or an undefined element is not in order (JSON.stringify would write null; the general path refuses).
        for (let i = 0; i < value.length; i++) if (!inOrder(value[i])) return false
        return true
      }
      // Another prototype (a Date, a Buffer, a class) may carry toJSON or keys JSON.stringify sees otherwise.
      const proto = Object.getPrototypeOf(value)
      if (proto !== Object.prototype && proto !== null) return false
      if (Object.hasOwn(value, "toJSON") || (proto === null && isRawJSON(value))) return false
      let previous: string | undefined
      // for…in lists a plain object's own keys in Object.keys' order (integer-like keys first, ascending); an
      // enumerable key inherited from a polluted Object.prototype can only rule the fast path out.
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

const UNORDERABLE: unique symbol = Symbol("a value the copy does not write as RFC 8785 does")
const ALL_DIGITS = /^\d+$/

/**
 * `value` with every object's keys inserted in code-unit order, as plain objects and arrays (own enumerable keys
 * only, as the general path reads them), or UNORDERABLE for anything the general path should decide.
 */
const orderedCopy = (value: unknown): unknown => {
  if (value === null) return value
  switch (typeof value) {
    case "boolean":
    case "string":
      return value
    case "number":
      return Number.isFinite(value) ? value : UNORDERABLE
    case "object": {
      if (Array.isArray(value)) {
        const out = new Array(value.length)
        for (let i = 0; i < value.length; i++) {
          // A hole or an undefined element: the general path refuses it.
          const o = orderedCopy(value[i])
          if (o === UNORDERABLE) return UNORDERABLE
          out[i] = o
        }
        return out
      }
      const obj = value as Record<string, unknown>
      const keys = Object.keys(obj)
      for (let i = 0; i < keys.length; i++) {
        const k = keys[i]!
        const first = k.charCodeAt(0)
        // An all-digit key may be an array index, listed first whatever the insertion order (a superset: "01" and
        // keys past 2^32 - 2 are not, and cost only the general path). A date ("2026-12-01") is not one.
        if ((first >= 48 && first <= 57 && ALL_DIGITS.test(k)) || k === "__proto__") return UNORDERABLE
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
      return UNORDERABLE
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
