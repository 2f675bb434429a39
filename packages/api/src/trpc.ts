import { type AnyRouter, initTRPC, TRPCError } from "@trpc/server"
import { ApiError, formatPath } from "./ApiError.ts"
import type { Executor } from "./Executor.ts"
import type { Operation } from "./Operation.ts"
import { findUnstorable } from "./rest/http.ts"

export interface TrpcContext {
  readonly authorization: string | undefined
  readonly requestId: string
  /** The client's address, for the rate limit of requests without a valid credential. */
  readonly address?: string | undefined
}

type TrpcCode = ConstructorParameters<typeof TRPCError>[0]["code"]

const CODES: Record<number, TrpcCode> = {
  400: "BAD_REQUEST",
  401: "UNAUTHORIZED",
  403: "FORBIDDEN",
  404: "NOT_FOUND",
  405: "METHOD_NOT_SUPPORTED",
  409: "CONFLICT",
  413: "PAYLOAD_TOO_LARGE",
  415: "UNSUPPORTED_MEDIA_TYPE",
  422: "UNPROCESSABLE_CONTENT",
  429: "TOO_MANY_REQUESTS",
}

const fail = (error: ApiError): never => {
  throw new TRPCError({ code: CODES[error.status] ?? "INTERNAL_SERVER_ERROR", message: error.message, cause: error })
}

/**
 * The tRPC router (`/trpc`), one procedure per operation (`agents.list`, …):
 * GET operations are queries, the rest mutations. Procedures go through the
 * same executor as REST, so they authenticate, authorise, validate and fail
 * identically; `error.data.apiError` carries the envelope's error.
 */
export const makeTrpcRouter = (operations: ReadonlyArray<Operation>, executor: Executor): AnyRouter => {
  const t = initTRPC.context<TrpcContext>().create({
    errorFormatter: ({ shape, error }) => {
      const api =
        error.cause instanceof ApiError
          ? error.cause
          : error.code === "INTERNAL_SERVER_ERROR"
            ? new ApiError(500, "INTERNAL_ERROR", "internal error")
            : new ApiError(
                error.code === "NOT_FOUND" ? 404 : 400,
                error.code === "NOT_FOUND" ? "NOT_FOUND" : "BAD_REQUEST",
                error.message,
              )
      return {
        ...shape,
        message: api.message,
        data: { code: shape.data.code, httpStatus: api.status, path: shape.data.path, apiError: api.toJSON() },
      }
    },
  })

  const procedure = (op: Operation) => {
    const resolve = async ({ ctx, input }: { ctx: TrpcContext; input: unknown }) => {
      const auth = (await executor.authenticate(ctx.authorization, ctx.address)).result
      if (!auth.ok) return fail(auth.error)
      const denied = executor.authorize(op, auth.value)
      if (denied) return fail(denied)
      const raw = input ?? {}
      const unstorable = findUnstorable(raw)
      if (unstorable) {
        const field = formatPath(unstorable.path) || "input"
        return fail(
          new ApiError(422, "VALIDATION_ERROR", `${field}: ${unstorable.issue}`, { field, issue: unstorable.issue }),
        )
      }
      const decoded = executor.decode(op, raw, 422)
      if (!decoded.ok) return fail(decoded.error)
      const result = await executor.run(op, decoded.value, auth.value, ctx.requestId)
      if (!result.ok) return fail(result.error)
      return result.value
    }
    const base = t.procedure.input((v: unknown) => v)
    return op.method === "GET" ? base.query(resolve) : base.mutation(resolve)
  }

  // "agents.versions.create" → { agents: { versions: { create } } }
  const tree: Record<string, any> = {}
  for (const op of operations) {
    const parts = op.name.split(".")
    let node = tree
    for (const part of parts.slice(0, -1)) node = node[part] ??= {}
    node[parts.at(-1)!] = procedure(op)
  }
  const build = (node: Record<string, any>): AnyRouter =>
    t.router(
      Object.fromEntries(Object.entries(node).map(([k, v]) => [k, typeof v === "function" || v._def ? v : build(v)])),
    )
  return build(tree)
}
