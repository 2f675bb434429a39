export * from "./PeopleErrors.ts"
export { type MembershipGrant, PeopleRepo } from "./PeopleRepo.ts"
export { INVITATION_PREFIX, INVITATIONS_PER_DAY, PeopleService } from "./PeopleService.ts"
export { DEFAULT_INVITATION_TTL_MS, PeopleSettings, type PeopleSettingsShape } from "./PeopleSettings.ts"
export * from "./Person.ts"
export { OWNER_SCOPE, ROLE_SCOPES, ROLES, Role } from "./roles.ts"
export {
  type ActiveSession,
  csrfMatches,
  csrfTokenOf,
  DEFAULT_SESSION_SETTINGS,
  SESSION_PREFIX,
  SessionSettings,
  type SessionSettingsShape,
  Sessions,
  SIGNIN_LINK_PREFIX,
  type SignInFlow,
  type StartedSession,
} from "./Sessions.ts"
