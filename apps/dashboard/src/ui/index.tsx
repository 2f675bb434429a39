import {
  type ButtonHTMLAttributes,
  type InputHTMLAttributes,
  type ReactNode,
  type SelectHTMLAttributes,
  type TextareaHTMLAttributes,
  useEffect,
  useId,
  useRef,
  useState,
} from "react"
import { type ApiErrorInfo, PAGE_SIZES } from "../api.ts"
import { useQueryState } from "../router.tsx"
import { forbiddenText, needsRole, type ServiceScope as Scope } from "../scopes.ts"
import { useContextCan, useRefusedRole } from "../session.tsx"

type Variant = "primary" | "secondary" | "danger" | "ghost"
/**
 * A button. `needs`: the scope its action needs; a role without it gets the button disabled, with the reason
 * (`needsRole`: "Needs the admin role or above") as its tooltip and its accessible description.
 */
export function Button({
  variant = "secondary",
  size,
  busy,
  needs,
  children,
  ...rest
}: {
  variant?: Variant
  size?: "sm"
  busy?: boolean
  needs?: Scope | undefined
} & ButtonHTMLAttributes<HTMLButtonElement>) {
  const lock = useLock(needs)
  return (
    <>
      <button
        type="button"
        {...rest}
        className={`btn btn-${variant}${size ? ` btn-${size}` : ""} ${rest.className ?? ""}`}
        disabled={rest.disabled || busy}
        aria-busy={busy || undefined}
        {...lockedProps(lock)}
      >
        {busy ? <span className="spinner" aria-hidden="true" /> : null}
        {children}
      </button>
      {lock ? <LockReason lock={lock} /> : null}
    </>
  )
}

/** Why a control is off for this role (undefined when the role may use it): its reason and the id describing it. */
export const useLock = (needs: Scope | undefined) => {
  const id = useId()
  const can = useContextCan()
  if (needs === undefined || can === undefined || can(needs)) return undefined
  return { id: `${id}-needs`, reason: needsRole(needs) }
}

/** A control's attributes for a `useLock` result: disabled, its reason as tooltip and description (none when open). */
export const lockedProps = (lock: { id: string; reason: string } | undefined) =>
  lock ? { disabled: true, title: lock.reason, "aria-describedby": lock.id } : {}

/** The reason of a control `useLock` turned off, for screen readers (the control's `aria-describedby`). */
export function LockReason({ lock }: { lock: { id: string; reason: string } }) {
  return (
    <span id={lock.id} className="sr-only">
      {lock.reason}
    </span>
  )
}

/** An API error's words; a refusal for a missing scope in the role's words (`forbiddenText`). */
export const useErrorText = (error: ApiErrorInfo) => {
  const scope =
    error.code === "FORBIDDEN" && error.field === "scope" ? /^requires (\S+)$/.exec(error.issue ?? "")?.[1] : undefined
  const role = useRefusedRole(scope)
  return scope !== undefined
    ? { message: forbiddenText(role, scope), field: undefined }
    : { message: error.message, field: error.field }
}

export function PageHeader({
  title,
  description,
  actions,
}: {
  title: ReactNode
  description?: ReactNode
  actions?: ReactNode
}) {
  return (
    <header className="page-header">
      <div>
        <h1>{title}</h1>
        {description ? <p className="muted">{description}</p> : null}
      </div>
      {actions ? <div className="page-actions">{actions}</div> : null}
    </header>
  )
}

export function Card({
  title,
  actions,
  children,
  className,
}: {
  title?: ReactNode
  actions?: ReactNode
  children: ReactNode
  className?: string
}) {
  return (
    <section className={`card ${className ?? ""}`}>
      {title || actions ? (
        <div className="card-head">
          {title ? <h2>{title}</h2> : <span />}
          {actions}
        </div>
      ) : null}
      {children}
    </section>
  )
}

export type Tone = "neutral" | "success" | "warning" | "danger" | "info" | "accent"
export function Pill({ tone = "neutral", children }: { tone?: Tone; children: ReactNode }) {
  return <span className={`pill pill-${tone}`}>{children}</span>
}

export const statusTone = (s: string): Tone =>
  (
    ({
      active: "success",
      allow: "success",
      approved: "success",
      ready: "success",
      met: "success",
      success: "success",
      accepted: "success",
      compliant: "success",
      suspended: "warning",
      pending: "warning",
      generating: "info",
      appealed: "info",
      require_approval: "warning",
      partial: "warning",
      partially_compliant: "warning",
      throttle: "warning",
      warning: "warning",
      deny: "danger",
      denied: "danger",
      revoked: "danger",
      failed: "danger",
      not_met: "danger",
      non_compliant: "danger",
      suspension: "danger",
      revocation: "danger",
      deregistered: "neutral",
      expired: "neutral",
      resolved: "neutral",
    }) as Record<string, Tone>
  )[s] ?? "neutral"

