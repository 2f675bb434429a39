import { api, type Outputs } from "../api.ts"
import { usePaged } from "../hooks.ts"
import { Link, useQueryState, useTitle } from "../router.tsx"
import {
  Card,
  CONNECTOR_PREFIX,
  Code,
  type Column,
  connectorOf,
  DataTable,
  Empty,
  Filters,
  Mono,
  PageHeader,
  Pagination,
  Pill,
  percent,
  Select,
  States,
  Tabs,
  Time,
} from "../ui/index.tsx"

type Webhook = Outputs["webhooks"]["list"]["data"][number]

interface Setting {
  readonly env: string
  readonly example: string
  readonly description: string
  readonly required: boolean
}
interface ConnectorDef {
  readonly name: "slack" | "discord" | "teams" | "pagerduty" | "email" | "github"
  readonly label: string
  readonly vendor: string
  readonly events: ReadonlyArray<string>
  readonly settings: ReadonlyArray<Setting>
}

/** The six connectors of connectors/ (D17): what each needs beside the common settings. */
const CONNECTORS: ReadonlyArray<ConnectorDef> = [
  {
    name: "slack",
    label: "Slack",
    vendor: "Posts each event to a Slack channel as Block Kit, threaded per approval and enforcement.",
    events: ["*"],
    settings: [
      {
        env: "SLACK_BOT_TOKEN",
        example: "xoxb-…",
        description: "a bot token with chat:write, invited to the channel",
        required: true,
      },
      { env: "SLACK_CHANNEL", example: "C0123456789", description: "the channel id (C…) or name", required: true },
    ],
  },
  {
    name: "discord",
    label: "Discord",
    vendor: "Posts events to a Discord channel webhook as embeds, mentions disabled.",
    events: ["*"],
    settings: [
      {
        env: "DISCORD_WEBHOOK_URL",
        example: "https://discord.com/api/webhooks/<id>/<token>",
        description: "the channel webhook's URL",
        required: true,
      },
    ],
  },
  {
    name: "teams",
    label: "Microsoft Teams",
    vendor: "Posts Adaptive Cards to a Teams channel through a Workflows webhook.",
    events: ["*"],
    settings: [
      {
        env: "TEAMS_WEBHOOK_URL",
        example: "https://…logic.azure.com/workflows/…",
        description: "the URL of a Workflows flow “Post to a channel when a webhook request is received”",
        required: true,
      },
    ],
  },
  {
    name: "pagerduty",
    label: "PagerDuty",
    vendor: "Pages through the Events API v2 on enforcements and trust-tier drops, resolving on recovery.",
    events: ["enforcement.*", "trust.tier.downgraded", "trust.tier.upgraded"],
    settings: [
      {
        env: "PAGERDUTY_ROUTING_KEY",
        example: "R0123456789ABCDEF0123456789ABCDEF",
        description: "the integration key of an Events API v2 integration",
        required: true,
      },
    ],
  },
  {
    name: "email",
    label: "E-mail digests",
    vendor: "Sends events as e-mail digests over SMTP: immediate, hourly or daily.",
    events: ["*"],
    settings: [
      {
        env: "SMTP_URL",
        example: "smtps://user:pass@smtp.example.com:465",
        description: "the SMTP server",
        required: true,
      },
      { env: "EMAIL_FROM", example: '"agentgov <agentgov@example.com>"', description: "the sender", required: true },
      { env: "EMAIL_TO", example: "ops@example.com", description: "recipients, comma-separated", required: true },
      {
        env: "EMAIL_FREQUENCY",
        example: "daily",
        description: "immediate, hourly or daily (default)",
        required: false,
      },
    ],
  },
  {
    name: "github",
    label: "GitHub issues",
    vendor: "Opens an issue per enforcement or policy violation, comments on repeats, closes on resolution.",
    events: ["enforcement.*", "policy.violated"],
    settings: [
      {
        env: "GITHUB_TOKEN",
        example: "github_pat_…",
        description: "a token with Issues read and write",
        required: true,
      },
      {
        env: "GITHUB_REPOSITORY",
        example: "acme/agent-incidents",
        description: "owner/name of the repository",
        required: true,
      },
    ],
  },
]

/** The install command, prefilled with this service's URL: what the operator pastes on the connector's host. */
export const installCommand = (c: ConnectorDef, serviceUrl: string) => {
  const bin = `agentgov-connector-${c.name}`
  const vendor = c.settings
    .filter((s) => s.required)
    .map((s) => `${s.env}=${s.example}`)
    .join(" ")
  // The connector refuses http:// but to a loopback host (its key would cross the network in the clear): say so where
  // the page itself came over http, rather than hand out a command that exits 2.
  const url = new URL(serviceUrl)
  const plain =
    url.protocol === "http:"
      ? [
          `# http:// is taken to a loopback address only: on this service's own host use http://127.0.0.1:${url.port || "80"};`,
          `# from another host use the service's https:// address, or add AGENTGOV_CONNECTOR_ALLOW_HTTP=true on a private`,
          `# network you trust (the API key crosses it in the clear)`,
        ]
      : []
  return [
    `# on the host that runs the connector (Node.js 22.13 or later)`,
    `export AGENTGOV_URL=${serviceUrl}`,
    ...plain,
    `export AGENTGOV_API_KEY=svc_…   # an API key with webhooks:write`,
    `export CONNECTOR_PUBLIC_URL=https://${c.name}-connector.example.com   # where this service reaches the connector`,
    `export AGENTGOV_CONNECTOR_DATA_DIR=/var/lib/agentgov-${c.name}   # keep it: the queue and the secret`,
    `export AGENTGOV_DASHBOARD_URL=${serviceUrl}`,
    `export ${vendor}`,
    `npx ${bin} install   # registers CONNECTOR_PUBLIC_URL/webhooks here, keeps the signing secret`,
    `npx ${bin}           # runs it; health at /healthz and /readyz`,
  ].join("\n")
}

