import { EVENT_ALIASES, INGESTED_EVENT_TYPE, isSystemEvent } from "./eventCatalog.ts"

/** `prefix.*`: one or more lowercase segments, then `.*`. */
const PREFIX_FILTER = /^[a-z][a-z0-9_]{0,62}(\.[a-z][a-z0-9_]{0,62}){0,6}\.\*$/

/** The filters of a webhook as the append statement matches them. */
export interface CompiledFilters {
  /** `*` was given: every event. */
  readonly all: boolean
  /** Exact names, aliases replaced by their target (`enforcement.issued` → `enforcement.created`). */
  readonly types: ReadonlyArray<string>
  /** `agent.*` as `agent.`: an event matches when its name starts with one. */
  readonly prefixes: ReadonlyArray<string>
}

const NOT_A_PREFIX = "a prefix filter is lowercase dotted segments followed by `.*`"
const NOT_A_NAME = "not an event name: expected a `lowercase.dotted` name (docs/events.md), `prefix.*` or `*`"

/** Why `filter` is not an event filter (D9: an event name, `prefix.*` or `*`); undefined when it is one. */
export const eventFilterIssue = (filter: string): string | undefined =>
  filter === "*"
    ? undefined
    : filter.endsWith(".*")
      ? PREFIX_FILTER.test(filter)
        ? undefined
        : NOT_A_PREFIX
      : isSystemEvent(filter) || INGESTED_EVENT_TYPE.test(filter)
        ? undefined
        : NOT_A_NAME

/**
 * Checks and compiles event filters (D9: webhooks, `GET /events`, the stream): exact names (the
 * system's, their aliases, or any `lowercase.dotted` name clients may
 * ingest), `prefix.*` and `*`. Returns the de-duplicated filters as given and
 * their compiled form, or the index and issue of the first bad one.
 */
export const compileFilters = (
  filters: ReadonlyArray<string>,
):
  | { readonly ok: true; readonly events: ReadonlyArray<string>; readonly compiled: CompiledFilters }
  | { readonly ok: false; readonly index: number; readonly issue: string } => {
  const events: Array<string> = []
  const types = new Set<string>()
  const prefixes = new Set<string>()
  let all = false
  for (const [index, f] of filters.entries()) {
    const issue = eventFilterIssue(f)
    if (issue !== undefined) return { ok: false, index, issue }
    if (f === "*") all = true
    else if (f.endsWith(".*")) prefixes.add(f.slice(0, -1))
    else types.add(Object.hasOwn(EVENT_ALIASES, f) ? EVENT_ALIASES[f]! : f)
    if (!events.includes(f)) events.push(f)
  }
  return { ok: true, events, compiled: { all, types: [...types], prefixes: [...prefixes] } }
}

/** Whether an event type passes compiled filters: the same rule as the append statement's SQL. */
export const matchesFilters = (compiled: CompiledFilters, type: string): boolean =>
  compiled.all || compiled.types.includes(type) || compiled.prefixes.some((p) => type.startsWith(p))
