import { EVENT_ALIASES, INGESTED_EVENT_TYPE, isSystemEvent } from "../audit/eventCatalog.ts"

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

/**
 * Checks and compiles a webhook's event filters (D9): exact names (the
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
    if (f === "*") all = true
    else if (f.endsWith(".*")) {
      if (!PREFIX_FILTER.test(f))
        return { ok: false, index, issue: "a prefix filter is lowercase dotted segments followed by `.*`" }
      prefixes.add(f.slice(0, -1))
    } else if (isSystemEvent(f) || INGESTED_EVENT_TYPE.test(f)) {
      types.add(Object.hasOwn(EVENT_ALIASES, f) ? EVENT_ALIASES[f]! : f)
    } else {
      return {
        ok: false,
        index,
        issue: "not an event name: expected a `lowercase.dotted` name (docs/events.md), `prefix.*` or `*`",
      }
    }
    if (!events.includes(f)) events.push(f)
  }
  return { ok: true, events, compiled: { all, types: [...types], prefixes: [...prefixes] } }
}

/** Whether an event type passes compiled filters: the same rule as the append statement's SQL. */
export const matchesFilters = (compiled: CompiledFilters, type: string): boolean =>
  compiled.all || compiled.types.includes(type) || compiled.prefixes.some((p) => type.startsWith(p))
