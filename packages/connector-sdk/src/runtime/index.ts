/**
 * `@agentgov/connector-sdk/runtime`: the runtime of standalone connector apps (a durable
 * node:sqlite queue, de-duplication, retries, dead letters and `replay`, routing, health, drain,
 * `install`). Needs Node ≥ 22.13 (node:sqlite); the package's main entry does not.
 */

export {
  type ApiTarget,
  InstallError,
  type InstalledWebhook,
  type InstallResult,
  installWebhook,
  readInstalled,
  type UninstallResult,
  uninstallWebhook,
  WEBHOOK_FILE,
} from "./install.ts"
export type { Logger, LogLevel } from "./log.ts"
export {
  type BatchContext,
  ConfigError,
  type ConnectorDefinition,
  DEFAULT_STATE_TTL_MS,
  type DeliveryContext,
  type DeliveryResult,
  dead,
  defineConnector,
  loadConfig,
  type OwnDeadLetter,
  type OwnDeadLetters,
  ok,
  type RunningConnector,
  type RuntimeHealth,
  retry,
  runConnectorCli,
  type StartOptions,
  type StateSetOptions,
  type StateStore,
  startConnector,
} from "./Runtime.ts"
export type { Routing } from "./routing.ts"
export type { StoredDeadLetter, StoredEvent, StoredJob } from "./Store.ts"
export { type Env, isLoopbackHost, type SettingSpec, type SettingsOf, type SettingsSchema } from "./settings.ts"
export {
  createVendorFetch,
  type VendorFetch,
  type VendorFetchOptions,
  type VendorHeaders,
  type VendorRequestInit,
  type VendorResponse,
} from "./vendorFetch.ts"
