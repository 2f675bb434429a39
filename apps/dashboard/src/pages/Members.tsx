import { useState } from "react"
import { api, type Inputs, type Outputs } from "../api.ts"
import { useAction, usePaged } from "../hooks.ts"
import { useQueryState, useTitle } from "../router.tsx"
import { SCOPES, type Scope } from "../scopes.ts"
import { useSession } from "../session.tsx"
import {
  Button,
  Card,
  Checkbox,
  type Column,
  ConfirmButton,
  CopyButton,
  DataTable,
  Dialog,
  DialogActions,
  Empty,
  Form,
  FormError,
  fieldError,
  InlineError,
  LockReason,
  lockedProps,
  Mono,
  PageHeader,
  Pagination,
  Pill,
  QueryFilters,
  SecretOnce,
  Select,
  States,
  Status,
  Tabs,
  TextArea,
  TextInput,
  Time,
  toggled,
  useLock,
} from "../ui/index.tsx"

type Role = Inputs["members"]["update"]["role"]
type Member = Outputs["members"]["list"]["data"][number]
type Invitation = Outputs["invitations"]["list"]["data"][number]
type OAuthClient = Outputs["oauth"]["clients"]["list"]["data"][number]

const ROLES: ReadonlyArray<readonly [Role, string]> = [
  ["owner", "Owner"],
  ["admin", "Admin"],
  ["member", "Member"],
  ["viewer", "Viewer"],
]
const ROLE_HELP =
  "Owner: everything, owners included. Admin: everything but the workspace's settings and its owners. Member: agents, policies, events and content. Viewer: reads."

type Tab = "members" | "invitations" | "apps"

/** Members and roles, invitations, and the third-party (OAuth) apps registered in the workspace. */
export default function Members() {
  useTitle("Members & apps")
  const [query, setQuery] = useQueryState()
  const tab = (
    ["members", "invitations", "apps"].includes(query.get("tab") ?? "") ? query.get("tab") : "members"
  ) as Tab
  return (
    <>
      <PageHeader title="Members & apps" description="Who works in this workspace, and which apps act on its behalf." />
      <div className="stack">
        <Tabs
          label="Sections"
          tabs={[
            ["members", "Members"],
            ["invitations", "Invitations"],
            ["apps", "OAuth apps"],
          ]}
          value={tab}
          onChange={(t) => setQuery({ tab: t === "members" ? "" : t, role: "", status: "", q: "" })}
        />
        {tab === "members" ? <MembersList /> : tab === "invitations" ? <Invitations /> : <OAuthApps />}
      </div>
    </>
  )
}

function MembersList() {
  const { workspaceId, session } = useSession()
  const id = workspaceId ?? ""
  const [query] = useQueryState()
  const role = query.get("role") ?? ""
  const search = (query.get("q") ?? "").trim().toLowerCase()
  const list = usePaged((page) => api.members.list.query({ id, ...page }), [id])
  const rows = list.rows.filter(
    (m) =>
      (role === "" || m.role === role) &&
      (search === "" || m.email.toLowerCase().includes(search) || (m.name ?? "").toLowerCase().includes(search)),
  )
  const columns: ReadonlyArray<Column<Member>> = [
    {
      header: "Person",
      cell: (m) => (
        <div className="stack" style={{ gap: 2 }}>
          <strong>
            {m.name ?? m.email}
            {m.userId === session.user.id ? (
              <>
                {" "}
                <Pill tone="accent">you</Pill>
              </>
            ) : null}
          </strong>
          <small className="muted">{m.email}</small>
        </div>
      ),
    },
    { header: "Role", cell: (m) => <RoleEditor member={m} onChanged={list.reload} /> },
    { header: "Joined", cell: (m) => <Time iso={m.createdAt} /> },
    {
      header: <span className="sr-only">Actions</span>,
      cell: (m) => <RemoveMember member={m} self={m.userId === session.user.id} onRemoved={list.reload} />,
    },
  ]
  return (
    <>
      <QueryFilters
        filters={[
          { key: "role", label: "Role", options: [["", "All roles"], ...ROLES] },
          { key: "q", label: "Search this page", placeholder: "Name or e-mail", type: "search" },
        ]}
      />
      <States
        loading={list.loading}
        error={list.error}
        rows={list.rows}
        retry={list.reload}
        empty={<Empty title="No members">Invite people from the Invitations tab.</Empty>}
      >
        {rows.length ? (
          <DataTable caption="Members" columns={columns} rows={rows} rowKey={(m) => m.userId} />
        ) : (
          <Empty title="Nothing matches">No member on this page matches the filters.</Empty>
        )}
      </States>
      <Pagination {...list} count={rows.length} />
      <p className="muted">
        <small>{ROLE_HELP}</small>
      </p>
    </>
  )
}

