import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { ConnectorDefinition } from "@agentgov/connector-sdk/runtime"
import { afterAll, beforeAll } from "vitest"
import { type Agentgov, startAgentgov } from "./agentgov.ts"
import type { VendorFake } from "./contract.ts"
import { type InProcess, runInProcess } from "./processes.ts"

/** A fresh webhook signing secret. */
export const newSecret = () => `whsec_${randomBytes(24).toString("hex")}`

/** What {@link useConnectorRig} sets up; its fields are there from `beforeAll` on. */
export interface Rig<F extends VendorFake> {
  readonly agentgov: Agentgov
  readonly fake: F
  readonly connector: InProcess
  readonly dataDir: string
  readonly secret: string
  /** The webhook that subscribes the connector to `events`. */
  readonly hookId: string
  /** The connector's own settings plus a dashboard URL. */
  readonly vendorEnv: () => Record<string, string>
}

/**
 * For a `describe`: a real agentgov server, the vendor's fake, and the connector in-process,
 * subscribed to `events` through a webhook; all stopped and removed after the block.
 */
export const useConnectorRig = <F extends VendorFake>(options: {
  readonly definition: ConnectorDefinition<any, any>
  readonly startFake: () => Promise<F>
  readonly env: (fake: F) => Record<string, string>
  readonly events: ReadonlyArray<string>
}): Rig<F> => {
  const rig = { secret: newSecret() } as { -readonly [K in keyof Rig<F>]: Rig<F>[K] }
  rig.vendorEnv = () => ({ ...options.env(rig.fake), AGENTGOV_DASHBOARD_URL: "https://gov.example.com" })
  beforeAll(async () => {
    rig.agentgov = await startAgentgov()
    rig.fake = await options.startFake()
    rig.dataDir = mkdtempSync(join(tmpdir(), `agentgov-${options.definition.name}-`))
    rig.connector = await runInProcess(options.definition, {
      ...rig.vendorEnv(),
      AGENTGOV_WEBHOOK_SECRET: rig.secret,
      AGENTGOV_CONNECTOR_DATA_DIR: rig.dataDir,
    })
    rig.hookId = (await rig.agentgov.subscribe(`${rig.connector.url}/webhooks`, options.events, rig.secret)).id
  })
  afterAll(async () => {
    await rig.connector?.running.close()
    await rig.fake?.close()
    await rig.agentgov?.close()
    if (rig.dataDir) rmSync(rig.dataDir, { recursive: true, force: true })
  })
  return rig
}