export function Status({ value }: { value: string }) {
  return <Pill tone={statusTone(value)}>{value.replaceAll("_", " ")}</Pill>
}

/** Loading: a skeleton of `rows` lines, announced politely to screen readers. */
export function Loading({ rows = 5, label = "Loading" }: { rows?: number; label?: string }) {
  return (
    <div className="loading" role="status" aria-live="polite">
      <span className="sr-only">{label}…</span>
      {Array.from({ length: rows }, (_, i) => (
        // biome-ignore lint/suspicious/noArrayIndexKey: identical placeholders
        <div key={i} className="skeleton" aria-hidden="true" />
      ))}
    </div>
  )
}

export function Empty({ title, children, action }: { title: string; children?: ReactNode; action?: ReactNode }) {
  return (
    <div className="empty">
      <div className="empty-icon" aria-hidden="true">
        ∅
      </div>
      <h3>{title}</h3>
      {children ? <p className="muted">{children}</p> : null}
      {action}
    </div>
  )
}

export function ErrorState({ error, retry }: { error: ApiErrorInfo; retry?: () => void }) {
  const text = useErrorText(error)
  return (
    <div className="error-state" role="alert">
      <div>
        <strong>Something went wrong</strong>
        <p>
          {text.message} <code>{error.code}</code>
        </p>
      </div>
      {retry ? (
        <Button size="sm" onClick={retry}>
          Try again
        </Button>
      ) : null}
    </div>
  )
}

export function InlineError({ error }: { error: ApiErrorInfo | undefined }) {
  if (!error) return null
  return <InlineErrorText error={error} />
}

function InlineErrorText({ error }: { error: ApiErrorInfo }) {
  const text = useErrorText(error)
  return (
    <p className="inline-error" role="alert">
      {text.message}
      {text.field ? (
        <>
          {" "}
          (<code>{text.field}</code>)
        </>
      ) : null}
    </p>
  )
}

/** Data states in one place: loading, error, empty, or the content. */
export function States<T>({
  loading,
  error,
  rows,
  retry,
  empty,
  children,
}: {
  loading: boolean
  error: ApiErrorInfo | undefined
  rows: ReadonlyArray<T> | undefined
  retry?: () => void
  empty: ReactNode
  children: ReactNode
}) {
  if (error) return <ErrorState error={error} {...(retry ? { retry } : {})} />
  if (loading && !rows?.length) return <Loading />
  if (!rows?.length) return <>{empty}</>
  return <>{children}</>
}

/** Where a paginated list is, and how to move (usePaged's result carries these). */
export interface Paging {
  page: number
  hasPrev: boolean
  hasNext: boolean
  prev: () => void
  next: () => void
  limit: number
  setLimit: (n: number) => void
}

export function Pagination({
  page,
  hasPrev,
  hasNext,
  prev,
  next,
  limit,
  setLimit,
  count,
}: Paging & {
  count: number
}) {
  const id = useId()
  return (
    <nav className="pagination" aria-label="Pagination">
      <div className="pagination-size">
        <label htmlFor={id}>Rows</label>
        <select id={id} value={limit} onChange={(e) => setLimit(Number(e.target.value))}>
          {PAGE_SIZES.map((n) => (
            <option key={n} value={n}>
              {n}
            </option>
          ))}
        </select>
      </div>
      <span className="muted">
        Page {page} · {count} shown
      </span>
      <div className="pagination-buttons">
        <Button size="sm" onClick={prev} disabled={!hasPrev}>
          <span aria-hidden="true">←</span> Previous
        </Button>
        <Button size="sm" onClick={next} disabled={!hasNext}>
          Next <span aria-hidden="true">→</span>
        </Button>
      </div>
    </nav>
  )
}

export function Filters({ children }: { children: ReactNode }) {
  return (
    <search className="filters" aria-label="Filters">
      {children}
    </search>
  )
}

/** One filter of a list, bound to a key of the page's query string: a select (with `options`) or a text field. */
export type QueryFilter =
  | {
      readonly key: string
      readonly label: string
      readonly options: ReadonlyArray<readonly [string, string]>
      /** The value while the query has none (the list's default). */
      readonly fallback?: string
    }
  | {
      readonly key: string
      readonly label: string
      readonly placeholder?: string
      readonly hint?: string
      readonly type?: "text" | "search" | "datetime-local"
    }

