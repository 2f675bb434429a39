import { useState } from "react"
import { api, type Outputs } from "../api.ts"
import { useAction, usePaged, useQuery } from "../hooks.ts"
import { useQueryState, useTitle } from "../router.tsx"
import {
  Button,
  Card,
  Checkbox,
  type Column,
  ConfirmButton,
  connectorOf,
  DataTable,
  Dialog,
  DialogActions,
  Empty,
  ErrorState,
  Filters,
  Form,
  FormError,
  fieldError,
  InlineError,
  KeyValue,
  Loading,
  Mono,
  PageHeader,
  Pagination,
  Pill,
  percent,
  QueryFilters,
  SecretOnce,
  Select,
  States,
  Status,
  TextInput,
  Time,
  toggled,
} from "../ui/index.tsx"

type Webhook = Outputs["webhooks"]["list"]["data"][number]
type Delivery = NonNullable<Outputs["webhooks"]["get"]["deliveries"]>[number]

/** Event types a test delivery can sample (the catalogue's most asked for). */
const TEST_EVENTS = [
  "policy.evaluated",
  "policy.denied",
  "policy.violated",
  "approval.requested",
  "approval.decided",
  "enforcement.created",
  "enforcement.resolved",
  "agent.registered",
  "agent.suspended",
  "trust.tier.downgraded",
  "content.match.detected",
  "compliance.report.generated",
] as const

const disabledLabel: Record<string, string> = {
  disabled_by_user: "disabled by a person",
  all_attempts_failed: "disabled: every attempt failed",
  endpoint_gone: "disabled: endpoint answered 410 Gone",
}

/** Webhooks: the list with statistics, one webhook's deliveries, test, redeliver, rotate, enable and disable. */
export default function Webhooks() {
  useTitle("Webhooks")
  const [query, setQuery] = useQueryState()
  const enabled = query.get("enabled") ?? ""
  const source = query.get("source") ?? ""
  const search = query.get("q") ?? ""
  const selected = query.get("id") ?? undefined
  const [creating, setCreating] = useState(false)
  const list = usePaged(
    (page) => api.webhooks.list.query({ ...page, ...(enabled ? { enabled: enabled === "enabled" } : {}) }),
    [enabled],
  )
  const needle = search.trim().toLowerCase()
  const rows = list.rows.filter(
    (w) =>
      (source === "" || (source === "connector") === (connectorOf(w) !== undefined)) &&
      (needle === "" || w.url.toLowerCase().includes(needle) || (w.description ?? "").toLowerCase().includes(needle)),
  )
  const columns: ReadonlyArray<Column<Webhook>> = [
    {
      header: "Endpoint",
      cell: (w) => (
        <div className="stack" style={{ gap: 2 }}>
          <Button
            variant="ghost"
            size="sm"
            className="link-btn cell-wrap"
            aria-label={`Open webhook ${w.url}`}
            onClick={() => setQuery({ id: w.id })}
          >
            {w.url}
          </Button>
          {w.description ? <small className="muted">{w.description}</small> : null}
        </div>
      ),
    },
    { header: "Events", cell: (w) => <small className="mono">{w.events.join(", ")}</small> },
    {
      header: "State",
      cell: (w) =>
        w.enabled ? (
          <Pill tone="success">enabled</Pill>
        ) : (
          <Pill tone="warning">{disabledLabel[w.disabledReason ?? ""] ?? "disabled"}</Pill>
        ),
    },
    {
      header: "Success",
      className: "num",
      cell: (w) => (w.stats.total === 0 ? <span className="muted">—</span> : percent(w.stats.successRate)),
    },
    { header: "Attempts", className: "num", cell: (w) => `${w.stats.successful}/${w.stats.total}` },
    { header: "Created", cell: (w) => <Time iso={w.createdAt} /> },
  ]
  return (
    <>
      <PageHeader
        title="Webhooks"
        description="Signed HTTP deliveries of your workspace's events, with retries and a delivery log."
        actions={
          <Button variant="primary" needs="webhooks:write" onClick={() => setCreating(true)}>
            Add a webhook
          </Button>
        }
      />
      <div className="stack">
        <QueryFilters
          filters={[
            {
              key: "enabled",
              label: "State",
              options: [
                ["", "All"],
                ["enabled", "Enabled"],
                ["disabled", "Disabled"],
              ],
            },
            {
              key: "source",
              label: "Source",
              options: [
                ["", "All webhooks"],
                ["connector", "Connectors"],
                ["other", "Not connectors"],
              ],
            },
            { key: "q", label: "Search this page", placeholder: "URL or description", type: "search" },
          ]}
        />
        <States
          loading={list.loading}
          error={list.error}
          rows={list.rows}
          retry={list.reload}
          empty={
            <Empty
              title="No webhooks yet"
              action={
                <Button variant="primary" needs="webhooks:write" onClick={() => setCreating(true)}>
                  Add a webhook
                </Button>
              }
            >
              {enabled ? "None matches this filter." : "Add an endpoint to receive your workspace's events."}
            </Empty>
          }
        >
          {rows.length === 0 ? (
            <Empty title="Nothing matches">No webhook on this page matches the filters.</Empty>
          ) : (
            <DataTable caption="Webhooks" columns={columns} rows={rows} rowKey={(w) => w.id} selected={selected} />
          )}
        </States>
        <Pagination {...list} count={rows.length} />
        {selected ? (
          <WebhookDetail key={selected} id={selected} onChanged={list.reload} onClose={() => setQuery({ id: "" })} />
        ) : null}
      </div>
      {creating ? (
        <CreateWebhook
          onClose={() => setCreating(false)}
          onCreated={(id) => {
            list.reload()
            setQuery({ id })
          }}
        />
      ) : null}
    </>
  )
}

