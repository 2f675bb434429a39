import { operations } from "@agentgov/api"
import { expect, it } from "vitest"
import { AgentGov } from "../src/index.ts"

/**
 * Every operation of the service's catalog has an SDK method, and every SDK method names an
 * operation that exists: a new endpoint fails this test until the SDK follows.
 */

/** Catalog operation → the client method that calls it. */
const METHODS: Readonly<Record<string, string>> = {
  "workspaces.create": "workspaces.create",
  "workspaces.list": "workspaces.list",
  "workspaces.get": "workspaces.get",
  "workspaces.update": "workspaces.update",
  "workspaces.delete": "workspaces.delete",
  "agents.create": "agents.create",
  "agents.list": "agents.list",
  "agents.get": "agents.get",
  "agents.update": "agents.update",
  "agents.delete": "agents.delete",
  "agents.versions.create": "agents.versions.create",
  "agents.versions.list": "agents.versions.list",
  "apiKeys.create": "apiKeys.create",
  "apiKeys.list": "apiKeys.list",
  "apiKeys.get": "apiKeys.get",
  "apiKeys.revoke": "apiKeys.revoke",
  "apiKeys.rotate": "apiKeys.rotate",
  "tokens.create": "tokens.create",
  "events.ingest": "events.ingest",
  "events.list": "events.list",
  "events.verify": "events.verify",
  "events.checkpoint": "events.checkpoint",
  "events.inclusionProof": "events.inclusionProof",
  "events.consistencyProof": "events.consistencyProof",
  "events.export": "events.export",
  "events.get": "events.get",
  "overview.get": "overview.get",
  "guard.evaluate": "guard.evaluate",
  "policies.evaluate": "policies.evaluate",
  "policies.simulate": "policies.simulate",
  "policies.create": "policies.create",
  "policies.list": "policies.list",
  "policies.get": "policies.get",
  "policies.versions.list": "policies.versions.list",
  "policies.update": "policies.update",
  "policies.delete": "policies.delete",
  "enforcement.create": "enforcement.create",
  "enforcement.list": "enforcement.list",
  "enforcement.get": "enforcement.get",
  "enforcement.update": "enforcement.update",
  "enforcement.appeal": "enforcement.appeal",
  "approvals.create": "approvals.create",
  "approvals.list": "approvals.list",
  "approvals.get": "approvals.get",
  "approvals.decide": "approvals.decide",
  "trust.score": "trust.score",
  "trust.reputation": "trust.reputation",
  "trust.adjust": "trust.adjust",
  "trust.badge": "trust.badge",
  "trust.badgeData": "trust.badgeData",
  "trust.badgeStatus": "trust.badgeStatus",
  "trust.verifyBadge": "trust.verifyBadge",
  "webhooks.create": "webhooks.create",
  "webhooks.list": "webhooks.list",
  "webhooks.get": "webhooks.get",
  "webhooks.update": "webhooks.update",
  "webhooks.delete": "webhooks.delete",
  "webhooks.rotate": "webhooks.rotate",
  "webhooks.test": "webhooks.test",
  "webhooks.redeliver": "webhooks.redeliver",
  "compliance.reports.create": "compliance.reports.create",
  "compliance.reports.list": "compliance.reports.list",
  "compliance.reports.get": "compliance.reports.get",
  "compliance.certifications.create": "compliance.certifications.create",
  "compliance.certifications.revoke": "compliance.certifications.revoke",
  "compliance.certifications.list": "compliance.certifications.list",
  "content.register": "content.register",
  "content.list": "content.list",
  "content.get": "content.get",
  "content.asset": "content.asset",
  "content.scan": "content.scan",
  "content.scanItem": "content.scanItem",
  "content.watermark.detect": "content.watermark.detect",
  "content.takedowns.create": "content.takedowns.create",
  "content.takedowns.list": "content.takedowns.list",
  "users.me": "users.me",
  "members.list": "members.list",
  "members.update": "members.update",
  "members.remove": "members.remove",
  "invitations.create": "invitations.create",
  "invitations.list": "invitations.list",
  "invitations.revoke": "invitations.revoke",
  "invitations.accept": "invitations.accept",
  "oauth.clients.create": "oauth.clients.create",
  "oauth.clients.list": "oauth.clients.list",
  "oauth.clients.delete": "oauth.clients.delete",
  "oauth.grants.list": "oauth.grants.list",
  "oauth.grants.revoke": "oauth.grants.revoke",
}

it("covers every operation of the catalog, and nothing else", () => {
  const client = new AgentGov({ apiKey: "svc_ws_test_x", baseUrl: "http://127.0.0.1:1" })
  expect(operations.map((op) => op.name).sort()).toEqual(Object.keys(METHODS).sort())
  for (const path of Object.values(METHODS)) {
    const method = path.split(".").reduce<any>((o, k) => o?.[k], client)
    expect(typeof method, path).toBe("function")
  }
})
