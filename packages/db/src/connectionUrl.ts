/**
 * Splits libpq's `?host=/a/directory` (a Unix socket, as `psql` reads it) out of a
 * PostgreSQL URL: postgres.js reads the host only from the URL's authority and
 * would send an unknown query parameter to the server as a setting.
 * Every connection the project opens goes through this, so a socket URL works everywhere.
 */
export const connectionOptions = (url: string): { readonly url: string; readonly host?: string } => {
  const u = new URL(url)
  const host = u.searchParams.get("host")
  if (host === null) return { url }
  u.searchParams.delete("host")
  return { url: u.toString(), host }
}
