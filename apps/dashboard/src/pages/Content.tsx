import { useState } from "react"
import { api, type Outputs } from "../api.ts"
import { useAction, usePaged, useQuery } from "../hooks.ts"
import { Link, useQueryState, useTitle } from "../router.tsx"
import {
  Button,
  Card,
  type Column,
  DataTable,
  Dialog,
  DialogActions,
  Empty,
  ErrorState,
  Filters,
  Form,
  FormError,
  fieldError,
  KeyValue,
  Loading,
  Mono,
  PageHeader,
  Pagination,
  Pill,
  percent,
  QueryFilters,
  Select,
  States,
  Status,
  TextArea,
  TextInput,
  Time,
} from "../ui/index.tsx"

type Item = Outputs["content"]["list"]["data"][number]
type Match = Outputs["content"]["scan"]["matches"][number]
type Takedown = Outputs["content"]["takedowns"]["list"]["data"][number]

const methodLabel: Record<string, string> = {
  "text-winnowing": "copied passages",
  "text-minhash": "near-duplicate text",
  phash: "perceptual hash",
  "phash-mirror": "mirrored image",
  watermark: "watermark",
}

/** The content registry: what the workspace registered, its matches and takedowns; register a text; scan. */
export default function Content() {
  useTitle("Content")
  const [query, setQuery] = useQueryState()
  const kind = (query.get("kind") ?? "") as "" | "text" | "image"
  const search = query.get("q") ?? ""
  const open = query.get("id") ?? undefined
  const [registering, setRegistering] = useState(false)
  // A scan may record matches of the open item: it is read again after each.
  const [scans, setScans] = useState(0)
  const list = usePaged((page) => api.content.list.query({ ...page, ...(kind ? { kind } : {}) }), [kind])
  const needle = search.trim().toLowerCase()
  const rows = list.rows.filter(
    (i) =>
      needle === "" || i.title.toLowerCase().includes(needle) || i.id.includes(needle) || i.sha256.startsWith(needle),
  )
  const columns: ReadonlyArray<Column<Item>> = [
    {
      header: "Title",
      cell: (i) => (
        <Button
          variant="ghost"
          size="sm"
          className="link-btn"
          onClick={() => setQuery({ id: i.id })}
          aria-label={`Open ${i.title}`}
        >
          {i.title}
        </Button>
      ),
    },
    { header: "Kind", cell: (i) => <Pill tone={i.kind === "text" ? "info" : "accent"}>{i.kind}</Pill> },
    { header: "SHA-256", cell: (i) => <Mono>{i.sha256.slice(0, 12)}…</Mono> },
    {
      header: "Fingerprint",
      cell: (i) =>
        "words" in i.fingerprint ? (
          <small>
            {i.fingerprint.words.toLocaleString()} words · {i.fingerprint.fingerprints} hashes
          </small>
        ) : (
          <small>
            {i.fingerprint.width}×{i.fingerprint.height} · pHash <Mono>{i.fingerprint.phash}</Mono>
          </small>
        ),
    },
    {
      header: "Protection",
      cell: (i) => (
        <span className="row">
          {i.watermark.embedded ? <Pill tone="success">watermark</Pill> : null}
          {i.c2pa.signed ? <Pill tone="success">C2PA</Pill> : null}
          {!i.watermark.embedded && !i.c2pa.signed ? <span className="muted">fingerprint</span> : null}
        </span>
      ),
    },
    { header: "Registered", cell: (i) => <Time iso={i.createdAt} /> },
  ]
  return (
    <>
      <PageHeader
        title="Content"
        description="What your agents produced, fingerprinted, so copies can be found and taken down."
        actions={
          <Button variant="primary" needs="content:write" onClick={() => setRegistering(true)}>
            Register text
          </Button>
        }
      />
      <div className="stack">
        <ScanPanel
          onScanned={() => {
            list.reload()
            setScans((n) => n + 1)
          }}
        />
        <QueryFilters
          filters={[
            {
              key: "kind",
              label: "Kind",
              options: [
                ["", "All"],
                ["text", "Texts"],
                ["image", "Images"],
              ],
            },
            { key: "q", label: "Search this page", placeholder: "Title, id or hash prefix", type: "search" },
          ]}
        />
        <States
          loading={list.loading}
          error={list.error}
          rows={list.rows}
          retry={list.reload}
          empty={
            <Empty
              title="Nothing registered"
              action={
                <Button variant="primary" needs="content:write" onClick={() => setRegistering(true)}>
                  Register text
                </Button>
              }
            >
              {kind ? "Nothing of this kind yet." : "Register a text (or an image, through the API) to protect it."}
            </Empty>
          }
        >
          {rows.length ? (
            <DataTable
              caption="Registered content"
              columns={columns}
              rows={rows}
              rowKey={(i) => i.id}
              selected={open}
            />
          ) : (
            <Empty title="Nothing matches">No item on this page matches the search.</Empty>
          )}
        </States>
        <Pagination {...list} count={rows.length} />
        {open ? <ItemDetail key={`${open}:${scans}`} id={open} onClose={() => setQuery({ id: "" })} /> : null}
      </div>
      {registering ? (
        <RegisterText
          onClose={() => setRegistering(false)}
          onRegistered={(id) => {
            setRegistering(false)
            list.reload()
            setQuery({ id })
          }}
        />
      ) : null}
    </>
  )
}

