import type { Actor, DomainServices, IdempotencyRequest, Replayed, Scope } from "@agentgov/domain"
import type { Effect, Exit, Schema } from "effect"
import type { DomainError } from "./ApiError.ts"

export type HttpMethod = "GET" | "POST" | "PATCH" | "DELETE"

/**
 * One operation of the API, defined once. The REST facade, the tRPC router and
 * the OpenAPI document are all built from these, so they cannot drift.
 *
 * `input` is one Struct holding path parameters, query parameters (GET and
 * DELETE) or body fields (POST and PATCH); `handler` calls one domain verb.
 */
export interface Operation<I = any, O = any, N extends string = string, M extends HttpMethod = HttpMethod> {
  /** `resource.verb`: the tRPC path and the OpenAPI operationId. */
  readonly name: N
  readonly method: M
  /** Under `/api/v1` (and `/v1`); `:param` segments are fields of `input`. */
  readonly path: string
  /** The scope the credential must hold; `null`: any valid credential (e.g. exchanging a key for a token). */
  readonly scope: Scope | null
  /** A second scope that serves as well as `scope` (D12: a trust score needs `trust:read` or `agents:read`). */
  readonly orScope?: Scope
  /**
   * Public (D1): no credential; the handler's actor is PUBLIC_ACTOR, which belongs to no workspace, and
   * calls are rate limited by the client's address. Served over REST by the public handler
   * (rest/publicRoutes.ts), which also renders what is not JSON (a badge's SVG).
   */
  readonly public?: true
  readonly summary: string
  readonly description?: string
  readonly tag: string
  readonly input: Schema.Codec<I, any, never, never>
  readonly output: Schema.Top
  /** The SDK method takes this input field itself, not the input object (`events.ingest(events)`). */
  readonly sdkArgument?: string
  /** Largest body this operation accepts over REST, when it differs from the server's (content uploads). */
  readonly maxBodyBytes?: number
  /** Lists answer `data` plus `meta` with the cursor. */
  readonly paginated?: boolean
  readonly successStatus?: 200 | 201 | 202
  /**
   * Other media types the REST route answers when the handler returns a {@link RenderedDocument} (media
   * type → description), for the OpenAPI document.
   */
  readonly alternateContent?: Readonly<Record<string, string>>
  /** Error codes beyond the common ones, for the reference. */
  readonly errors?: ReadonlyArray<string>
  /**
   * For outputs that carry a secret shown once: the value an Idempotency-Key
   * replay may store and send again, with the secret removed. Secrets are
   * never written to the idempotency store.
   */
  readonly redactForReplay?: (output: any) => unknown
  /**
   * An Idempotency-Key is checked and then not used: every call runs. For an answer that is a secret and
   * useless redacted (an SDK token), when repeating the call is harmless.
   */
  readonly ignoresIdempotencyKey?: boolean
  /**
   * The handler takes an Idempotency-Key itself (`context.idempotency`) and
   * writes its record in its own transaction, answering `Replayed` for a
   * retry. Otherwise the executor wraps the handler in a transaction that
   * claims the key. Event ingest does this to join the group commit.
   */
  readonly ownsIdempotency?: boolean
  readonly handler: (
    input: I,
    actor: Actor,
    context: OperationContext,
  ) => Effect.Effect<O | Replayed, DomainError, DomainServices>
  /**
   * A hot operation's handler for its common case, run without entering the runtime: built once from the
   * services, it answers a promise of the handler's exit, or undefined (having done nothing) when the
   * call needs `handler`. Both must answer alike.
   */
  readonly fast?: Effect.Effect<FastHandler<I, O>, never, DomainServices>
}

export type FastHandler<I, O> = (
  input: I,
  actor: Actor,
  context: OperationContext,
) => Promise<Exit.Exit<O | Replayed, DomainError>> | undefined

/**
 * A handler's answer that is a document, not JSON (a PDF): REST sends its bytes with its media type; tRPC
 * and the SDK get `{contentType, base64}`.
 */
/**
 * Whether a call of `op` runs under its Idempotency-Key (D2): a credentialed POST that does not ignore it. The REST
 * facade stores its answer under the key, tRPC refuses the header there, and the OpenAPI document says so.
 */
export const honoursIdempotencyKey = (op: Pick<Operation, "method" | "public" | "ignoresIdempotencyKey">): boolean =>
  op.method === "POST" && !op.public && !op.ignoresIdempotencyKey

export class RenderedDocument {
  readonly contentType: string
  readonly body: Buffer
  readonly filename: string | undefined
  constructor(contentType: string, body: Buffer, filename?: string) {
    this.contentType = contentType
    this.body = body
    this.filename = filename
  }
  toJSON() {
    return { contentType: this.contentType, base64: this.body.toString("base64") }
  }
}

/** The actor of a public operation's handler: no workspace, no scope. Handlers of public operations ignore it. */
export const PUBLIC_ACTOR: Actor = {
  workspaceId: "",
  environment: "live",
  credential: { type: "system", id: "public" },
  keyType: "workspace",
  scopes: new Set(),
}

/** What a transport passes to a handler beyond its input. */
export interface OperationContext {
  readonly idempotency?: IdempotencyRequest | undefined
}

/**
 * An operation as defined, with what its clients see in its type: its name and method as literals, and its
 * input schema (whose encoded side is what a client sends).
 */
export type DefinedOperation<S extends Schema.Top, O, N extends string, M extends HttpMethod> = Omit<
  Operation<S["Type"], O, N, M>,
  "input"
> & { readonly input: S }

/** Infers the handler's input type from the schema, and keeps the name and method for the typed tRPC router. */
export const defineOperation = <
  S extends Schema.Codec<any, any, never, never>,
  O,
  const N extends string,
  const M extends HttpMethod,
>(
  op: Omit<Operation<S["Type"], O, N, M>, "input"> & { readonly input: S },
): DefinedOperation<S, O, N, M> => op
