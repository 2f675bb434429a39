import type { ConnectorOptions } from "./ConnectorApp.ts"

/**
 * The options {@link configFromEnv} reads.
 *
 * @example
 * ```ts
 * import { type ConnectorEnvConfig, createConnector, configFromEnv } from "@agentgov/connector-sdk"
 *
 * const config: ConnectorEnvConfig = configFromEnv()
 * const app = createConnector({ ...config, onDeadLetter: store })
 * ```
 */
export type ConnectorEnvConfig = Pick<
  ConnectorOptions,
  "secret" | "port" | "host" | "path" | "allowLegacy" | "toleranceSeconds" | "concurrency" | "retry"
>

/**
 * Reads the common connector settings from environment variables. The SDK itself never reads the
 * environment; a connector app calls this (or its own code) once at start.
 *
 * | Variable | Option | Default |
 * |---|---|---|
 * | `AGENTGOV_WEBHOOK_SECRET` (required) | `secret` | |
 * | `AGENTGOV_WEBHOOK_SECRET_PREVIOUS` | a second `secret`, during a rotation | |
 * | `PORT` | `port` | 3000 |
 * | `HOST` | `host` | every interface |
 * | `AGENTGOV_WEBHOOK_PATH` | `path` | `/webhooks` |
 * | `AGENTGOV_WEBHOOK_ALLOW_LEGACY` (`true`/`false`) | `allowLegacy` | false |
 * | `AGENTGOV_WEBHOOK_TOLERANCE_SECONDS` | `toleranceSeconds` | 300 |
 * | `AGENTGOV_CONNECTOR_CONCURRENCY` | `concurrency` | 4 |
 * | `AGENTGOV_CONNECTOR_MAX_ATTEMPTS` | `retry.maxAttempts` | 5 |
 *
 * Each secret is taken verbatim (no separators, so any character may appear in it).
 *
 * @throws {Error} naming the variable that is missing or malformed
 *
 * @example
 * ```ts
 * import { configFromEnv, createConnector } from "@agentgov/connector-sdk"
 *
 * const app = createConnector(configFromEnv())
 * app.on("*", (event) => console.log(event.type))
 * await app.listen()
 * ```
 */
export const configFromEnv = (env: Readonly<Record<string, string | undefined>> = process.env): ConnectorEnvConfig => {
  const text = (name: string) => {
    const v = env[name]
    return v === undefined || v === "" ? undefined : v
  }
  const int = (name: string, min: number) => {
    const v = text(name)
    if (v === undefined) return undefined
    if (!/^\d+$/.test(v) || Number(v) < min) throw new Error(`${name} must be an integer ≥ ${min}, got "${v}"`)
    return Number(v)
  }
  const bool = (name: string) => {
    const v = text(name)?.toLowerCase()
    if (v === undefined) return undefined
    if (v === "true" || v === "1" || v === "yes") return true
    if (v === "false" || v === "0" || v === "no") return false
    throw new Error(`${name} must be true or false, got "${v}"`)
  }
  const secret = text("AGENTGOV_WEBHOOK_SECRET")
  if (secret === undefined) throw new Error("AGENTGOV_WEBHOOK_SECRET is required: the webhook's signing secret")
  const previous = text("AGENTGOV_WEBHOOK_SECRET_PREVIOUS")
  const maxAttempts = int("AGENTGOV_CONNECTOR_MAX_ATTEMPTS", 1)
  const config: Record<string, unknown> = {
    secret: previous === undefined ? secret : [secret, previous],
    port: int("PORT", 0),
    host: text("HOST"),
    path: text("AGENTGOV_WEBHOOK_PATH"),
    allowLegacy: bool("AGENTGOV_WEBHOOK_ALLOW_LEGACY"),
    toleranceSeconds: int("AGENTGOV_WEBHOOK_TOLERANCE_SECONDS", 0),
    concurrency: int("AGENTGOV_CONNECTOR_CONCURRENCY", 1),
    retry: maxAttempts === undefined ? undefined : { maxAttempts },
  }
  // unset variables leave the option out, so spreading the result never overrides a default with undefined
  for (const key of Object.keys(config)) if (config[key] === undefined) delete config[key]
  return config as ConnectorEnvConfig
}