function RegisterText({ onClose, onRegistered }: { onClose: () => void; onRegistered: (id: string) => void }) {
  const [title, setTitle] = useState("")
  const [text, setText] = useState("")
  const [local, setLocal] = useState<Record<string, string>>({})
  const register = useAction(() => api.content.register.mutate({ kind: "text", title: title.trim(), text }))
  return (
    <Dialog
      open
      onClose={onClose}
      title="Register text"
      footer={<DialogActions label="Register" onCancel={onClose} form="register-text" busy={register.pending} />}
    >
      <form
        id="register-text"
        className="stack"
        noValidate
        onSubmit={async (e) => {
          e.preventDefault()
          const problems: Record<string, string> = {}
          if (!title.trim()) problems.title = "a title"
          if (text.trim().split(/\s+/).filter(Boolean).length < 12)
            problems.text = "at least 12 words: shorter copies cannot be told from chance"
          setLocal(problems)
          if (Object.keys(problems).length) return
          const item = await register.call()
          if (item) onRegistered(item.id)
        }}
      >
        <TextInput
          label="Title"
          value={title}
          onChange={(e) => setTitle(e.target.value)}
          error={local.title ?? fieldError(register.error, "title")}
        />
        <TextArea
          label="Text"
          rows={8}
          value={text}
          onChange={(e) => setText(e.target.value)}
          hint="Normalised and fingerprinted by 5-word shingles; a copied run of 12 or more words is a match."
          error={local.text ?? fieldError(register.error, "text")}
        />
        <FormError error={register.error} fields={["title", "text"]} />
      </form>
    </Dialog>
  )
}

/** Scan a candidate text against the whole registry. */
function ScanPanel({ onScanned }: { onScanned: () => void }) {
  const [text, setText] = useState("")
  const [url, setUrl] = useState("")
  const [local, setLocal] = useState<string | undefined>()
  const [result, setResult] = useState<Outputs["content"]["scan"] | undefined>()
  const scan = useAction(() => api.content.scan.mutate({ text, ...(url.trim() ? { url: url.trim() } : {}) }))
  return (
    <Card title="Scan a text">
      <Form
        label="Scan a text"
        onSubmit={async () => {
          setLocal(text.trim() ? undefined : "a text to look for")
          if (!text.trim()) return
          setResult(undefined)
          const r = await scan.call()
          if (r) {
            setResult(r)
            onScanned()
          }
        }}
      >
        <div className="stack">
          <TextArea
            label="Candidate text"
            rows={5}
            value={text}
            onChange={(e) => setText(e.target.value)}
            error={local ?? fieldError(scan.error, "text")}
          />
          <TextInput
            label="Found at (optional)"
            type="url"
            placeholder="https://…"
            value={url}
            onChange={(e) => setUrl(e.target.value)}
            error={fieldError(scan.error, "url")}
          />
        </div>
        <div className="form-actions">
          <FormError error={scan.error} fields={["text", "url"]} />
          <Button variant="primary" type="submit" needs="content:scan" busy={scan.pending}>
            Scan
          </Button>
        </div>
      </Form>
      {result ? (
        <div className="stack" role="status" data-testid="scan-result">
          {result.matches.length === 0 ? (
            <p className="muted">No registered content found in this text.</p>
          ) : (
            <>
              <p>
                <strong>{result.matches.length}</strong> match{result.matches.length === 1 ? "" : "es"}, best first.
              </p>
              <MatchTable matches={result.matches} />
            </>
          )}
        </div>
      ) : null}
    </Card>
  )
}