function CreateWebhook({ onClose, onCreated }: { onClose: () => void; onCreated: (id: string) => void }) {
  const [url, setUrl] = useState("")
  const [events, setEvents] = useState("*")
  const [description, setDescription] = useState("")
  const [retryPolicy, setRetryPolicy] = useState<"exponential" | "extended">("exponential")
  const [local, setLocal] = useState<Record<string, string>>({})
  const [created, setCreated] = useState<Outputs["webhooks"]["create"] | undefined>()
  const create = useAction(() =>
    api.webhooks.create.mutate({
      url: url.trim(),
      events: events
        .split(/[\s,]+/)
        .map((e) => e.trim())
        .filter(Boolean),
      retryPolicy,
      ...(description.trim() ? { description: description.trim() } : {}),
    }),
  )
  const submit = async () => {
    const problems: Record<string, string> = {}
    if (!/^https?:\/\/\S+$/.test(url.trim())) problems.url = "an absolute http(s) URL"
    if (!events.trim()) problems.events = "at least one event name, prefix.* or *"
    setLocal(problems)
    if (Object.keys(problems).length) return
    const w = await create.call()
    if (w) {
      setCreated(w)
      onCreated(w.id)
    }
  }
  return (
    <Dialog
      open
      onClose={onClose}
      title={created ? "Webhook added" : "Add a webhook"}
      footer={
        <DialogActions
          label="Add webhook"
          done={created !== undefined}
          onCancel={onClose}
          form="create-webhook"
          busy={create.pending}
        />
      }
    >
      {created ? (
        <>
          <p>
            Deliveries to <Mono>{created.url}</Mono> are signed with this secret (HMAC-SHA256 in{" "}
            <Mono>X-SVC-Webhook-Signature</Mono>).
          </p>
          <SecretOnce label="Signing secret" value={created.secret} />
        </>
      ) : (
        <form
          id="create-webhook"
          className="stack"
          noValidate
          onSubmit={(e) => {
            e.preventDefault()
            void submit()
          }}
        >
          <TextInput
            label="Endpoint URL"
            type="url"
            required
            value={url}
            placeholder="https://hooks.example.com/agentgov"
            onChange={(e) => setUrl(e.target.value)}
            error={local.url ?? fieldError(create.error, "url")}
          />
          <TextInput
            label="Events"
            value={events}
            onChange={(e) => setEvents(e.target.value)}
            hint="Comma-separated: exact names, prefix.* or * for every event"
            error={local.events ?? fieldError(create.error, "events")}
          />
          <Select
            label="Retry policy"
            value={retryPolicy}
            onChange={(e) => setRetryPolicy(e.target.value as "exponential" | "extended")}
            options={[
              ["exponential", "Exponential: 5 attempts over 15 s"],
              ["extended", "Extended: 8 attempts over 35 h"],
            ]}
            error={fieldError(create.error, "retryPolicy")}
          />
          <TextInput
            label="Description"
            value={description}
            onChange={(e) => setDescription(e.target.value)}
            error={fieldError(create.error, "description")}
          />
          <FormError error={create.error} fields={["url", "events", "retryPolicy", "description"]} />
        </form>
      )}
    </Dialog>
  )
}

