import { useState } from "react"
import { api } from "../api.ts"
import { useAction, usePaged } from "../hooks.ts"
import { useTitle } from "../router.tsx"
import { SCOPES } from "../scopes.ts"
import { useSession } from "../session.tsx"
import {
  Button,
  Card,
  Code,
  Empty,
  InlineError,
  PageHeader,
  Pill,
  SecretOnce,
  Select,
  Status,
  TextInput,
  Time,
} from "../ui/index.tsx"
import { PagedTable } from "../ui/Table.tsx"

type Role = "owner" | "admin" | "member" | "viewer"
const ROLES: ReadonlyArray<readonly [Role, string]> = [
  ["viewer", "Viewer"],
  ["member", "Member"],
  ["admin", "Admin"],
  ["owner", "Owner"],
]

export default function Members() {
  useTitle("Members and apps")
  const { workspaceId } = useSession()
  const id = workspaceId!
  const members = usePaged((p) => api.members.list.query({ id, ...p }), [id])
  const invitations = usePaged((p) => api.invitations.list.query({ id, ...p }), [id])
  const [email, setEmail] = useState("")
  const [role, setRole] = useState<Role>("member")
  const [link, setLink] = useState<string | undefined>()
  const invite = useAction(() => api.invitations.create.mutate({ id, email, role }))
  const change = useAction((userId: string, role: Role) => api.members.update.mutate({ id, userId, role }))
  const remove = useAction((userId: string) => api.members.remove.mutate({ id, userId }))
  const revoke = useAction((invitationId: string) => api.invitations.revoke.mutate({ id, invitationId }))
  return (
    <>
      <PageHeader
        title="Members and apps"
        description="Who may use this workspace, with which role, and the apps acting for them."
      />
      <Card title="Invite someone">
        <div className="filters">
          <TextInput
            label="E-mail"
            type="email"
            value={email}
            onChange={(e) => setEmail(e.target.value)}
            error={invite.error?.field === "email" ? invite.error.message : undefined}
          />
          <Select label="Role" value={role} onChange={(e) => setRole(e.target.value as Role)} options={ROLES} />
          <Button
            variant="primary"
            busy={invite.pending}
            onClick={async () => {
              const r = await invite.call()
              if (r) {
                setLink(r.link)
                setEmail("")
                invitations.reload()
              }
            }}
          >
            Invite
          </Button>
        </div>
        {invite.error?.field !== "email" ? <InlineError error={invite.error} /> : null}
        {link ? <Code>{link}</Code> : null}
      </Card>
      <InlineError error={change.error ?? remove.error ?? revoke.error} />
      <h2>Members</h2>
      <PagedTable
        caption="Members"
        rowKey={(m) => m.userId}
        paged={members}
        empty={<Empty title="No members" />}
        columns={[
          {
            header: "Person",
            cell: (m) => (
              <div>
                <strong>{m.name ?? m.email}</strong>
                <div className="muted">{m.email}</div>
              </div>
            ),
          },
          {
            header: "Role",
            cell: (m) => (
              <>
                <label className="sr-only" htmlFor={`role-${m.userId}`}>
                  Role of {m.email}
                </label>
                <select
                  id={`role-${m.userId}`}
                  value={m.role}
                  onChange={async (e) => {
                    if (await change.call(m.userId, e.target.value as Role)) members.reload()
                  }}
                >
                  {ROLES.map(([r, l]) => (
                    <option key={r} value={r}>
                      {l}
                    </option>
                  ))}
                </select>
              </>
            ),
          },
          { header: "Joined", cell: (m) => <Time iso={m.createdAt} /> },
          {
            header: "",
            cell: (m) => (
              <Button
                size="sm"
                variant="danger"
                aria-label={`Remove ${m.email}`}
                onClick={async () => {
                  if (confirm(`Remove ${m.email}?`) && (await remove.call(m.userId))) members.reload()
                }}
              >
                Remove
              </Button>
            ),
          },
        ]}
      />
      <h2>Invitations</h2>
      <PagedTable
        caption="Invitations"
        paged={invitations}
        empty={<Empty title="No invitations" />}
        columns={[
          { header: "E-mail", cell: (i) => i.email },
          { header: "Role", cell: (i) => <Pill>{i.role}</Pill> },
          { header: "Status", cell: (i) => <Status value={i.status} /> },
          { header: "Expires", cell: (i) => <Time iso={i.expiresAt} /> },
          {
            header: "",
            cell: (i) =>
              i.status === "pending" ? (
                <Button
                  size="sm"
                  onClick={async () => {
                    if (await revoke.call(i.id)) invitations.reload()
                  }}
                >
                  Revoke
                </Button>
              ) : null,
          },
        ]}
      />
      <OAuthApps />
    </>
  )
}

