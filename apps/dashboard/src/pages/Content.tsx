import { useState } from "react"
import { api } from "../api.ts"
import { useAction, usePaged } from "../hooks.ts"
import { useQueryState, useTitle } from "../router.tsx"
import {
  Button,
  Card,
  Empty,
  Filters,
  InlineError,
  PageHeader,
  Pill,
  Select,
  TextArea,
  TextInput,
  Time,
} from "../ui/index.tsx"
import { PagedTable } from "../ui/Table.tsx"

export default function Content() {
  useTitle("Content")
  const [q, setQ] = useQueryState()
  const kind = (q.get("kind") ?? "") as "" | "text" | "image"
  const paged = usePaged((p) => api.content.list.query({ ...p, ...(kind ? { kind } : {}) }), [kind])
  const [title, setTitle] = useState("")
  const [text, setText] = useState("")
  const register = useAction(() => api.content.register.mutate({ kind: "text", title, text }))
  const [candidate, setCandidate] = useState("")
  const scan = useAction(() => api.content.scan.mutate({ text: candidate }))
  const [matches, setMatches] = useState<Awaited<ReturnType<typeof api.content.scan.mutate>> | undefined>()
  return (
    <>
      <PageHeader
        title="Content registry"
        description="Content your agents produce or protect, fingerprinted, and where it reappears."
      />
      <div className="grid grid-2">
        <Card title="Register a text">
          <div className="stack">
            <TextInput
              label="Title"
              value={title}
              onChange={(e) => setTitle(e.target.value)}
              error={register.error?.field === "title" ? register.error.message : undefined}
            />
            <TextArea
              label="Text"
              rows={4}
              value={text}
              onChange={(e) => setText(e.target.value)}
              error={register.error?.field === "text" ? register.error.message : undefined}
            />
            {register.error && !["title", "text"].includes(register.error.field ?? "") ? (
              <InlineError error={register.error} />
            ) : null}
            <div>
              <Button
                variant="primary"
                busy={register.pending}
                onClick={async () => {
                  if (await register.call()) {
                    setTitle("")
                    setText("")
                    paged.reload()
                  }
                }}
              >
                Register
              </Button>
            </div>
          </div>
        </Card>
        <Card title="Find matches">
          <div className="stack">
            <TextArea
              label="Candidate text"
              rows={4}
              value={candidate}
              onChange={(e) => setCandidate(e.target.value)}
            />
            <div>
              <Button busy={scan.pending} onClick={async () => setMatches(await scan.call())}>
                Scan
              </Button>
            </div>
            <InlineError error={scan.error} />
            {matches ? <pre className="json">{JSON.stringify(matches, null, 2)}</pre> : null}
          </div>
        </Card>
      </div>
      <Filters>
        <Select
          label="Kind"
          value={kind}
          onChange={(e) => setQ({ kind: e.target.value })}
          options={[
            ["", "Text and images"],
            ["text", "Text"],
            ["image", "Images"],
          ]}
        />
      </Filters>
      <PagedTable
        caption="Registered content"
        paged={paged}
        empty={<Empty title="Nothing registered">Register content to detect where it is reused.</Empty>}
        columns={[
          { header: "Title", cell: (c) => <strong>{c.title}</strong> },
          { header: "Kind", cell: (c) => <Pill>{c.kind}</Pill> },
          { header: "SHA-256", cell: (c) => <code>{c.sha256.slice(0, 16)}…</code> },
          {
            header: "Watermark",
            cell: (c) =>
              c.watermark.embedded ? <Pill tone="success">embedded</Pill> : <span className="muted">—</span>,
          },
          { header: "Registered", cell: (c) => <Time iso={c.createdAt} /> },
        ]}
      />
    </>
  )
}