/**
 * A list's filter bar: each filter reads and writes its key of the URL's query string (useQueryState), so that a
 * filtered list is a link; `children` adds the page's own controls.
 */
export function QueryFilters({ filters, children }: { filters: ReadonlyArray<QueryFilter>; children?: ReactNode }) {
  const [query, setQuery] = useQueryState()
  return (
    <Filters>
      {filters.map((f) =>
        "options" in f ? (
          <Select
            key={f.key}
            label={f.label}
            value={query.get(f.key) ?? f.fallback ?? ""}
            onChange={(e) => setQuery({ [f.key]: e.target.value })}
            options={f.options}
          />
        ) : (
          <TextFilter
            key={f.key}
            label={f.label}
            type={f.type ?? "text"}
            placeholder={f.placeholder}
            hint={f.hint}
            value={query.get(f.key) ?? ""}
            onCommit={(v) => setQuery({ [f.key]: v })}
          />
        ),
      )}
      {children}
    </Filters>
  )
}

/** How long a text filter waits after the last keystroke before it changes the URL (and so the list's request). */
export const FILTER_TYPING_PAUSE_MS = 300

/**
 * A text filter that holds what is typed and changes the query (and so requests the list) once typing pauses, on
 * Enter or on leaving the field: typing "billing-bot" is one request, not eleven. A value changed from outside (the
 * back button, a link) replaces what the field shows.
 */
function TextFilter({
  value,
  onCommit,
  ...rest
}: FieldProps & { value: string; onCommit: (v: string) => void } & Omit<
    InputHTMLAttributes<HTMLInputElement>,
    "value" | "onChange"
  >) {
  const [draft, setDraft] = useState(value)
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined)
  // The latest props, for a commit made by a timer set renders ago (another filter may have changed the query since).
  const latest = useRef({ value, onCommit })
  latest.current = { value, onCommit }
  const committed = useRef(value)
  useEffect(() => {
    // Our own commit coming back is not news: typing since then stays in the field.
    if (value !== committed.current) setDraft(value)
    committed.current = value
  }, [value])
  useEffect(() => () => clearTimeout(timer.current), [])
  const flush = (v: string) => {
    clearTimeout(timer.current)
    timer.current = undefined
    if (v === latest.current.value) return
    committed.current = v
    latest.current.onCommit(v)
  }
  return (
    <TextInput
      {...rest}
      value={draft}
      onChange={(e) => {
        const v = e.target.value
        setDraft(v)
        clearTimeout(timer.current)
        timer.current = setTimeout(() => flush(v), FILTER_TYPING_PAUSE_MS)
      }}
      onKeyDown={(e) => {
        if (e.key === "Enter") flush(draft)
      }}
      onBlur={() => {
        if (timer.current !== undefined) flush(draft)
      }}
    />
  )
}

interface FieldProps {
  label: string
  error?: string | undefined
  hint?: ReactNode
}
export function Field({
  label,
  error,
  hint,
  children,
}: FieldProps & { children: (ids: { id: string; describedBy?: string; invalid: boolean }) => ReactNode }) {
  const id = useId()
  const hintId = `${id}-hint`
  const errId = `${id}-err`
  const describedBy = [hint ? hintId : "", error ? errId : ""].filter(Boolean).join(" ") || undefined
  return (
    <div className={`field${error ? " field-invalid" : ""}`}>
      <label htmlFor={id}>{label}</label>
      {children({ id, ...(describedBy ? { describedBy } : {}), invalid: !!error })}
      {hint ? (
        <small id={hintId} className="muted">
          {hint}
        </small>
      ) : null}
      {error ? (
        <small id={errId} className="field-error" role="alert">
          {error}
        </small>
      ) : null}
    </div>
  )
}

export function TextInput({ label, error, hint, ...rest }: FieldProps & InputHTMLAttributes<HTMLInputElement>) {
  return (
    <Field label={label} error={error} hint={hint}>
      {({ id, describedBy, invalid }) => (
        <input id={id} aria-describedby={describedBy} aria-invalid={invalid || undefined} {...rest} />
      )}
    </Field>
  )
}

