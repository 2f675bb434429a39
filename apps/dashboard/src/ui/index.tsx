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

type Variant = "primary" | "secondary" | "danger" | "ghost"
export function Button({
  variant = "secondary",
  size,
  busy,
  children,
  ...rest
}: { variant?: Variant; size?: "sm"; busy?: boolean } & ButtonHTMLAttributes<HTMLButtonElement>) {
  return (
    <button
      type="button"
      {...rest}
      className={`btn btn-${variant}${size ? ` btn-${size}` : ""} ${rest.className ?? ""}`}
      disabled={rest.disabled || busy}
      aria-busy={busy || undefined}
    >
      {busy ? <span className="spinner" aria-hidden="true" /> : null}
      {children}
    </button>
  )
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
  return (
    <div className="error-state" role="alert">
      <div>
        <strong>Something went wrong</strong>
        <p>
          {error.message} <code>{error.code}</code>
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
  return (
    <p className="inline-error" role="alert">
      {error.message}
      {error.field ? (
        <>
          {" "}
          (<code>{error.field}</code>)
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

export function Pagination({
  page,
  hasPrev,
  hasNext,
  prev,
  next,
  limit,
  setLimit,
  count,
}: {
  page: number
  hasPrev: boolean
  hasNext: boolean
  prev: () => void
  next: () => void
  limit: number
  setLimit: (n: number) => void
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
        <Button size="sm" onClick={prev} disabled={!hasPrev} aria-label="Previous page">
          ← Previous
        </Button>
        <Button size="sm" onClick={next} disabled={!hasNext} aria-label="Next page">
          Next →
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
