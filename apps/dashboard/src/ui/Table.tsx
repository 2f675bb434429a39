import type { ReactNode } from "react"
import { Pagination, States } from "./index.tsx"

export interface Column<T> {
  readonly header: string
  readonly cell: (row: T) => ReactNode
  readonly className?: string
}

/** A paginated table with its loading, error and empty states (`paged` is usePaged's result). */
export function PagedTable<T extends object>({
  paged,
  columns,
  empty,
  caption,
  rowKey,
}: {
  paged: {
    rows: ReadonlyArray<T>
    loading: boolean
    error: Parameters<typeof States>[0]["error"]
    reload: () => void
    page: number
    hasPrev: boolean
    hasNext: boolean
    prev: () => void
    next: () => void
    limit: number
    setLimit: (n: number) => void
  }
  columns: ReadonlyArray<Column<T>>
  empty: ReactNode
  caption: string
  rowKey?: (row: T) => string
}) {
  return (
    <div className="stack">
      <States loading={paged.loading} error={paged.error} rows={paged.rows} retry={paged.reload} empty={empty}>
        <div className="table-wrap">
          <table>
            <caption className="sr-only">{caption}</caption>
            <thead>
              <tr>
                {columns.map((c) => (
                  <th key={c.header} scope="col" className={c.className}>
                    {c.header}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {paged.rows.map((row, i) => (
                <tr key={rowKey ? rowKey(row) : ((row as { id?: string }).id ?? String(i))}>
                  {columns.map((c) => (
                    <td key={c.header} className={c.className}>
                      {c.cell(row)}
                    </td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </States>
      {paged.error || (paged.rows.length === 0 && paged.page === 1) ? null : (
        <Pagination {...paged} count={paged.rows.length} />
      )}
    </div>
  )
}
