import { Effect } from "effect"
import type { IdPrefix } from "./ids.ts"
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

/**
 * The cursor decoder of a list of `prefix` records: a cursor of another list (or a forged one) is refused
 * as malformed rather than read as a position among these.
 */
export const idCursor =
  (prefix: IdPrefix) =>
  (cursor: string): string | InvalidCursor => {
    const id = decodeCursor(cursor)
    return id instanceof InvalidCursor || !id.startsWith(`${prefix}_`) ? new InvalidCursor({}) : id
  }

/**
 * The window a list request asks for: its limit (default 25) and the decoded
 * keyset position, or InvalidCursor. Lists fetch `limit + 1` rows after it.
 */
export const pageWindow = <C = string>(
  page: PageRequest,
  decode: (cursor: string) => C | InvalidCursor = decodeCursor as (cursor: string) => C | InvalidCursor,
): Effect.Effect<{ readonly limit: number; readonly before: C | undefined }, InvalidCursor> => {
  const before = page.cursor === undefined ? undefined : decode(page.cursor)
  return before instanceof InvalidCursor
    ? Effect.fail(before)
    : Effect.succeed({ limit: page.limit ?? DEFAULT_LIMIT, before })
}

/** Builds a page from rows fetched with `limit + 1`; the cursor is the last row's id unless `cursorOf` says otherwise. */
export const toPage = <A extends { readonly id: string }>(
  rows: ReadonlyArray<A>,
  limit: number,
  cursorOf: (last: A) => string = (last) => encodeCursor(last.id),
): Page<A> => {
  const hasMore = rows.length > limit
  const data = hasMore ? rows.slice(0, limit) : rows
  return { data, meta: { cursor: hasMore ? cursorOf(data[data.length - 1]!) : null, hasMore } }
}
