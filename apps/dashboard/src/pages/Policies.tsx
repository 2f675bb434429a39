import { api } from "../api.ts"
import { usePaged } from "../hooks.ts"
import { Link, navigate, useQueryState, useTitle } from "../router.tsx"
import { Button, Empty, Filters, PagedTable, PageHeader, Pill, Select, Time } from "../ui/index.tsx"

export default function Policies() {
  useTitle("Policies")
  const [q, setQ] = useQueryState()
  const enabled = q.get("enabled") ?? ""
  const paged = usePaged(
    (p) => api.policies.list.query({ ...p, ...(enabled ? { enabled: enabled === "true" } : {}) }),
    [enabled],
  )
  return (
    <>
      <PageHeader
        title="Policies"
        description="Rules the guard applies to every action of your agents."
        actions={
          <Button variant="primary" needs="policies:write" onClick={() => navigate("/policies/new")}>
            New policy
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
        caption="Policies"
        paged={paged}
        empty={
          <Empty title="No policies yet" action={<Link to="/policies/new">Write your first policy</Link>}>
            Without a policy the workspace's default decides every action.
          </Empty>
        }
        columns={[
          {
            header: "Name",
            cell: (p) => (
              <div>
                <Link to={`/policies/${p.id}`}>
                  <strong>{p.name}</strong>
                </Link>
                {p.description ? <div className="muted">{p.description}</div> : null}
              </div>
            ),
          },
          { header: "Mode", cell: (p) => <Pill tone={p.mode === "enforce" ? "accent" : "info"}>{p.mode}</Pill> },
          { header: "Rules", cell: (p) => p.rules.length, className: "num" },
          { header: "Version", cell: (p) => `v${p.version}`, className: "num" },
          {
            header: "State",
            cell: (p) =>
              p.invalid ? (
                <Pill tone="danger">invalid</Pill>
              ) : p.enabled ? (
                <Pill tone="success">enabled</Pill>
              ) : (
                <Pill>disabled</Pill>
              ),
          },
          { header: "Updated", cell: (p) => <Time iso={p.updatedAt} /> },
        ]}
      />
    </>
  )
}
