import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto"

/**
 * Secrets at rest: AES-256-GCM under the operator's master key, bound to `aad`
 * (the record the secret belongs to), so a sealed value moved to another record
 * does not open. The text form is `v1.<iv>.<tag>.<ciphertext>`, base64url.
 */
export const seal = (master: Buffer, aad: string, plain: Buffer): string => {
  const iv = randomBytes(12)
  const cipher = createCipheriv("aes-256-gcm", master, iv).setAAD(Buffer.from(aad))
  const body = Buffer.concat([cipher.update(plain), cipher.final()])
  return ["v1", iv, cipher.getAuthTag(), body]
    .map((p) => (typeof p === "string" ? p : p.toString("base64url")))
    .join(".")
}

/** The plain bytes, or undefined when this master key (or this `aad`) did not seal it. */
export const unseal = (master: Buffer, aad: string, sealed: string): Buffer | undefined => {
  const [version, iv, tag, body] = sealed.split(".")
  if (version !== "v1" || !iv || !tag || !body) return undefined
  try {
    const decipher = createDecipheriv("aes-256-gcm", master, Buffer.from(iv, "base64url"))
      .setAAD(Buffer.from(aad))
      .setAuthTag(Buffer.from(tag, "base64url"))
    return Buffer.concat([decipher.update(Buffer.from(body, "base64url")), decipher.final()])
  } catch {
    return undefined
  }
}
