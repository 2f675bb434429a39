import { type KeyObject, sign } from "node:crypto"
import { isJsonObject } from "../shared/schemas.ts"

/** A JSON value as one base64url segment of a compact JWS. */
export const b64json = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url")

/** A base64url segment holding a JSON object, or undefined when it does not. */
export const parseSegment = (segment: string): Record<string, unknown> | undefined => {
  try {
    const value = JSON.parse(Buffer.from(segment, "base64url").toString("utf8"))
    return isJsonObject(value) ? value : undefined
  } catch {
    return undefined
  }
}

/** A compact JWS (RFC 7515) signed with an Ed25519 key: `header.payload.signature`. */
export const signCompact = (header: Record<string, unknown>, payload: unknown, privateKey: KeyObject): string => {
  const input = `${b64json(header)}.${b64json(payload)}`
  return `${input}.${sign(null, Buffer.from(input), privateKey).toString("base64url")}`
}
