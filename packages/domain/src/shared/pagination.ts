import { InvalidCursor } from "./paginationErrors.ts"

/** A page of a list, newest first; `meta.cursor` continues after the last item. */
export interface Page<A> {
  readonly data: ReadonlyArray<A>
  readonly meta: { readonly cursor: string | null; readonly hasMore: boolean }
}

export interface PageRequest {
  readonly limit?: number | undefined
  readonly cursor?: string | undefined
}

export const DEFAULT_LIMIT = 25
export const MAX_LIMIT = 100

/**
 * Cursors are keyset positions: the id of the last row seen, base64url-encoded
 * so clients treat them as opaque. Ids are time-sortable, so "older than the
 * cursor" is stable while new rows arrive.
 */
export const encodeCursor = (id: string): string => Buffer.from(`v1:${id}`).toString("base64url")

export const decodeCursor = (cursor: string): string | InvalidCursor => {
  const raw = Buffer.from(cursor, "base64url").toString("utf8")
  if (!raw.startsWith("v1:") || raw.length < 5 || !/^[a-z]+_[0-9a-z]+$/.test(raw.slice(3))) return new InvalidCursor({})
  return raw.slice(3)
}

/** Builds a page from rows fetched with `limit + 1`. */
export const toPage = <A extends { readonly id: string }>(rows: ReadonlyArray<A>, limit: number): Page<A> => {
  const hasMore = rows.length > limit
  const data = hasMore ? rows.slice(0, limit) : rows
  return { data, meta: { cursor: hasMore ? encodeCursor(data[data.length - 1]!.id) : null, hasMore } }
}