function OAuthApps() {
  const clients = usePaged((p) => api.oauth.clients.list.query(p), [])
  const grants = usePaged((p) => api.oauth.grants.list.query(p), [])
  const [name, setName] = useState("")
  const [redirect, setRedirect] = useState("")
  const [secret, setSecret] = useState<{ id: string; secret?: string | undefined } | undefined>()
  const create = useAction(() =>
    api.oauth.clients.create.mutate({
      name,
      redirectUris: [redirect],
      scopes: [...SCOPES.filter((s) => s.endsWith(":read"))],
    }),
  )
  const del = useAction((id: string) => api.oauth.clients.delete.mutate({ id }))
  const revoke = useAction((id: string) => api.oauth.grants.revoke.mutate({ id }))
  return (
    <>
      <h2>OAuth apps</h2>
      <Card title="Register an app">
        <div className="filters">
          <TextInput
            label="Name"
            value={name}
            onChange={(e) => setName(e.target.value)}
            error={create.error?.field === "name" ? create.error.message : undefined}
          />
          <TextInput
            label="Redirect URI"
            value={redirect}
            onChange={(e) => setRedirect(e.target.value)}
            placeholder="https://app.example.com/callback"
            error={create.error?.field?.startsWith("redirectUris") ? create.error.message : undefined}
          />
          <Button
            busy={create.pending}
            onClick={async () => {
              const r = await create.call()
              if (r) {
                setSecret({ id: r.client.id, secret: r.clientSecret })
                clients.reload()
              }
            }}
          >
            Register
          </Button>
        </div>
        <InlineError error={create.error && !create.error.field ? create.error : (del.error ?? revoke.error)} />
        {secret?.secret ? <SecretOnce label={`Client secret of ${secret.id}`} value={secret.secret} /> : null}
      </Card>
      <PagedTable
        caption="OAuth apps"
        paged={clients}
        empty={
          <Empty title="No apps registered">
            Third-party apps act for your members with the scopes they consent to.
          </Empty>
        }
        columns={[
          {
            header: "App",
            cell: (c) => (
              <div>
                <strong>{c.name}</strong>
                <div className="muted">
                  <code>{c.id}</code>
                </div>
              </div>
            ),
          },
          { header: "Type", cell: (c) => <Pill>{c.type}</Pill> },
          { header: "Redirects", cell: (c) => <span className="muted">{c.redirectUris.join(", ")}</span> },
          {
            header: "",
            cell: (c) => (
              <Button
                size="sm"
                variant="danger"
                onClick={async () => {
                  if (await del.call(c.id)) clients.reload()
                }}
              >
                Delete
              </Button>
            ),
          },
        ]}
      />
      <h2>Grants</h2>
      <PagedTable
        caption="Grants"
        paged={grants}
        empty={<Empty title="No app holds a grant" />}
        columns={[
          { header: "App", cell: (g) => g.clientName },
          { header: "User", cell: (g) => <code>{g.userId}</code> },
          { header: "Scopes", cell: (g) => <span className="muted">{g.scopes.join(", ")}</span> },
          { header: "Granted", cell: (g) => <Time iso={g.createdAt} /> },
          {
            header: "",
            cell: (g) => (
              <Button
                size="sm"
                variant="danger"
                onClick={async () => {
                  if (await revoke.call(g.id)) grants.reload()
                }}
              >
                Revoke
              </Button>
            ),
          },
        ]}
      />
    </>
  )
}
