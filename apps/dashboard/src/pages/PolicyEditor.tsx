import { useMemo, useState } from "react"
import { type ApiErrorInfo, api, type Outputs } from "../api.ts"
import { useAction, useQuery } from "../hooks.ts"
import { Link, navigate, useTitle } from "../router.tsx"
import {
  Button,
  Card,
  Empty,
  ErrorState,
  InlineError,
  Loading,
  PageHeader,
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
    setParseError(undefined)
    return policy
      ? api.policies.update.mutate({ id: policy.id, name, mode, ...body })
      : api.policies.create.mutate({ name, mode, ...body })
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

/** Calls evaluate as an agent would: the saved policies decide (a real guard call, recorded in the trail). */
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
    return api.policies.evaluate.mutate({ action, context: ctx, ...(agentId ? { agentId } : {}) })
  })
  const [result, setResult] = useState<Outputs["policies"]["evaluate"] | undefined>()
  const f = run.error?.field
  return (
    <Card title="Try it">
      <div className="stack">
        <p className="muted">
          Evaluates an action against the saved policies, as the guard would. Save first to try your changes.
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

/** The policy's versions as its audit events record them. */
function History({ policyId }: { policyId: string }) {
  const events = useQuery(
    () => api.events.list.query({ type: ["policy.created", "policy.updated"], limit: 100 }),
    [policyId],
  )
  const mine = (events.data?.data ?? []).filter((e) => e.data.policyId === policyId)
  return (
    <Card title="Version history">
      {events.error ? (
        <ErrorState error={events.error} retry={events.reload} />
      ) : events.loading ? (
        <Loading rows={3} />
      ) : mine.length === 0 ? (
        <Empty title="No history in the latest events" />
      ) : (
        <ol className="feed">
          {mine.map((e) => (
            <li key={e.id} className="feed-item">
              <span>
                <Pill tone="accent">v{String(e.data.version)}</Pill>
              </span>
              <span className="muted">
                {e.type === "policy.created"
                  ? "created"
                  : `changed ${((e.data.changes as Array<string> | undefined) ?? []).join(", ")}`}{" "}
                · {String(e.data.rules)} rules · {String(e.data.mode)}
              </span>
              <Time iso={e.timestamp} />
            </li>
          ))}
        </ol>
      )}
    </Card>
  )
}