function RoleEditor({ member, onChanged }: { member: Member; onChanged: () => void }) {
  const { workspaceId } = useSession()
  const lock = useLock("members:write")
  const [role, setRole] = useState<Role>(member.role)
  const update = useAction(() => api.members.update.mutate({ id: workspaceId ?? "", userId: member.userId, role }))
  return (
    <div className="stack" style={{ gap: 4 }}>
      <div className="row">
        <label className="sr-only" htmlFor={`role-${member.userId}`}>
          Role of {member.email}
        </label>
        <select
          id={`role-${member.userId}`}
          value={role}
          onChange={(e) => setRole(e.target.value as Role)}
          aria-invalid={update.error ? true : undefined}
          {...lockedProps(lock)}
        >
          {ROLES.map(([v, l]) => (
            <option key={v} value={v}>
              {l}
            </option>
          ))}
        </select>
        {lock ? <LockReason lock={lock} /> : null}
        {role !== member.role ? (
          <Button
            size="sm"
            variant="primary"
            busy={update.pending}
            onClick={async () => (await update.call()) && onChanged()}
          >
            Save role
          </Button>
        ) : null}
      </div>
      <InlineError error={update.error} />
    </div>
  )
}

function RemoveMember({ member, self, onRemoved }: { member: Member; self: boolean; onRemoved: () => void }) {
  const { workspaceId, refresh } = useSession()
  const remove = useAction(() => api.members.remove.mutate({ id: workspaceId ?? "", userId: member.userId }))
  return (
    <ConfirmButton
      label={self ? "Leave" : "Remove"}
      needs={self ? undefined : "members:write"}
      title={self ? "Leave this workspace?" : `Remove ${member.email}?`}
      confirmLabel={self ? "Leave" : "Remove member"}
      onConfirm={async () => {
        const r = await remove.call()
        if (r) {
          if (self) await refresh()
          else onRemoved()
        }
        return r !== undefined
      }}
    >
      <p>{self ? "You" : member.email} will no longer act in this workspace: sessions and app tokens stop at once.</p>
      <InlineError error={remove.error} />
    </ConfirmButton>
  )
}

function Invitations() {
  const { workspaceId } = useSession()
  const id = workspaceId ?? ""
  const [query] = useQueryState()
  const status = query.get("status") ?? ""
  const list = usePaged((page) => api.invitations.list.query({ id, ...page }), [id])
  const rows = list.rows.filter((i) => status === "" || i.status === status)
  const revoke = useAction((invitationId: string) => api.invitations.revoke.mutate({ id, invitationId }))
  const columns: ReadonlyArray<Column<Invitation>> = [
    { header: "E-mail", cell: (i) => i.email },
    { header: "Role", cell: (i) => i.role },
    { header: "Status", cell: (i) => <Status value={i.status} /> },
    {
      header: "Expires or accepted",
      cell: (i) =>
        i.status === "pending" ? (
          <Time iso={i.expiresAt} />
        ) : i.acceptedAt ? (
          <Time iso={i.acceptedAt} />
        ) : (
          <span className="muted">—</span>
        ),
    },
    { header: "Sent", cell: (i) => <Time iso={i.createdAt} /> },
    {
      header: <span className="sr-only">Actions</span>,
      cell: (i) =>
        i.status === "pending" ? (
          <Button
            size="sm"
            variant="danger"
            aria-label={`Withdraw the invitation of ${i.email}`}
            needs="members:write"
            onClick={async () => (await revoke.call(i.id)) && list.reload()}
          >
            Withdraw
          </Button>
        ) : null,
    },
  ]
  return (
    <>
      <InviteForm onInvited={list.reload} />
      <QueryFilters
        filters={[
          {
            key: "status",
            label: "Status",
            options: [
              ["", "All"],
              ["pending", "Pending"],
              ["accepted", "Accepted"],
              ["revoked", "Withdrawn"],
              ["expired", "Expired"],
            ],
          },
        ]}
      />
      <InlineError error={revoke.error} />
      <States
        loading={list.loading}
        error={list.error}
        rows={list.rows}
        retry={list.reload}
        empty={<Empty title="No invitations">Invite someone above.</Empty>}
      >
        {rows.length ? (
          <DataTable caption="Invitations" columns={columns} rows={rows} rowKey={(i) => i.id} />
        ) : (
          <Empty title="Nothing matches">No invitation on this page has this status.</Empty>
        )}
      </States>
      <Pagination {...list} count={rows.length} />
    </>
  )
}

