import { useEffect, useMemo, useState } from "react"
import { type ApiErrorInfo, api, type Outputs } from "../api.ts"
import { useAction, usePaged, useQuery } from "../hooks.ts"
import { Link, navigate, useTitle } from "../router.tsx"
import {
  Button,
  Card,
  Empty,
  ErrorState,
  InlineError,
  Loading,
  PageHeader,
  Pagination,
  Pill,
  Select,
  Status,
  TextArea,
  TextInput,
  Time,
} from "../ui/index.tsx"

type Policy = Outputs["policies"]["get"]

const TEMPLATE = {
  rules: [
    {
      id: "no-prod-deletes",
      effect: "deny",
      actions: ["db.delete"],
      when: { field: "context.env", op: "eq", value: "prod" },
      reason: "deletes in production are not allowed",
    },
    {
      id: "refunds-need-approval",
      effect: "require_approval",
      actions: ["payments.refund"],
      approval: { timeoutSeconds: 3600 },
    },
  ],
}

/** What the page sets itself, never the document: which policy, its name and its mode. */
const PAGE_FIELDS = ["id", "name", "mode", "expectedVersion"] as const

/** The document the editor shows: everything but name, mode and the server's own fields. */
const editable = (p: Policy) => ({
  ...(p.description ? { description: p.description } : {}),
  ...(p.target ? { target: p.target } : {}),
  rules: p.rules,
})

/** A line diff (LCS) of two texts. */
const diffLines = (a: string, b: string) => {
  const x = a.split("\n")
  const y = b.split("\n")
  const dp = Array.from({ length: x.length + 1 }, () => new Array<number>(y.length + 1).fill(0))
  for (let i = x.length - 1; i >= 0; i--)
    for (let j = y.length - 1; j >= 0; j--)
      dp[i]![j] = x[i] === y[j] ? dp[i + 1]![j + 1]! + 1 : Math.max(dp[i + 1]![j]!, dp[i]![j + 1]!)
  const out: Array<{ kind: " " | "+" | "-"; line: string }> = []
  let i = 0
  let j = 0
  while (i < x.length && j < y.length) {
    if (x[i] === y[j]) out.push({ kind: " ", line: x[i++]! }) && j++
    else if (dp[i + 1]![j]! >= dp[i]![j + 1]!) out.push({ kind: "-", line: x[i++]! })
    else out.push({ kind: "+", line: y[j++]! })
  }
  while (i < x.length) out.push({ kind: "-", line: x[i++]! })
  while (j < y.length) out.push({ kind: "+", line: y[j++]! })
  return out
}

export default function PolicyEditor({ params }: { params: Record<string, string> }) {
  const id = params.id
  const existing = useQuery(async () => (id ? api.policies.get.query({ id }) : undefined), [id])
  useTitle(existing.data?.name ?? "New policy")
  if (id && existing.error) return <ErrorState error={existing.error} retry={existing.reload} />
  if (id && !existing.data) return <Loading rows={10} />
  return <Editor key={existing.data?.version ?? 0} policy={existing.data} onSaved={existing.reload} />
}

