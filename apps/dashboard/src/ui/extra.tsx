import { type ReactNode, useId, useState } from "react"
import type { ApiErrorInfo } from "../api.ts"
import { Button, Dialog, InlineError } from "./index.tsx"
import "./extra.css"

/**
 * Components the configuration pages (webhooks, compliance, content, members, connectors, settings) share,
 * beside ui/index.tsx's.
 */

/** The API's error for one form field (`details.field` is the field, or a path under it: `events[0]`). */
export const fieldError = (error: ApiErrorInfo | undefined, ...fields: ReadonlyArray<string>): string | undefined => {
  if (!error?.field) return undefined
  const f = error.field
  const hit = fields.some((name) => f === name || f.startsWith(`${name}[`) || f.startsWith(`${name}.`))
  return hit ? (error.issue ?? error.message) : undefined
}

/** The form's error when no field shows it (none named, or a field the form does not have). */
export function FormError({ error, fields }: { error: ApiErrorInfo | undefined; fields: ReadonlyArray<string> }) {
  if (!error || fieldError(error, ...fields)) return null
  return <InlineError error={error} />
}

export interface Column<T> {
  readonly header: ReactNode
  readonly cell: (row: T) => ReactNode
  readonly className?: string
}

/** A data table with a caption (read by screen readers) inside the scrollable wrap the styles define. */
export function DataTable<T>({
  caption,
  columns,
  rows,
  rowKey,
  selected,
}: {
  caption: string
  columns: ReadonlyArray<Column<T>>
  rows: ReadonlyArray<T>
  rowKey: (row: T) => string
  selected?: string | undefined
}) {
  return (
    // A region that may scroll sideways (a phone): reachable by keyboard, named by its caption.
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must be reachable by keyboard
    <section className="table-wrap" aria-label={caption} tabIndex={0}>
      <table>
        <caption className="sr-only">{caption}</caption>
        <thead>
          <tr>
            {columns.map((c, i) => (
              // biome-ignore lint/suspicious/noArrayIndexKey: columns are fixed
              <th key={i} scope="col" className={c.className}>
                {c.header}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => {
            const key = rowKey(r)
            return (
              <tr key={key} aria-selected={selected === undefined ? undefined : selected === key}>
                {columns.map((c, i) => (
                  // biome-ignore lint/suspicious/noArrayIndexKey: columns are fixed
                  <td key={i} className={c.className}>
                    {c.cell(r)}
                  </td>
                ))}
              </tr>
            )
          })}
        </tbody>
      </table>
    </section>
  )
}

/** A checkbox with its label. */
export function Checkbox({
  label,
  checked,
  onChange,
  hint,
}: {
  label: ReactNode
  checked: boolean
  onChange: (checked: boolean) => void
  hint?: ReactNode
}) {
  const id = useId()
  return (
    <div className="check-field">
      <input id={id} type="checkbox" checked={checked} onChange={(e) => onChange(e.target.checked)} />
      <label htmlFor={id}>
        {label}
        {hint ? <small className="muted"> {hint}</small> : null}
      </label>
    </div>
  )
}

/** A button that asks first: a dialog with what will happen, confirmed by a second button. */
export function ConfirmButton({
  label,
  title,
  children,
  confirmLabel,
  onConfirm,
  variant = "danger",
  size = "sm",
  disabled,
}: {
  label: ReactNode
  title: string
  children: ReactNode
  confirmLabel: string
  onConfirm: () => Promise<boolean>
  variant?: "danger" | "primary" | "secondary"
  size?: "sm" | undefined
  disabled?: boolean
}) {
  const [open, setOpen] = useState(false)
  const [busy, setBusy] = useState(false)
  return (
    <>
      <Button variant={variant} size={size} onClick={() => setOpen(true)} disabled={disabled}>
        {label}
      </Button>
      {open ? (
        <Dialog
          open={open}
          onClose={() => setOpen(false)}
          title={title}
          footer={
            <>
              <Button onClick={() => setOpen(false)}>Cancel</Button>
              <Button
                variant={variant === "danger" ? "danger" : "primary"}
                busy={busy}
                onClick={async () => {
                  setBusy(true)
                  try {
                    if (await onConfirm()) setOpen(false)
                  } finally {
                    setBusy(false)
                  }
                }}
              >
                {confirmLabel}
              </Button>
            </>
          }
        >
          {children}
        </Dialog>
      ) : null}
    </>
  )
}

/** A form laid out as the dialogs and cards want it; Enter submits, the submit button shows progress. */
export function Form({
  onSubmit,
  children,
  label,
}: {
  onSubmit: () => void | Promise<void>
  children: ReactNode
  label: string
}) {
  return (
    <form
      className="stack"
      aria-label={label}
      noValidate
      onSubmit={(e) => {
        e.preventDefault()
        void onSubmit()
      }}
    >
      {children}
    </form>
  )
}

/** A percentage, 0..1 in. */
export const percent = (x: number, digits = 0) => `${(x * 100).toFixed(digits)}%`

/** `2026-11-27` (a date input's value) of a Date, in UTC. */
export const dateInput = (d: Date) => d.toISOString().slice(0, 10)

/** What `install` of a connector writes in its webhook's description: `agentgov-connector-<name>: …`. */
export const CONNECTOR_PREFIX = "agentgov-connector-"
/** The connector that registered a webhook (`slack`), from its description; undefined for other webhooks. */
export const connectorOf = (w: { description: string | null }) =>
  w.description?.startsWith(CONNECTOR_PREFIX) ? w.description.slice(CONNECTOR_PREFIX.length).split(":")[0] : undefined
