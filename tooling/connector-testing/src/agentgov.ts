import { startTestServer, type TestServer } from "../../../apps/server/test/helpers.ts"

/**
 * A real agentgov server for the connector tests (its own fresh database, as every server test
 * has), allowed to deliver webhooks to loopback, with the retry schedule sped up.
 */
export interface Agentgov {
  readonly t: TestServer
  readonly url: string
  readonly key: string
  /** Registers a webhook to `url` for `events`; returns its id and secret. */
  readonly subscribe: (
    url: string,
    events: ReadonlyArray<string>,
    secret?: string,
  ) => Promise<{ id: string; secret: string }>
  /** `POST /webhooks/:id/test`: a sample of `eventType`, signed and delivered as real ones are. */
  readonly testDelivery: (webhookId: string, eventType: string) => Promise<{ delivered: boolean; statusCode?: number }>
  /** Ingests one client event; returns its id. */
  readonly ingest: (type: string, data: Record<string, unknown>) => Promise<string>
  readonly close: () => Promise<void>
}

export const startAgentgov = async (): Promise<Agentgov> => {
  // schedule A's 1 s, 2 s, … become 10 ms, 20 ms, …: a redelivery within the test's patience
  const t = await startTestServer({ webhookAllowlist: ["127.0.0.1"], webhookTimeScale: 0.01 })
  return {
    t,
    url: t.url,
    key: t.key,
    subscribe: async (url, events, secret) => {
      const res = await t.call("POST", "/api/v1/webhooks", { body: { url, events, ...(secret ? { secret } : {}) } })
      if (res.status !== 201) throw new Error(`webhook creation failed: ${res.status} ${JSON.stringify(res.body)}`)
      return { id: res.body.data.id, secret: res.body.data.secret }
    },
    testDelivery: async (webhookId, eventType) => {
      const res = await t.call("POST", `/api/v1/webhooks/${webhookId}/test`, { body: { eventType } })
      if (res.status !== 200) throw new Error(`test delivery failed: ${res.status} ${JSON.stringify(res.body)}`)
      return { delivered: res.body.data.delivered, statusCode: res.body.data.delivery.statusCode }
    },
    ingest: async (type, data) => {
      const res = await t.call("POST", "/api/v1/events/ingest", { body: { events: [{ type, data }] } })
      if (res.status !== 201) throw new Error(`ingest failed: ${res.status} ${JSON.stringify(res.body)}`)
      return res.body.data.events[0].id
    },
    close: () => t.close(),
  }
}