function MatchTable({ matches, withItem = true }: { matches: ReadonlyArray<Match>; withItem?: boolean }) {
  const columns: ReadonlyArray<Column<Match>> = [
    ...(withItem
      ? [
          {
            header: "Item",
            cell: (m: Match) => <Link to={`/content?id=${encodeURIComponent(m.contentId)}`}>{m.contentId}</Link>,
          },
        ]
      : []),
    { header: "Similarity", className: "num", cell: (m) => percent(m.similarity, 1) },
    { header: "Method", cell: (m) => methodLabel[m.method] ?? m.method },
    {
      header: "Evidence",
      cell: (m) =>
        m.spans ? (
          <small>
            {m.spans.length} passage{m.spans.length === 1 ? "" : "s"}, {m.spans.reduce((n, s) => n + s.words, 0)} words
          </small>
        ) : m.distance !== undefined ? (
          <small>{m.distance}/64 bits apart</small>
        ) : m.watermark ? (
          <small>watermark {percent(m.watermark.confidence)}</small>
        ) : (
          "—"
        ),
    },
    { header: "Recorded", cell: (m) => (m.id ? <Mono>{m.id}</Mono> : <span className="muted">below threshold</span>) },
    {
      header: "Where",
      cell: (m) => (m.url ? <small className="cell-wrap">{m.url}</small> : <span className="muted">—</span>),
    },
  ]
  return (
    <DataTable
      caption="Matches"
      columns={columns}
      rows={matches}
      rowKey={(m) => m.id ?? `${m.contentId}:${m.method}:${m.similarity}`}
    />
  )
}

function ItemDetail({ id, onClose }: { id: string; onClose: () => void }) {
  const item = useQuery(() => api.content.get.query({ id }), [id])
  const takedowns = usePaged((p) => api.content.takedowns.list.query({ id, ...p }), [id], 10)
  const [matchPage, setMatchPage] = useState(0)
  const [matchMethod, setMatchMethod] = useState("")
  if (item.error) return <ErrorState error={item.error} retry={item.reload} />
  if (!item.data) return <Loading rows={6} label="Loading the item" />
  const i = item.data
  const matches = (i.matches ?? []).filter((m) => matchMethod === "" || m.method === matchMethod)
  const PAGE = 25
  const shown = matches.slice(matchPage * PAGE, matchPage * PAGE + PAGE)
  return (
    <Card
      title={i.title}
      actions={
        <Button size="sm" variant="ghost" onClick={onClose} aria-label="Close the item">
          Close
        </Button>
      }
    >
      <div className="stack">
        <KeyValue
          items={[
            ["Id", <Mono key="i">{i.id}</Mono>],
            ["Kind", `${i.kind} (${i.mediaType})`],
            ["SHA-256", <Mono key="h">{i.sha256}</Mono>],
            [
              "Fingerprint",
              "words" in i.fingerprint
                ? `${i.fingerprint.algorithm}: ${i.fingerprint.words} words, ${i.fingerprint.fingerprints} hashes`
                : `${i.fingerprint.algorithm}: ${i.fingerprint.phash}`,
            ],
            [
              "Watermark",
              i.watermark.embedded
                ? `embedded${i.watermark.psnr ? ` (${i.watermark.psnr.toFixed(1)} dB)` : ""}`
                : "none",
            ],
            ["C2PA", i.c2pa.signed ? `signed (${i.c2pa.source ?? ""})` : "not signed"],
            [
              "Agent",
              i.agentId ? (
                <Link key="a" to={`/agents/${encodeURIComponent(i.agentId)}`}>
                  {i.agentId}
                </Link>
              ) : (
                "—"
              ),
            ],
            ["Registered", <Time key="t" iso={i.createdAt} />],
          ]}
        />
        <h3>Matches</h3>
        <Filters>
          <Select
            label="Method"
            value={matchMethod}
            onChange={(e) => {
              setMatchPage(0)
              setMatchMethod(e.target.value)
            }}
            options={[["", "All"], ...Object.entries(methodLabel)]}
          />
        </Filters>
        {shown.length ? (
          <MatchTable matches={shown} withItem={false} />
        ) : (
          <Empty title="No matches recorded">Scans that find this item above the threshold appear here.</Empty>
        )}
        {matches.length > PAGE ? (
          <div className="row">
            <Button size="sm" disabled={matchPage === 0} onClick={() => setMatchPage((p) => p - 1)}>
              ← Previous
            </Button>
            <span className="muted">
              {matchPage * PAGE + 1}–{Math.min(matches.length, (matchPage + 1) * PAGE)} of {matches.length}
            </span>
            <Button
              size="sm"
              disabled={(matchPage + 1) * PAGE >= matches.length}
              onClick={() => setMatchPage((p) => p + 1)}
            >
              Next →
            </Button>
          </div>
        ) : null}
        <h3>Takedown notices</h3>
        {takedowns.error ? (
          <ErrorState error={takedowns.error} retry={takedowns.reload} />
        ) : takedowns.loading && !takedowns.data ? (
          <Loading rows={2} />
        ) : takedowns.rows.length ? (
          <>
            <TakedownTable rows={takedowns.rows} />
            {takedowns.hasNext || takedowns.hasPrev ? (
              <Pagination {...takedowns} count={takedowns.rows.length} />
            ) : null}
          </>
        ) : (
          <Empty title="No takedown notices" />
        )}
        <TakedownForm id={id} matches={(i.matches ?? []).filter((m) => m.id !== undefined)} onSent={takedowns.reload} />
      </div>
    </Card>
  )
}

