/**
 * RFC 8785 JSON Canonicalization Scheme for values that came from JSON.parse
 * (or are JSON-shaped): object keys sorted by UTF-16 code units, numbers in
 * ECMAScript's shortest round-trip form, strings escaped as JSON.stringify does.
 */
export const canonicalize = (value: unknown): string => {
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
      if (Array.isArray(value)) return `[${value.map(canonicalize).join(",")}]`
      const obj = value as Record<string, unknown>
      const keys = Object.keys(obj)
        .filter((k) => obj[k] !== undefined)
        .sort()
      return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalize(obj[k])}`).join(",")}}`
    }
    default:
      throw new TypeError(`JCS: cannot canonicalize ${typeof value}`)
  }
}
