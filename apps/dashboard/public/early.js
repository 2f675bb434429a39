// The dashboard's first reads, started before its code has loaded (a classic script in <head>, from this origin as
// the CSP requires): the session, and on the overview (`/`) the overview's data for the workspace remembered from
// the last visit. Reads need no CSRF token. The app takes the responses (api.ts, `takeEarly`), or asks again.
;(() => {
  const get = (url, headers) =>
    fetch(url, { credentials: "same-origin", headers: { accept: "application/json", ...headers } })
  const early = { session: get("/auth/session") }
  early.session.catch(() => {})
  let workspaceId = null
  try {
    workspaceId = localStorage.getItem("agentgov.workspace")
  } catch {}
  if (location.pathname === "/" && workspaceId) {
    const response = get("/trpc/overview.get", { "x-agentgov-workspace": workspaceId })
    response.catch(() => {})
    early.overview = { workspaceId, response }
  }
  window.__agentgovEarly = early
})()