function InviteForm({ onInvited }: { onInvited: () => void }) {
  const { workspaceId } = useSession()
  const [email, setEmail] = useState("")
  const [role, setRole] = useState<Role>("member")
  const [local, setLocal] = useState<string | undefined>()
  const [created, setCreated] = useState<Outputs["invitations"]["create"] | undefined>()
  const invite = useAction(() => api.invitations.create.mutate({ id: workspaceId ?? "", email: email.trim(), role }))
  return (
    <Card title="Invite a person">
      <Form
        label="Invite a person"
        onSubmit={async () => {
          const bad = /^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(email.trim()) ? undefined : "an e-mail address"
          setLocal(bad)
          if (bad) return
          setCreated(undefined)
          const r = await invite.call()
          if (r) {
            setCreated(r)
            setEmail("")
            onInvited()
          }
        }}
      >
        <div className="form-grid">
          <TextInput
            label="E-mail"
            type="email"
            autoComplete="off"
            value={email}
            onChange={(e) => setEmail(e.target.value)}
            error={local ?? fieldError(invite.error, "email")}
          />
          <Select
            label="Role"
            value={role}
            onChange={(e) => setRole(e.target.value as Role)}
            options={ROLES}
            error={fieldError(invite.error, "role")}
          />
        </div>
        <div className="form-actions">
          <FormError error={invite.error} fields={["email", "role"]} />
          <Button type="submit" variant="primary" needs="members:write" busy={invite.pending}>
            Send invitation
          </Button>
        </div>
      </Form>
      {created ? (
        created.link ? (
          <SecretOnce label={`Invitation link for ${created.invitation.email}`} value={created.link} />
        ) : (
          <p className="notice" role="status">
            Invitation e-mailed to {created.invitation.email}.
          </p>
        )
      ) : null}
    </Card>
  )
}

function OAuthApps() {
  const [registering, setRegistering] = useState(false)
  const [query] = useQueryState()
  const type = query.get("type") ?? ""
  const list = usePaged((page) => api.oauth.clients.list.query(page), [])
  const rows = list.rows.filter((c) => type === "" || c.type === type)
  const remove = useAction((id: string) => api.oauth.clients.delete.mutate({ id }))
  const columns: ReadonlyArray<Column<OAuthClient>> = [
    {
      header: "App",
      cell: (c) => (
        <div className="stack" style={{ gap: 2 }}>
          <strong>{c.name}</strong>
          <small className="muted">
            client id <Mono>{c.id}</Mono>
          </small>
        </div>
      ),
    },
    { header: "Type", cell: (c) => <Pill tone={c.type === "public" ? "info" : "neutral"}>{c.type}</Pill> },
    {
      header: "Redirect URIs",
      cell: (c) => <small className="cell-wrap">{c.redirectUris.join(", ")}</small>,
    },
    { header: "Scopes", cell: (c) => <small>{c.scopes.length} scopes</small> },
    { header: "Registered", cell: (c) => <Time iso={c.createdAt} /> },
    {
      header: <span className="sr-only">Actions</span>,
      cell: (c) => (
        <ConfirmButton
          label="Delete"
          needs="apikeys:write"
          title={`Delete ${c.name}?`}
          confirmLabel="Delete app"
          onConfirm={async () => {
            const r = await remove.call(c.id)
            if (r) list.reload()
            return r !== undefined
          }}
        >
          <p>Every grant of the app ends: its tokens stop working at once.</p>
          <InlineError error={remove.error} />
        </ConfirmButton>
      ),
    },
  ]
  return (
    <>
      <div className="row" style={{ justifyContent: "space-between" }}>
        <QueryFilters
          filters={[
            {
              key: "type",
              label: "Type",
              options: [
                ["", "All"],
                ["confidential", "Confidential"],
                ["public", "Public (PKCE)"],
              ],
            },
          ]}
        />
        <Button variant="primary" needs="apikeys:write" onClick={() => setRegistering(true)}>
          Register an app
        </Button>
      </div>
      <States
        loading={list.loading}
        error={list.error}
        rows={list.rows}
        retry={list.reload}
        empty={<Empty title="No apps registered">Register an OAuth client to let an app act for your members.</Empty>}
      >
        {rows.length ? (
          <DataTable caption="OAuth apps" columns={columns} rows={rows} rowKey={(c) => c.id} />
        ) : (
          <Empty title="Nothing matches">No app on this page is of this type.</Empty>
        )}
      </States>
      <Pagination {...list} count={rows.length} />
      {registering ? <RegisterApp onClose={() => setRegistering(false)} onCreated={list.reload} /> : null}
    </>
  )
}

