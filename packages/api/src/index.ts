export { ApiError, type DomainError, formatPath, toApiError } from "./ApiError.ts"
export { type AnyDefinedOperation, definedOperations, operations } from "./catalog.ts"
export {
  bearerOf,
  type Executor,
  type ExecutorOptions,
  makeExecutor,
  type Runtime,
  type SessionRequest,
  severalCredentials,
} from "./Executor.ts"
export { defineOperation, type HttpMethod, type Operation, PUBLIC_ACTOR, RenderedDocument } from "./Operation.ts"
export { buildOpenApi, type OpenApiOptions } from "./openapi.ts"
export { renderReference } from "./reference.ts"
export { cookieOf, sessionRequestOf } from "./rest/cookies.ts"
export { type EventStreamOptions, makeEventStreamHandler } from "./rest/eventStream.ts"
export { authorizationOf, bearerOfRequest, errorBody, requestIdOf, sendError, sendJson } from "./rest/http.ts"
export { makePublicRoutes, type PublicRoutesOptions } from "./rest/publicRoutes.ts"
export { makeRestHandler, type RestOptions } from "./rest/RestHandler.ts"
export { type AgentgovRouter, makeTrpcRouter, type TrpcContext } from "./trpc.ts"
