import { useState } from "react"
import { useTitle } from "../router.tsx"
import { Card, Code, PageHeader, Tabs } from "../ui/index.tsx"

/** Set-up of the connector apps (connectors/README.md), with this service's URL filled in. */
const CONNECTORS = {
  slack: { label: "Slack", vars: ["SLACK_BOT_TOKEN=xoxb-…", "SLACK_CHANNEL=C0123456789"], events: "all events" },
  discord: {
    label: "Discord",
    vars: ["DISCORD_WEBHOOK_URL=https://discord.com/api/webhooks/<id>/<token>"],
    events: "all events",
  },
  teams: { label: "Microsoft Teams", vars: ["TEAMS_WEBHOOK_URL=<your Workflows webhook URL>"], events: "all events" },
  pagerduty: {
    label: "PagerDuty",
    vars: ["PAGERDUTY_ROUTING_KEY=<integration key>"],
    events: "enforcements and trust",
  },
  email: {
    label: "E-mail",
    vars: ["SMTP_URL=smtp://user:pass@smtp.example.com:587", "EMAIL_TO=oncall@example.com"],
    events: "all events, as digests",
  },
  github: {
    label: "GitHub issues",
    vars: ["GITHUB_TOKEN=<token with issues:write>", "GITHUB_REPOSITORY=owner/repo"],
    events: "enforcements and violations",
  },
} as const
type Name = keyof typeof CONNECTORS

export default function Connectors() {
  useTitle("Connectors")
  const [name, setName] = useState<Name>("slack")
  const c = CONNECTORS[name]
  const origin = location.origin
  const env = [
    `AGENTGOV_URL=${origin}`,
    "AGENTGOV_API_KEY=<a key with webhooks:write>",
    "CONNECTOR_PUBLIC_URL=https://connector.example.com",
    `AGENTGOV_DASHBOARD_URL=${origin}`,
    ...c.vars,
  ]
  return (
    <>
      <PageHeader
        title="Connectors"
        description="Forward agentgov's events to the tools your team already uses. Each connector is one command."
      />
      <Tabs<Name>
        label="Connector"
        value={name}
        onChange={setName}
        tabs={Object.entries(CONNECTORS).map(([k, v]) => [k as Name, v.label] as const)}
      />
      <div className="grid grid-2" role="tabpanel" aria-label={c.label}>
        <Card title="1. Configure">
          <p className="muted">Create an API key with the webhooks:write scope on the API keys page, then set:</p>
          <Code>{env.map((e) => `export ${e}`).join("\n")}</Code>
        </Card>
        <Card title="2. Install and run">
          <p className="muted">
            <code>install</code> registers the connector's webhook ({c.events}) and stores its signing secret.
          </p>
          <Code>{`npx @agentgov/connector-${name} install\nnpx @agentgov/connector-${name} start`}</Code>
        </Card>
      </div>
    </>
  )
}
