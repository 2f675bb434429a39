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
      // Plain loops, not map/join: this runs for every event hashed or verified.
      if (Array.isArray(value)) {
        let out = "["
        for (let i = 0; i < value.length; i++) out += (i === 0 ? "" : ",") + canonicalize(value[i])
        return `${out}]`
      }
      const obj = value as Record<string, unknown>
      let out = "{"
      let first = true
      for (const k of Object.keys(obj).sort()) {
        const v = obj[k]
        if (v === undefined) continue
        out += `${first ? "" : ","}${JSON.stringify(k)}:${canonicalize(v)}`
        first = false
      }
      return `${out}}`
    }
    default:
      throw new TypeError(`JCS: cannot canonicalize ${typeof value}`)
  }
}