export function Select({
  label,
  error,
  hint,
  options,
  ...rest
}: FieldProps & { options: ReadonlyArray<readonly [string, string]> } & SelectHTMLAttributes<HTMLSelectElement>) {
  return (
    <Field label={label} error={error} hint={hint}>
      {({ id, describedBy, invalid }) => (
        <select id={id} aria-describedby={describedBy} aria-invalid={invalid || undefined} {...rest}>
          {options.map(([v, l]) => (
            <option key={v} value={v}>
              {l}
            </option>
          ))}
        </select>
      )}
    </Field>
  )
}

export function TextArea({ label, error, hint, ...rest }: FieldProps & TextareaHTMLAttributes<HTMLTextAreaElement>) {
  return (
    <Field label={label} error={error} hint={hint}>
      {({ id, describedBy, invalid }) => (
        <textarea id={id} aria-describedby={describedBy} aria-invalid={invalid || undefined} {...rest} />
      )}
    </Field>
  )
}

/** A modal dialog (the native <dialog>: focus is trapped, Escape closes). */
export function Dialog({
  open,
  onClose,
  title,
  children,
  footer,
}: {
  open: boolean
  onClose: () => void
  title: string
  children: ReactNode
  footer?: ReactNode
}) {
  const ref = useRef<HTMLDialogElement>(null)
  const titleId = useId()
  useEffect(() => {
    const d = ref.current
    if (!d) return
    if (open && !d.open) d.showModal()
    if (!open && d.open) d.close()
  }, [open])
  return (
    <dialog ref={ref} className="dialog" aria-labelledby={titleId} onClose={onClose}>
      <div className="dialog-head">
        <h2 id={titleId}>{title}</h2>
        <button type="button" className="icon-btn" aria-label="Close" onClick={onClose}>
          ×
        </button>
      </div>
      <div className="dialog-body">{children}</div>
      {footer ? <div className="dialog-foot">{footer}</div> : null}
    </dialog>
  )
}

/**
 * A dialog's footer: Cancel and its one action (busy while it runs; the submit button of `form` when one is named),
 * or only Done once the dialog shows what it made (`done`: a secret shown once).
 */
export function DialogActions({
  label,
  onCancel,
  onAction,
  form,
  busy,
  variant = "primary",
  done = false,
}: {
  label: ReactNode
  onCancel: () => void
  onAction?: () => unknown
  form?: string
  busy?: boolean
  variant?: "primary" | "danger"
  done?: boolean
}) {
  if (done)
    return (
      <Button variant="primary" onClick={onCancel}>
        Done
      </Button>
    )
  return (
    <>
      <Button onClick={onCancel}>Cancel</Button>
      <Button
        variant={variant}
        busy={busy}
        {...(form ? { type: "submit" as const, form } : { onClick: () => void onAction?.() })}
      >
        {label}
      </Button>
    </>
  )
}

export function CopyButton({ value, label = "Copy" }: { value: string; label?: string }) {
  const [copied, setCopied] = useState(false)
  return (
    <Button
      size="sm"
      onClick={async () => {
        try {
          await navigator.clipboard.writeText(value)
        } catch {
          // the clipboard may be refused (insecure context): the value stays selectable
        }
        setCopied(true)
        setTimeout(() => setCopied(false), 1500)
      }}
    >
      {copied ? "Copied" : label}
    </Button>
  )
}

export function SecretOnce({ value, label }: { value: string; label: string }) {
  return (
    <div className="secret-once">
      <p>
        <strong>{label}</strong> — shown once. Copy it now: it cannot be read again.
      </p>
      <div className="secret-row">
        <code className="secret" data-testid="secret">
          {value}
        </code>
        <CopyButton value={value} />
      </div>
    </div>
  )
}

export function Code({ children }: { children: string }) {
  return (
    <div className="code-block">
      {/* biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must be reachable by keyboard */}
      <pre tabIndex={0}>
        <code>{children}</code>
      </pre>
      <CopyButton value={children} />
    </div>
  )
}

export const formatTime = (iso: string | null | undefined) => {
  if (!iso) return "—"
  const d = new Date(iso)
  return d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" })
}

export const relative = (iso: string | null | undefined) => {
  if (!iso) return "—"
  const s = Math.round((Date.now() - Date.parse(iso)) / 1000)
  const abs = Math.abs(s)
  const [n, u] =
    abs < 60 ? [abs, "s"] : abs < 3600 ? [abs / 60, "min"] : abs < 86400 ? [abs / 3600, "h"] : [abs / 86400, "d"]
  const v = `${Math.round(n)} ${u}`
  return s >= 0 ? `${v} ago` : `in ${v}`
}