function RegisterApp({ onClose, onCreated }: { onClose: () => void; onCreated: () => void }) {
  const [name, setName] = useState("")
  const [type, setType] = useState<"confidential" | "public">("confidential")
  const [uris, setUris] = useState("")
  const [scopes, setScopes] = useState<ReadonlySet<Scope>>(new Set(["agents:read", "events:read"]))
  const [local, setLocal] = useState<Record<string, string>>({})
  const [created, setCreated] = useState<Outputs["oauth"]["clients"]["create"] | undefined>()
  const redirectUris = uris
    .split(/\s+/)
    .map((u) => u.trim())
    .filter(Boolean)
  const create = useAction(() =>
    api.oauth.clients.create.mutate({ name: name.trim(), type, redirectUris, scopes: [...scopes] }),
  )
  return (
    <Dialog
      open
      onClose={onClose}
      title={created ? "App registered" : "Register an app"}
      footer={
        <DialogActions
          label="Register"
          done={created !== undefined}
          onCancel={onClose}
          form="register-app"
          busy={create.pending}
        />
      }
    >
      {created ? (
        <div className="stack">
          <div className="row">
            <span>
              Client id <Mono>{created.client.id}</Mono>
            </span>
            <CopyButton value={created.client.id} label="Copy id" />
          </div>
          {created.clientSecret ? (
            <SecretOnce label="Client secret" value={created.clientSecret} />
          ) : (
            <p className="notice">A public client has no secret: it must use PKCE (S256).</p>
          )}
        </div>
      ) : (
        <form
          id="register-app"
          className="stack"
          noValidate
          onSubmit={async (e) => {
            e.preventDefault()
            const problems: Record<string, string> = {}
            if (!name.trim()) problems.name = "a name"
            if (redirectUris.length === 0) problems.redirectUris = "at least one redirect URI"
            if (scopes.size === 0) problems.scopes = "at least one scope"
            setLocal(problems)
            if (Object.keys(problems).length) return
            const r = await create.call()
            if (r) {
              setCreated(r)
              onCreated()
            }
          }}
        >
          <TextInput
            label="Name"
            value={name}
            onChange={(e) => setName(e.target.value)}
            error={local.name ?? fieldError(create.error, "name")}
          />
          <Select
            label="Type"
            value={type}
            onChange={(e) => setType(e.target.value as "confidential" | "public")}
            options={[
              ["confidential", "Confidential: a server that keeps a secret"],
              ["public", "Public: a single-page or native app (PKCE)"],
            ]}
            error={fieldError(create.error, "type")}
          />
          <TextArea
            label="Redirect URIs"
            rows={3}
            value={uris}
            placeholder="https://app.example.com/callback"
            onChange={(e) => setUris(e.target.value)}
            hint="One a line, matched exactly: https://, http:// on loopback, or a private-use scheme."
            error={local.redirectUris ?? fieldError(create.error, "redirectUris")}
          />
          <fieldset className="checks">
            <legend>Scopes the app may ask for</legend>
            {SCOPES.map((s) => (
              <Checkbox
                key={s}
                label={s}
                checked={scopes.has(s)}
                onChange={(on) => setScopes(toggled(scopes, s, on))}
              />
            ))}
          </fieldset>
          {local.scopes || fieldError(create.error, "scopes") ? (
            <small className="field-error" role="alert">
              {local.scopes ?? fieldError(create.error, "scopes")}
            </small>
          ) : null}
          <FormError error={create.error} fields={["name", "type", "redirectUris", "scopes"]} />
        </form>
      )}
    </Dialog>
  )
}
