type Json = Record<string, any>

const esc = (s: unknown) =>
  String(s ?? "").replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!,
  )

/** Inline code spans of the descriptions (`x`) as <code>. */
const prose = (s: unknown) => esc(s).replace(/`([^`]+)`/g, "<code>$1</code>")

const schemaText = (schema: unknown) => esc(JSON.stringify(schema, null, 2))

/**
 * A self-contained, human-readable API reference rendered from the OpenAPI
 * document on the server: no script, no external assets (the service may run
 * with no internet).
 */
export const renderReference = (doc: Json): string => {
  const sections: Array<string> = []
  const byTag = new Map<string, Array<string>>()
  for (const [path, methods] of Object.entries(doc.paths as Json)) {
    for (const [method, op] of Object.entries(methods as Json)) {
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
${body ? `<details><summary>Request body</summary><pre>${schemaText(body)}</pre></details>` : ""}
<details><summary>Responses</summary><ul>${responses}</ul></details>
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
Authenticate with <code>Authorization: Bearer &lt;API key&gt;</code>.</p>
<nav>${nav.join("")}</nav>
${sections.join("\n")}
</body></html>`
}