function Editor({ policy, onSaved }: { policy: Policy | undefined; onSaved: () => void }) {
  const [name, setName] = useState(policy?.name ?? "")
  const [mode, setMode] = useState<"enforce" | "monitor">(policy?.mode ?? "enforce")
  const saved = JSON.stringify(policy ? editable(policy) : TEMPLATE, null, 2)
  const [doc, setDoc] = useState(saved)
  const [parseError, setParseError] = useState<string | undefined>()
  const save = useAction(async () => {
    let body: Record<string, unknown>
    try {
      body = JSON.parse(doc) as Record<string, unknown>
    } catch (e) {
      setParseError(`Not valid JSON: ${(e as Error).message}`)
      return undefined
    }
    if (typeof body !== "object" || body === null || Array.isArray(body)) {
      setParseError("The document must be a JSON object: its rules, target and description")
      return undefined
    }
    // Which policy, its name and its mode are the page's own fields: a document naming them (an API answer
    // pasted in) must not save over another policy, or rename it behind the page's back.
    const owned = PAGE_FIELDS.find((k) => Object.hasOwn(body, k))
    if (owned !== undefined) {
      setParseError(`"${owned}" is not part of the document: the page's fields set the policy, its name and mode`)
      return undefined
    }
    setParseError(undefined)
    return policy
      ? // Against the version the page shows: someone's save meanwhile is a conflict, not silently overwritten.
        api.policies.update.mutate({ ...body, id: policy.id, name, mode, expectedVersion: policy.version })
      : api.policies.create.mutate({ ...body, name, mode })
  })
  const fieldOf = (e: ApiErrorInfo | undefined) => e?.field
  const f = fieldOf(save.error)
  const docError =
    parseError ??
    (save.error && f !== "name" && f !== "mode"
      ? `${f ? `${f}: ` : ""}${save.error.issue ?? save.error.message}`
      : undefined)
  const changes = useMemo(() => (doc === saved ? [] : diffLines(saved, doc)), [doc, saved])
  return (
    <>
      <nav aria-label="Breadcrumb" className="muted">
        <Link to="/policies">Policies</Link> / {policy?.name ?? "New policy"}
      </nav>
      <PageHeader
        title={policy ? policy.name : "New policy"}
        description={
          policy
            ? `Version ${policy.version}, updated ${new Date(policy.updatedAt).toLocaleString()}`
            : "Rules are checked in order; a deny wins."
        }
        actions={
          <Button
            variant="primary"
            busy={save.pending}
            needs="policies:write"
            onClick={async () => {
              const p = await save.call()
              if (!p) return
              if (policy) onSaved()
              else navigate(`/policies/${p.id}`)
            }}
          >
            {policy ? "Save new version" : "Create policy"}
          </Button>
        }
      />
      {policy?.invalid ? (
        <div className="error-state" role="alert">
          This version does not compile: <code>{policy.invalid.field}</code> {policy.invalid.issue}
        </div>
      ) : null}
      <div className="grid grid-2">
        <div className="stack">
          <Card title="Document">
            <div className="stack">
              <TextInput
                label="Name"
                value={name}
                onChange={(e) => setName(e.target.value)}
                error={f === "name" ? save.error?.message : undefined}
              />
              <Select
                label="Mode"
                value={mode}
                onChange={(e) => setMode(e.target.value as "enforce" | "monitor")}
                options={[
                  ["enforce", "Enforce: decisions apply"],
                  ["monitor", "Monitor: decisions are recorded, not applied"],
                ]}
                error={f === "mode" ? save.error?.message : undefined}
              />
              <TextArea
                label="Rules (JSON)"
                hint="rules: [{ id, effect: allow | deny | require_approval, actions, when?, reason?, approval? }], target?, description?"
                value={doc}
                onChange={(e) => setDoc(e.target.value)}
                rows={22}
                spellCheck={false}
                error={docError}
              />
              {save.error && !f ? <InlineError error={save.error} /> : null}
            </div>
          </Card>
          <Card title="Unsaved changes">
            {changes.length === 0 ? (
              <p className="muted">The editor matches {policy ? `version ${policy.version}` : "the template"}.</p>
            ) : (
              <section className="diff" aria-label="Changes against the saved version">
                {changes.map((c, i) => (
                  // biome-ignore lint/suspicious/noArrayIndexKey: a diff's lines are positional
                  <div key={i} className={c.kind === "+" ? "add" : c.kind === "-" ? "del" : ""}>
                    {c.kind} {c.line}
                  </div>
                ))}
              </section>
            )}
          </Card>
        </div>
        <div className="stack">
          <TryIt />
          {policy ? <History policyId={policy.id} /> : null}
        </div>
      </div>
    </>
  )
}

/**
 * What the saved policies would decide for an agent (`policies.simulate`): nothing is recorded, no approval is
 * opened and the agent's trust score does not move, since the operator is trying a policy, not acting as the agent.
 */
function TryIt() {
  const [agentId, setAgentId] = useState("")
  const [action, setAction] = useState("db.delete")
  const [context, setContext] = useState('{\n  "env": "prod"\n}')
  const [contextError, setContextError] = useState<string | undefined>()
  const run = useAction(async () => {
    let ctx: Record<string, unknown>
    try {
      ctx = JSON.parse(context || "{}") as Record<string, unknown>
    } catch (e) {
      setContextError(`Not valid JSON: ${(e as Error).message}`)
      return undefined
    }
    setContextError(undefined)
    return api.policies.simulate.mutate({ action, context: ctx, ...(agentId ? { agentId } : {}) })
  })
  const [result, setResult] = useState<Outputs["policies"]["simulate"] | undefined>()
  const f = run.error?.field
  return (
    <Card title="Try it">
      <div className="stack">
        <p className="muted">
          What the saved policies would decide for this agent, as the guard would, with nothing recorded: no event, no
          approval, no effect on its trust score. Save first to try your changes.
        </p>
        <TextInput
          label="Agent"
          value={agentId}
          onChange={(e) => setAgentId(e.target.value)}
          placeholder="agt_…"
          error={f === "agentId" ? run.error?.message : undefined}
        />
        <TextInput
          label="Action"
          value={action}
          onChange={(e) => setAction(e.target.value)}
          error={f === "action" ? run.error?.message : undefined}
        />
        <TextArea
          label="Context (JSON)"
          value={context}
          rows={5}
          onChange={(e) => setContext(e.target.value)}
          error={contextError ?? (f?.startsWith("context") ? run.error?.message : undefined)}
          spellCheck={false}
        />
        {run.error && !["agentId", "action"].includes(f ?? "") && !f?.startsWith("context") ? (
          <InlineError error={run.error} />
        ) : null}
        <div>
          <Button
            busy={run.pending}
            onClick={async () => {
              const r = await run.call()
              if (r) setResult(r)
            }}
          >
            Evaluate
          </Button>
        </div>
        {result ? (
          <div className="stack" aria-live="polite" data-testid="try-result">
            <span className="row">
              Decision <Status value={result.decision} />
            </span>
            <ul>
              {result.reasons.map((r) => (
                <li key={`${r.code}-${r.ruleId ?? ""}`}>
                  <code>{r.code}</code> {r.message}
                </li>
              ))}
            </ul>
          </div>
        ) : null}
      </div>
    </Card>
  )
}