export function Time({ iso }: { iso: string | null | undefined }) {
  if (!iso) return <span className="muted">—</span>
  return (
    <time dateTime={iso} title={formatTime(iso)}>
      {relative(iso)}
    </time>
  )
}

export function Mono({ children }: { children: ReactNode }) {
  return <code className="mono">{children}</code>
}

export function KeyValue({ items }: { items: ReadonlyArray<readonly [string, ReactNode]> }) {
  return (
    <dl className="kv">
      {items.map(([k, v]) => (
        <div key={k}>
          <dt>{k}</dt>
          <dd>{v}</dd>
        </div>
      ))}
    </dl>
  )
}

export function Tabs<T extends string>({
  tabs,
  value,
  onChange,
  label,
}: {
  tabs: ReadonlyArray<readonly [T, string]>
  value: T
  onChange: (t: T) => void
  label: string
}) {
  return (
    <div className="tabs" role="tablist" aria-label={label}>
      {tabs.map(([t, l]) => (
        <button
          key={t}
          type="button"
          role="tab"
          aria-selected={t === value}
          tabIndex={t === value ? 0 : -1}
          className="tab"
          onClick={() => onChange(t)}
          onKeyDown={(e) => {
            const i = tabs.findIndex(([x]) => x === value)
            const step = e.key === "ArrowRight" ? 1 : e.key === "ArrowLeft" ? -1 : 0
            if (step) {
              const next = tabs[(i + step + tabs.length) % tabs.length]![0]
              onChange(next)
              ;(
                e.currentTarget.parentElement?.querySelectorAll("button")[tabs.findIndex(([x]) => x === next)] as
                  | HTMLButtonElement
                  | undefined
              )?.focus()
            }
          }}
        >
          {l}
        </button>
      ))}
    </div>
  )
}

/* Forms, tables, confirmations and helpers of the configuration pages (webhooks, compliance, content, members, connectors, settings). */

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

/** A paginated table with its loading, error and empty states (`paged` is usePaged's result). */
export function PagedTable<T extends object>({
  paged,
  columns,
  empty,
  caption,
  rowKey = (row) => String((row as { id?: unknown }).id),
}: {
  paged: Paging & {
    rows: ReadonlyArray<T>
    loading: boolean
    error: ApiErrorInfo | undefined
    reload: () => void
  }
  columns: ReadonlyArray<Column<T>>
  empty: ReactNode
  caption: string
  rowKey?: (row: T) => string
}) {
  return (
    <div className="stack">
      <States loading={paged.loading} error={paged.error} rows={paged.rows} retry={paged.reload} empty={empty}>
        <DataTable caption={caption} columns={columns} rows={paged.rows} rowKey={rowKey} />
      </States>
      {paged.error || (paged.rows.length === 0 && paged.page === 1) ? null : (
        <Pagination {...paged} count={paged.rows.length} />
      )}
    </div>
  )
}

/** A checkbox with its label. */
/** `set` with `item` in it (`on`) or not: a new set, for a checkbox list's state. */
export const toggled = <T,>(set: ReadonlySet<T>, item: T, on: boolean): ReadonlySet<T> => {
  const next = new Set(set)
  if (on) next.add(item)
  else next.delete(item)
  return next
}

/** A labelled checkbox; with `needs`, off (and unticked) for a role without that scope, saying which role holds it. */
export function Checkbox({
  label,
  checked,
  onChange,
  hint,
  needs,
}: {
  label: ReactNode
  checked: boolean
  onChange: (checked: boolean) => void
  hint?: ReactNode
  needs?: Scope | undefined
}) {
  const id = useId()
  const lock = useLock(needs)
  return (
    <div className="check-field">
      <input
        id={id}
        type="checkbox"
        checked={checked && lock === undefined}
        onChange={(e) => onChange(e.target.checked)}
        {...lockedProps(lock)}
      />
      <label htmlFor={id}>
        {label}
        {hint ? <small className="muted"> {hint}</small> : null}
      </label>
      {lock ? <LockReason lock={lock} /> : null}
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
  needs,
}: {
  label: ReactNode
  title: string
  children: ReactNode
  confirmLabel: string
  onConfirm: () => Promise<boolean>
  variant?: "danger" | "primary" | "secondary"
  size?: "sm" | undefined
  disabled?: boolean
  /** The scope the action needs: see Button. */
  needs?: Scope
}) {
  const [open, setOpen] = useState(false)
  const [busy, setBusy] = useState(false)
  return (
    <>
      <Button variant={variant} size={size} onClick={() => setOpen(true)} disabled={disabled} needs={needs}>
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