function WebhookDetail({ id, onChanged, onClose }: { id: string; onChanged: () => void; onClose: () => void }) {
  const [limit, setLimit] = useState(25)
  const [status, setStatus] = useState<"" | "success" | "failed">("")
  const hook = useQuery(() => api.webhooks.get.query({ id, includeDeliveries: true, limit }), [id, limit])
  const [picked, setPicked] = useState<ReadonlySet<string>>(new Set())
  const [eventType, setEventType] = useState<string>(TEST_EVENTS[0])
  const [secret, setSecret] = useState<string | undefined>()
  const [overlap, setOverlap] = useState("86400")
  const [note, setNote] = useState<string | undefined>()
  const test = useAction(() => api.webhooks.test.mutate({ id, eventType }))
  const [testResult, setTestResult] = useState<Outputs["webhooks"]["test"] | undefined>()
  const toggle = useAction((enabled: boolean) => api.webhooks.update.mutate({ id, enabled }))
  const rotate = useAction(() => api.webhooks.rotate.mutate({ id, overlapSeconds: Number(overlap) }))
  const redeliver = useAction((deliveryIds: ReadonlyArray<string>) =>
    api.webhooks.redeliver.mutate({ id, deliveryIds: [...deliveryIds] }),
  )
  const remove = useAction(() => api.webhooks.delete.mutate({ id }))

  if (hook.error) return <ErrorState error={hook.error} retry={hook.reload} />
  if (!hook.data) return <Loading rows={6} label="Loading the webhook" />
  const w = hook.data
  const deliveries = (w.deliveries ?? []).filter((d) => status === "" || d.status === status)
  const failedIds = deliveries.filter((d) => d.status === "failed").map((d) => d.id)
  const columns: ReadonlyArray<Column<Delivery>> = [
    {
      header: <span className="sr-only">Select</span>,
      cell: (d) =>
        d.status === "failed" ? (
          <input
            type="checkbox"
            aria-label={`Select delivery ${d.id} attempt ${d.attempt}`}
            checked={picked.has(d.id)}
            onChange={(e) => setPicked(toggled(picked, d.id, e.target.checked))}
          />
        ) : null,
    },
    { header: "Event", cell: (d) => <Mono>{d.eventType}</Mono> },
    { header: "Result", cell: (d) => <Status value={d.status} /> },
    { header: "HTTP", className: "num", cell: (d) => d.statusCode ?? "—" },
    { header: "Time", className: "num", cell: (d) => `${d.responseTimeMs} ms` },
    { header: "Attempt", className: "num", cell: (d) => d.attempt },
    { header: "When", cell: (d) => <Time iso={d.attemptedAt} /> },
    {
      header: "Detail",
      cell: (d) =>
        d.error ? (
          <small>{d.error}</small>
        ) : d.nextRetryAt ? (
          <small>
            retry <Time iso={d.nextRetryAt} />
          </small>
        ) : (
          <small className="muted">{d.id}</small>
        ),
    },
  ]
  const changed = () => {
    hook.reload()
    onChanged()
  }
  return (
    <Card
      title={`Webhook ${w.id}`}
      actions={
        <Button size="sm" variant="ghost" onClick={onClose} aria-label="Close the webhook's details">
          Close
        </Button>
      }
    >
      <div className="stack">
        <KeyValue
          items={[
            ["Endpoint", <Mono key="u">{w.url}</Mono>],
            ["Events", w.events.join(", ")],
            [
              "State",
              w.enabled ? (
                <Pill key="s" tone="success">
                  enabled
                </Pill>
              ) : (
                <Pill key="s" tone="warning">
                  {disabledLabel[w.disabledReason ?? ""] ?? "disabled"}
                </Pill>
              ),
            ],
            ["Retry policy", w.retryPolicy],
            ["Secret", <Mono key="h">{w.secretHint}</Mono>],
            [
              "Attempts",
              `${w.stats.total} (${w.stats.successful} delivered, ${w.stats.failed} failed, ${percent(w.stats.successRate)})`,
            ],
            [
              "Previous secret valid until",
              w.previousSecretExpiresAt ? <Time key="p" iso={w.previousSecretExpiresAt} /> : "—",
            ],
            ["Updated", <Time key="t" iso={w.updatedAt} />],
          ]}
        />
        <div className="grid grid-2 align-start">
          <Card title="Send a test">
            <Form
              label="Send a test delivery"
              onSubmit={async () => {
                setTestResult(undefined)
                const r = await test.call()
                if (r) setTestResult(r)
              }}
            >
              <Select
                label="Event type"
                value={eventType}
                onChange={(e) => setEventType(e.target.value)}
                options={TEST_EVENTS.map((t) => [t, t] as const)}
                error={fieldError(test.error, "eventType")}
              />
              <div className="row">
                <Button type="submit" needs="webhooks:write" busy={test.pending}>
                  Send test
                </Button>
                {testResult ? (
                  <span role="status" data-testid="test-result">
                    {testResult.delivered ? (
                      <Pill tone="success">Delivered · HTTP {testResult.delivery.statusCode}</Pill>
                    ) : (
                      <Pill tone="danger">
                        Failed · {testResult.delivery.error ?? `HTTP ${testResult.delivery.statusCode ?? "—"}`}
                      </Pill>
                    )}{" "}
                    <small className="muted">{testResult.delivery.responseTimeMs} ms</small>
                  </span>
                ) : null}
              </div>
              <FormError error={test.error} fields={["eventType"]} />
            </Form>
          </Card>
          <Card title="Signing secret">
            <div className="stack">
              {secret ? <SecretOnce label="New signing secret" value={secret} /> : null}
              <Form
                label="Rotate the signing secret"
                onSubmit={async () => {
                  const r = await rotate.call()
                  if (r) {
                    setSecret(r.secret)
                    changed()
                  }
                }}
              >
                <Select
                  label="Keep signing with the old secret for"
                  value={overlap}
                  onChange={(e) => setOverlap(e.target.value)}
                  options={[
                    ["0", "No overlap"],
                    ["3600", "1 hour"],
                    ["86400", "24 hours"],
                    ["604800", "7 days"],
                  ]}
                  error={fieldError(rotate.error, "overlapSeconds", "secret")}
                />
                <div className="row">
                  <Button type="submit" needs="webhooks:write" busy={rotate.pending}>
                    Rotate secret
                  </Button>
                </div>
                <FormError error={rotate.error} fields={["overlapSeconds", "secret"]} />
              </Form>
            </div>
          </Card>
        </div>
        <div className="row">
          {w.enabled ? (
            <Button
              needs="webhooks:write"
              busy={toggle.pending}
              onClick={async () => (await toggle.call(false)) && changed()}
            >
              Disable
            </Button>
          ) : (
            <Button
              variant="primary"
              needs="webhooks:write"
              busy={toggle.pending}
              onClick={async () => (await toggle.call(true)) && changed()}
            >
              Enable
            </Button>
          )}
          <ConfirmButton
            label="Delete"
            needs="webhooks:write"
            size={undefined}
            title="Delete this webhook?"
            confirmLabel="Delete webhook"
            onConfirm={async () => {
              const r = await remove.call()
              if (r) {
                onChanged()
                onClose()
              }
              return r !== undefined
            }}
          >
            <p>
              Nothing more is sent to <Mono>{w.url}</Mono>, and its delivery history is deleted.
            </p>
            <InlineError error={remove.error} />
          </ConfirmButton>
          <InlineError error={toggle.error} />
        </div>
        <h3>Recent deliveries</h3>
        <Filters>
          <Select
            label="Result"
            value={status}
            onChange={(e) => setStatus(e.target.value as "" | "success" | "failed")}
            options={[
              ["", "All"],
              ["success", "Delivered"],
              ["failed", "Failed"],
            ]}
          />
          <Select
            label="Latest attempts"
            value={String(limit)}
            onChange={(e) => setLimit(Number(e.target.value))}
            options={[
              ["25", "25"],
              ["50", "50"],
              ["100", "100"],
            ]}
          />
        </Filters>
        {deliveries.length === 0 ? (
          <Empty title="No deliveries">
            {status ? "None with this result among the latest attempts." : "Events matching its filters appear here."}
          </Empty>
        ) : (
          <DataTable
            caption="Recent deliveries"
            columns={columns}
            rows={deliveries}
            rowKey={(d) => `${d.id}:${d.attempt}`}
          />
        )}
        <div className="row">
          <Checkbox
            label="Select every failed delivery shown"
            checked={failedIds.length > 0 && failedIds.every((i) => picked.has(i))}
            onChange={(on) => setPicked(on ? new Set(failedIds) : new Set())}
          />
          <Button
            disabled={picked.size === 0}
            needs="webhooks:write"
            busy={redeliver.pending}
            onClick={async () => {
              const r = await redeliver.call([...picked])
              if (r) {
                setNote(
                  `${r.queued.length} queued again${r.skipped.length ? `, ${r.skipped.length} skipped (not failed)` : ""}.`,
                )
                setPicked(new Set())
                changed()
              }
            }}
          >
            Redeliver {picked.size || ""} selected
          </Button>
          {note ? (
            <span role="status" className="muted">
              {note}
            </span>
          ) : null}
          <InlineError error={redeliver.error} />
        </div>
      </div>
    </Card>
  )
}