function TakedownTable({ rows }: { rows: ReadonlyArray<Takedown> }) {
  return (
    <DataTable
      caption="Takedown notices"
      rows={rows}
      rowKey={(t) => t.id}
      columns={[
        { header: "Notice", cell: (t) => <Mono>{t.id}</Mono> },
        { header: "Target", cell: (t) => <small className="cell-wrap">{t.targetUrl}</small> },
        { header: "Recipient", cell: (t) => t.recipient },
        { header: "Status", cell: (t) => <Status value={t.status} /> },
        { header: "Submitted", cell: (t) => <Time iso={t.createdAt} /> },
      ]}
    />
  )
}

function TakedownForm({ id, matches, onSent }: { id: string; matches: ReadonlyArray<Match>; onSent: () => void }) {
  const [targetUrl, setTargetUrl] = useState("")
  const [recipient, setRecipient] = useState("")
  const [matchId, setMatchId] = useState("")
  const [note, setNote] = useState("")
  const [local, setLocal] = useState<Record<string, string>>({})
  const submit = useAction(() =>
    api.content.takedowns.create.mutate({
      id,
      targetUrl: targetUrl.trim(),
      recipient: recipient.trim(),
      ...(matchId ? { matchId } : {}),
      ...(note.trim() ? { note: note.trim() } : {}),
    }),
  )
  const fields = ["targetUrl", "recipient", "matchId", "note"]
  return (
    <details>
      <summary>Submit a takedown notice</summary>
      <Form
        label="Submit a takedown notice"
        onSubmit={async () => {
          const problems: Record<string, string> = {}
          if (!/^https?:\/\/\S+$/.test(targetUrl.trim())) problems.targetUrl = "the infringing location, a URL"
          if (!/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(recipient.trim())) problems.recipient = "an e-mail address"
          setLocal(problems)
          if (Object.keys(problems).length) return
          if (await submit.call()) {
            setTargetUrl("")
            setNote("")
            onSent()
          }
        }}
      >
        <div className="form-grid">
          <TextInput
            label="Infringing URL"
            type="url"
            value={targetUrl}
            onChange={(e) => setTargetUrl(e.target.value)}
            error={local.targetUrl ?? fieldError(submit.error, "targetUrl")}
          />
          <TextInput
            label="Recipient e-mail"
            type="email"
            value={recipient}
            onChange={(e) => setRecipient(e.target.value)}
            error={local.recipient ?? fieldError(submit.error, "recipient")}
          />
          <Select
            label="Match it answers"
            value={matchId}
            onChange={(e) => setMatchId(e.target.value)}
            options={[["", "None"], ...matches.map((m) => [m.id!, `${m.id} · ${percent(m.similarity)}`] as const)]}
            error={fieldError(submit.error, "matchId")}
          />
          <TextInput
            label="Note"
            value={note}
            onChange={(e) => setNote(e.target.value)}
            error={fieldError(submit.error, "note")}
          />
        </div>
        <div className="form-actions">
          <FormError error={submit.error} fields={fields} />
          <Button type="submit" needs="content:write" busy={submit.pending}>
            Submit notice
          </Button>
        </div>
      </Form>
    </details>
  )
}