/** Set-up instructions for the six connectors, and the webhooks connectors have installed. */
export default function Connectors() {
  useTitle("Connectors")
  const [query, setQuery] = useQueryState()
  const chosen = CONNECTORS.find((c) => c.name === query.get("connector")) ?? CONNECTORS[0]!
  const serviceUrl = window.location.origin
  return (
    <>
      <PageHeader
        title="Connectors"
        description="Forward your workspace's events to the tools your team already uses. Each connector is one command."
      />
      <div className="stack">
        <Tabs
          label="Connectors"
          tabs={CONNECTORS.map((c) => [c.name, c.label] as const)}
          value={chosen.name}
          onChange={(t) => setQuery({ connector: t })}
        />
        <Card title={`Set up ${chosen.label}`}>
          <ol className="connector-steps">
            <li>
              <p>{chosen.vendor}</p>
              <p className="muted">
                Subscribes to{" "}
                {chosen.events.map((e, i) => (
                  <span key={e}>
                    {i ? ", " : ""}
                    <Mono>{e}</Mono>
                  </span>
                ))}{" "}
                by default (<Mono>AGENTGOV_CONNECTOR_EVENTS</Mono> changes it).
              </p>
            </li>
            <li>
              <p>
                Create an API key with <Mono>webhooks:write</Mono> in <Link to="/keys">API keys</Link>: the connector
                registers its own webhook with it.
              </p>
            </li>
            <li>
              <p>On the connector's host, set its configuration and install it:</p>
              <Code>{installCommand(chosen, serviceUrl)}</Code>
            </li>
            <li>
              <p>
                {chosen.label}'s own settings, beside the common ones (<Mono>AGENTGOV_URL</Mono>,{" "}
                <Mono>AGENTGOV_API_KEY</Mono>, <Mono>CONNECTOR_PUBLIC_URL</Mono>, <Mono>PORT</Mono>):
              </p>
              {/* biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must be reachable by keyboard */}
              <section className="table-wrap" aria-label={`${chosen.label} settings`} tabIndex={0}>
                <table className="env-table">
                  <caption className="sr-only">{chosen.label} settings</caption>
                  <thead>
                    <tr>
                      <th scope="col">Variable</th>
                      <th scope="col">Needed</th>
                      <th scope="col">What it is</th>
                    </tr>
                  </thead>
                  <tbody>
                    {chosen.settings.map((s) => (
                      <tr key={s.env}>
                        <td>
                          <Mono>{s.env}</Mono>
                        </td>
                        <td>{s.required ? "required" : "optional"}</td>
                        <td>{s.description}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </section>
            </li>
          </ol>
        </Card>
        <InstalledConnectors />
      </div>
    </>
  )
}

/** The webhooks a connector's `install` registered (their description starts `agentgov-connector-<name>:`). */
function InstalledConnectors() {
  const [query, setQuery] = useQueryState()
  const which = query.get("installed") ?? ""
  const list = usePaged((page) => api.webhooks.list.query(page), [])
  const rows = list.rows.filter((w) => {
    const name = connectorOf(w)
    return name !== undefined && (which === "" || name === which)
  })
  const columns: ReadonlyArray<Column<Webhook>> = [
    { header: "Connector", cell: (w) => <strong>{connectorOf(w)}</strong> },
    {
      header: "Endpoint",
      cell: (w) => <Link to={`/webhooks?id=${encodeURIComponent(w.id)}`}>{w.url}</Link>,
    },
    { header: "Events", cell: (w) => <small className="mono">{w.events.join(", ")}</small> },
    {
      header: "State",
      cell: (w) => (w.enabled ? <Pill tone="success">enabled</Pill> : <Pill tone="warning">disabled</Pill>),
    },
    {
      header: "Success",
      className: "num",
      cell: (w) => (w.stats.total ? percent(w.stats.successRate) : <span className="muted">—</span>),
    },
    { header: "Installed", cell: (w) => <Time iso={w.createdAt} /> },
  ]
  return (
    <Card title="Installed connectors">
      <div className="stack">
        <Filters>
          <Select
            label="Connector"
            value={which}
            onChange={(e) => setQuery({ installed: e.target.value })}
            options={[["", "All connectors"], ...CONNECTORS.map((c) => [c.name, c.label] as const)]}
          />
        </Filters>
        <States
          loading={list.loading}
          error={list.error}
          rows={list.rows}
          retry={list.reload}
          empty={<Empty title="No webhooks yet">A connector's install registers one here.</Empty>}
        >
          {rows.length ? (
            <DataTable caption="Installed connectors" columns={columns} rows={rows} rowKey={(w) => w.id} />
          ) : (
            <Empty title="No connector on this page">
              Webhooks whose description starts with <Mono>{CONNECTOR_PREFIX}</Mono> are connectors'. See them all in{" "}
              <Link to="/webhooks?source=connector">Webhooks</Link>.
            </Empty>
          )}
        </States>
        <Pagination {...list} count={rows.length} />
      </div>
    </Card>
  )
}