type PolicyVersion = Outputs["policies"]["versions"]["list"]["data"][number]

/** What a version's diff compares: its whole document as saved (mode and enabled included). */
const versionText = (v: PolicyVersion) => {
  const { policyId: _p, version: _v, createdAt: _c, ...document } = v
  return JSON.stringify(document, null, 2)
}

/**
 * The policy's stored versions (`policies.versions.list`, paginated, newest first) and a diff of any two of them:
 * pick the older and the newer; versions seen on other pages stay selectable.
 */
function History({ policyId }: { policyId: string }) {
  const versions = usePaged((page) => api.policies.versions.list.query({ id: policyId, ...page }), [policyId], 10)
  const [seen, setSeen] = useState<ReadonlyMap<number, PolicyVersion>>(new Map())
  const [pick, setPick] = useState<{ from?: number; to?: number }>({})
  useEffect(() => {
    if (versions.rows.length > 0) setSeen((m) => new Map([...m, ...versions.rows.map((v) => [v.version, v] as const)]))
  }, [versions.rows])
  const known = [...seen.values()].sort((a, b) => b.version - a.version)
  const to = seen.get(pick.to ?? known[0]?.version ?? 0)
  const from = seen.get(pick.from ?? known[1]?.version ?? 0)
  const changes = useMemo(() => (from && to ? diffLines(versionText(from), versionText(to)) : []), [from, to])
  const options = known.map((v) => [String(v.version), `v${v.version}`] as const)
  return (
    <Card title="Version history">
      {versions.error ? (
        <ErrorState error={versions.error} retry={versions.reload} />
      ) : versions.loading && versions.rows.length === 0 ? (
        <Loading rows={3} />
      ) : versions.rows.length === 0 ? (
        <Empty title="No stored versions" />
      ) : (
        <div className="stack">
          <ol className="feed" aria-label="Versions">
            {versions.rows.map((v) => (
              <li key={v.version} className="feed-item">
                <span>
                  <Pill tone="accent">v{v.version}</Pill>
                </span>
                <span className="muted">
                  {v.rules.length} {v.rules.length === 1 ? "rule" : "rules"} · {v.mode}
                  {v.enabled ? "" : " · disabled"}
                </span>
                <Time iso={v.createdAt} />
              </li>
            ))}
          </ol>
          <Pagination {...versions} count={versions.rows.length} />
          {known.length < 2 ? (
            <p className="muted">One version so far: nothing to compare.</p>
          ) : (
            <>
              <div className="row">
                <Select
                  label="Compare"
                  value={String(from?.version ?? "")}
                  onChange={(e) => setPick((p) => ({ ...p, from: Number(e.target.value) }))}
                  options={options}
                />
                <Select
                  label="with"
                  value={String(to?.version ?? "")}
                  onChange={(e) => setPick((p) => ({ ...p, to: Number(e.target.value) }))}
                  options={options}
                />
              </div>
              {changes.every((c) => c.kind === " ") ? (
                <p className="muted">These versions are the same.</p>
              ) : (
                <section
                  className="diff"
                  aria-label={`Changes from version ${from?.version} to version ${to?.version}`}
                  data-testid="version-diff"
                >
                  {changes.map((c, i) => (
                    // biome-ignore lint/suspicious/noArrayIndexKey: a diff's lines are positional
                    <div key={i} className={c.kind === "+" ? "add" : c.kind === "-" ? "del" : ""}>
                      {c.kind} {c.line}
                    </div>
                  ))}
                </section>
              )}
            </>
          )}
        </div>
      )}
    </Card>
  )
}
