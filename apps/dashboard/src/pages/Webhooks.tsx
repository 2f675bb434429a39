import { useState } from "react"
import { api, type Outputs } from "../api.ts"
import { useAction, usePaged, useQuery } from "../hooks.ts"
import { useQueryState, useTitle } from "../router.tsx"
import {
  Button,
  Card,
  Dialog,
  Empty,
  ErrorState,
  Filters,
  InlineError,
  Loading,
  PageHeader,
  Pill,
  SecretOnce,
  Select,
  Status,
  TextInput,
  Time,
} from "../ui/index.tsx"
import { PagedTable } from "../ui/Table.tsx"

type Webhook = Outputs["webhooks"]["get"]

export default function Webhooks() {
  useTitle("Webhooks")
  const [q, setQ] = useQueryState()
  const enabled = q.get("enabled") ?? ""
  const paged = usePaged(
    (p) => api.webhooks.list.query({ ...p, ...(enabled ? { enabled: enabled === "true" } : {}) }),
    [enabled],
  )
  const [creating, setCreating] = useState(false)
  const [open, setOpen] = useState<string | undefined>()
  return (
    <>
      <PageHeader
        title="Webhooks"
        description="Events delivered to your endpoints, signed, retried, redeliverable."
        actions={
          <Button variant="primary" onClick={() => setCreating(true)}>
            Add endpoint
          </Button>
        }
      />
      <Filters>
        <Select
          label="State"
          value={enabled}
          onChange={(e) => setQ({ enabled: e.target.value })}
          options={[
            ["", "Enabled and disabled"],
            ["true", "Enabled"],
            ["false", "Disabled"],
          ]}
        />
      </Filters>
      <PagedTable
        caption="Webhooks"
        paged={paged}
        empty={
          <Empty
            title="No endpoints yet"
            action={
              <Button variant="primary" onClick={() => setCreating(true)}>
                Add endpoint
              </Button>
            }
          >
            Send events to Slack, your SIEM or your own service.
          </Empty>
        }
        columns={[
          {
            header: "URL",
            cell: (w) => (
              <button type="button" className="btn btn-ghost btn-sm" onClick={() => setOpen(w.id)}>
                {w.url}
              </button>
            ),
          },
          { header: "Events", cell: (w) => <span className="muted">{w.events.join(", ")}</span> },
          {
            header: "State",
            cell: (w) =>
              w.enabled ? (
                <Pill tone="success">enabled</Pill>
              ) : (
                <Pill>{w.disabledReason?.replaceAll("_", " ") ?? "disabled"}</Pill>
              ),
          },
          {
            header: "Success",
            cell: (w) => (w.stats.total ? `${Math.round(w.stats.successRate * 100)}% of ${w.stats.total}` : "—"),
            className: "num",
          },
        ]}
      />
      <CreateWebhook
        open={creating}
        onClose={() => {
          setCreating(false)
          paged.reload()
        }}
      />
      {open ? (
        <WebhookDetail
          id={open}
          onClose={() => {
            setOpen(undefined)
            paged.reload()
          }}
        />
      ) : null}
    </>
  )
}

function CreateWebhook({ open, onClose }: { open: boolean; onClose: () => void }) {
  const [url, setUrl] = useState("")
  const [events, setEvents] = useState("*")
  const [secret, setSecret] = useState<string | undefined>()
  const create = useAction(() =>
    api.webhooks.create.mutate({
      url,
      events: events
        .split(",")
        .map((e) => e.trim())
        .filter(Boolean),
    }),
  )
  const close = () => {
    setSecret(undefined)
    create.clear()
    onClose()
  }
  const f = create.error?.field
  return (
    <Dialog
      open={open}
      onClose={close}
      title={secret ? "Endpoint added" : "Add an endpoint"}
      footer={
        secret ? (
          <Button variant="primary" onClick={close}>
            Done
          </Button>
        ) : (
          <>
            <Button onClick={close}>Cancel</Button>
            <Button
              variant="primary"
              busy={create.pending}
              onClick={async () => {
                const w = await create.call()
                if (w) setSecret(w.secret)
              }}
            >
              Add
            </Button>
          </>
        )
      }
    >
      {secret ? (
        <SecretOnce label="Signing secret" value={secret} />
      ) : (
        <>
          <TextInput
            label="URL"
            value={url}
            onChange={(e) => setUrl(e.target.value)}
            placeholder="https://example.com/agentgov"
            error={f === "url" ? create.error?.message : undefined}
          />
          <TextInput
            label="Events"
            hint="Comma-separated names, prefix.* or *"
            value={events}
            onChange={(e) => setEvents(e.target.value)}
            error={f?.startsWith("events") ? create.error?.message : undefined}
          />
          {f !== "url" && !f?.startsWith("events") ? <InlineError error={create.error} /> : null}
        </>
      )}
    </Dialog>
  )
}

function WebhookDetail({ id, onClose }: { id: string; onClose: () => void }) {
  const w = useQuery(() => api.webhooks.get.query({ id, includeDeliveries: true, limit: 25 }), [id])
  const [secret, setSecret] = useState<string | undefined>()
  const test = useAction(() => api.webhooks.test.mutate({ id, eventType: "agent.registered" }))
  const rotate = useAction(() => api.webhooks.rotate.mutate({ id }))
  const redeliver = useAction((deliveryIds: ReadonlyArray<string>) =>
    api.webhooks.redeliver.mutate({ id, deliveryIds }),
  )
  const [tested, setTested] = useState<Outputs["webhooks"]["test"] | undefined>()
  const d: Webhook | undefined = w.data
  return (
    <Dialog open onClose={onClose} title="Endpoint">
      {w.error ? <ErrorState error={w.error} retry={w.reload} /> : null}
      {!d ? (
        w.error ? null : (
          <Loading />
        )
      ) : (
        <>
          <p>
            <code>{d.url}</code>
          </p>
          <div className="row">
            <Button size="sm" busy={test.pending} onClick={async () => setTested(await test.call())}>
              Send a test
            </Button>
            <Button
              size="sm"
              busy={rotate.pending}
              onClick={async () => {
                const r = await rotate.call()
                if (r) setSecret(r.secret)
              }}
            >
              Rotate secret
            </Button>
          </div>
          {tested ? (
            <p role="status">
              {tested.delivered ? <Pill tone="success">delivered</Pill> : <Pill tone="danger">failed</Pill>}{" "}
              {tested.delivery.statusCode ?? tested.delivery.error}
            </p>
          ) : null}
          {secret ? <SecretOnce label="New signing secret" value={secret} /> : null}
          <InlineError error={test.error ?? rotate.error ?? redeliver.error} />
          <Card title={`Deliveries · ${d.stats.successful} ok, ${d.stats.failed} failed`}>
            {!d.deliveries?.length ? (
              <p className="muted">No deliveries yet.</p>
            ) : (
              <ul className="feed">
                {d.deliveries.map((x) => (
                  <li key={x.id} className="feed-item">
                    <span>
                      <Status value={x.status} /> <code>{x.eventType}</code>
                    </span>
                    <span className="muted">
                      {x.statusCode ?? x.error} · {x.responseTimeMs} ms · <Time iso={x.attemptedAt} />
                    </span>
                    {x.status === "failed" ? (
                      <Button
                        size="sm"
                        onClick={async () => {
                          await redeliver.call([x.id])
                          w.reload()
                        }}
                      >
                        Redeliver
                      </Button>
                    ) : (
                      <span />
                    )}
                  </li>
                ))}
              </ul>
            )}
          </Card>
        </>
      )}
    </Dialog>
  )
}
