export * from "./OAuthClient.ts"
export * from "./OAuthErrors.ts"
export {
  ACCESS_TOKEN_PREFIX,
  ACCESS_TOKEN_TTL_S,
  type AuthorizeRequest,
  type CheckedAuthorization,
  type ClientAuthentication,
  OAuthService,
  REFRESH_TOKEN_PREFIX,
  REFRESH_TOKEN_TTL_S,
  type TokenResponse,
} from "./OAuthService.ts"
