type Json = Record<string, any>

const esc = (s: unknown) =>
  String(s ?? "").replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!,
  )

/** Inline code spans of the descriptions (`x`) as <code>. */
const prose = (s: unknown) => esc(s).replace(/`([^`]+)`/g, "<code>$1</code>")

const schemaText = (schema: unknown) => esc(JSON.stringify(schema, null, 2))

const HTTP_METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]

/** The path part of a server URL (`https://gov.example.com/api/v1` → `/api/v1`; `/` → ``). */
const serverPath = (url: string | undefined) => new URL(url ?? "/", "http://server").pathname.replace(/\/$/, "")

/** The example request (`x-codeSamples`: curl and the SDK call) and the example success response. */
const examples = (op: Json): string => {
  const samples = ((op["x-codeSamples"] ?? []) as Array<Json>)
    .map((c) => `<p><b>${esc(c.label)}</b></p><pre class="sample">${esc(c.source)}</pre>`)
    .join("")
  const [status, success] =
    Object.entries(op.responses as Json).find(([code, r]) => code.startsWith("2") && (r as Json).content) ?? []
  const example = (success as Json | undefined)?.content?.["application/json"]?.example
  const response =
    example === undefined ? "" : `<p><b>Response ${esc(status)}</b></p><pre class="sample">${schemaText(example)}</pre>`
  return samples || response ? `<details open><summary>Example</summary>${samples}${response}</details>` : ""
}
/**
 * A self-contained, human-readable API reference rendered from the OpenAPI
 * document on the server: no script, no external assets (the service may run
 * with no internet).
 */
export const renderReference = (doc: Json): string => {
  // A named body shows its name and its schema, not just the reference.
  const resolveRef = (s: Json): Json =>
    typeof s.$ref === "string" ? (doc.components?.schemas?.[s.$ref.split("/").pop()!] ?? s) : s
  const bodyName = (s: Json) => (typeof s.$ref === "string" ? `: <code>${esc(s.$ref.split("/").pop())}</code>` : "")
  const sections: Array<string> = []
  const byTag = new Map<string, Array<string>>()
  for (const [relative, item] of Object.entries(doc.paths as Json)) {
    // The path as a client calls it: under the path's own server, else the document's first.
    const path = `${serverPath(((item as Json).servers ?? doc.servers)?.[0]?.url)}${relative}`
    for (const [method, op] of Object.entries(item as Json)) {
      if (!HTTP_METHODS.includes(method)) continue
      const params = (op.parameters ?? []) as Array<Json>
      const rows = params
        .map(
          (p) =>
            `<tr><td><code>${esc(p.name)}</code></td><td>${esc(p.in)}</td><td>${p.required ? "yes" : "no"}</td><td>${prose(p.description ?? "")}</td></tr>`,
        )
        .join("")
      const body = op.requestBody?.content?.["application/json"]?.schema
      const responses = Object.entries(op.responses as Json)
        .map(([code, r]) => `<li><b>${esc(code)}</b> ${prose((r as Json).description)}</li>`)
        .join("")
      const html = `<section id="${esc(op.operationId)}">
<h3><span class="m ${esc(method)}">${esc(method.toUpperCase())}</span> <code>${esc(path)}</code></h3>
<p><b>${esc(op.summary)}</b> <small>(${esc(op.operationId)})</small></p>
${(op.description ?? "")
  .split("\n\n")
  .map((p: string) => `<p>${prose(p)}</p>`)
  .join("")}
${rows ? `<table><tr><th>parameter</th><th>in</th><th>required</th><th>description</th></tr>${rows}</table>` : ""}
${body ? `<details><summary>Request body${bodyName(body)}</summary><pre>${schemaText(resolveRef(body))}</pre></details>` : ""}
<details><summary>Responses</summary><ul>${responses}</ul></details>
${examples(op)}
</section>`
      const tag = (op.tags?.[0] as string) ?? "Other"
      byTag.set(tag, [...(byTag.get(tag) ?? []), html])
    }
  }
  const nav: Array<string> = []
  for (const [tag, ops] of byTag) {
    nav.push(`<a href="#tag-${esc(tag)}">${esc(tag)}</a>`)
    sections.push(`<h2 id="tag-${esc(tag)}">${esc(tag)}</h2>${ops.join("\n")}`)
  }
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${esc(doc.info.title)} reference</title>
<style>
body{font:15px/1.5 system-ui,sans-serif;max-width:960px;margin:2rem auto;padding:0 1rem;color:#1d2330}
code,pre{font:13px ui-monospace,monospace;background:#f3f4f7;border-radius:4px}code{padding:0 .25em}pre{padding:.75rem;overflow:auto}
section{border-top:1px solid #e3e5ea;padding:.5rem 0}table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #e3e5ea;padding:.2rem .5rem;text-align:left;vertical-align:top}
.m{display:inline-block;min-width:4.5em;text-align:center;border-radius:4px;color:#fff;font-size:12px;padding:.1em .4em}
.get{background:#2f7d32}.post{background:#1f5fbf}.patch{background:#8a5a00}.delete{background:#b3261e}nav a{margin-right:1rem}
</style></head><body>
<h1>${esc(doc.info.title)} <small>${esc(doc.info.version)}</small></h1>
<p>${prose(doc.info.description)}</p>
<p>Machine-readable: <a href="/api/v1/openapi.json"><code>/api/v1/openapi.json</code></a> (OpenAPI ${esc(doc.openapi)}).
Authenticate with <code>Authorization: Bearer &lt;API key&gt;</code>.
Servers: ${((doc.servers ?? []) as Array<Json>).map((s) => `<code>${esc(s.url)}</code> (${esc(s.description ?? "")})`).join(", ")}.
The examples call <code>$AGENTGOV_URL</code> with <code>curl</code>, and the SDK as <code>agentgov = new AgentGov({ apiKey, baseUrl })</code> from <code>@agentgov/sdk</code>.</p>
<nav>${nav.join("")}</nav>
${sections.join("\n")}
</body></html>`
}
