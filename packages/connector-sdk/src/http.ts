import type { IncomingMessage, ServerResponse } from "node:http"

/** HTTP plumbing shared by the in-memory app (`ConnectorApp`) and the durable runtime. */

export const errorSummary = (error: unknown): { readonly name: string; readonly message: string } =>
  error instanceof Error
    ? { name: error.name, message: error.message }
    : { name: typeof error, message: typeof error === "string" ? error : String(error) }

export const send = (
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
  headOnly = false,
): void => {
  const text = JSON.stringify(body)
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text),
    "cache-control": "no-store",
    ...headers,
  })
  res.end(headOnly ? undefined : text)
}

export const methodNotAllowed = (res: ServerResponse, allow: string): void =>
  send(res, 405, { ok: false, error: { code: "METHOD_NOT_ALLOWED", message: `use ${allow}` } }, { allow })

/** The body as bytes, or why there is none. Stops buffering at `max`. */
export const readBody = (req: IncomingMessage, max: number): Promise<Buffer | "too_large" | "aborted"> => {
  const declared = Number(req.headers["content-length"])
  if (Number.isFinite(declared) && declared > max) {
    req.resume()
    return Promise.resolve("too_large")
  }
  return new Promise((resolve) => {
    const chunks: Array<Buffer> = []
    let size = 0
    let done = false
    const finish = (result: Buffer | "too_large" | "aborted") => {
      if (done) return
      done = true
      resolve(result)
    }
    req.on("data", (chunk: Buffer) => {
      if (done) return
      size += chunk.length
      if (size > max) {
        chunks.length = 0
        finish("too_large")
        return
      }
      chunks.push(chunk)
    })
    req.on("end", () => finish(Buffer.concat(chunks)))
    req.on("error", () => finish("aborted"))
    req.on("close", () => finish(req.complete ? Buffer.concat(chunks) : "aborted"))
  })
}
