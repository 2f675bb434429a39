/**
 * `docs/events.md`, rendered from the event catalog (packages/domain/src/audit/eventCatalog.ts):
 * every system event's description, emitter and `data` fields with their types. A test compares
 * the committed file with this output, so the page cannot drift from the catalog.
 *
 * `node src/eventsDoc.ts --write` (or `npm run docs:events -w @agentgov/api`) rewrites the file;
 * without `--write` it prints the page.
 */
import { writeFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { EVENT_ALIASES, SYSTEM_EVENTS } from "@agentgov/domain"
import { resolve, toJsonSchema } from "./jsonSchema.ts"
import { eventDataComponent } from "./openapi.ts"

type Json = Record<string, any>

/** Where the page lives in the repository. */
export const EVENTS_DOC_PATH = fileURLToPath(new URL("../../../docs/events.md", import.meta.url))

/** Table cells: no line breaks, and a `|` would end the cell. */
const cell = (s: string) => s.replace(/\s*\n\s*/g, " ").replace(/\|/g, "\\|")

const literal = (v: unknown) => `\`${typeof v === "string" ? v : JSON.stringify(v)}\``

/** A JSON Schema as a short type phrase: `string`, `integer, 0..1000`, `` `a` or `b` ``, `array of …`. */
const typeOf = (s: Json, defs: Record<string, Json>): string => {
  s = resolve(s, defs)
  if ("const" in s) return literal(s.const)
  if (Array.isArray(s.enum)) return s.enum.map(literal).join(" or ")
  const branches = (s.anyOf ?? s.oneOf) as Array<Json> | undefined
  if (branches) return branches.map((b) => typeOf(b, defs)).join(" or ")
  switch (s.type) {
    case "array":
      return `array of ${s.items ? typeOf(s.items, defs) : "any"}`
    case "object":
      return s.properties ? "object" : "JSON object"
    case "string":
      return s.format === "date-time" ? "timestamp" : "string"
    case "integer":
    case "number": {
      // Schema.Int's own bounds (the safe integers) say nothing worth printing.
      const min = s.minimum === Number.MIN_SAFE_INTEGER ? undefined : s.minimum
      const max = s.maximum === Number.MAX_SAFE_INTEGER ? undefined : s.maximum
      const range =
        min !== undefined && max !== undefined
          ? `, ${min}..${max}`
          : min !== undefined
            ? `, ≥ ${min}`
            : max !== undefined
              ? `, ≤ ${max}`
              : ""
      return `${s.type}${range}`
    }
    case undefined:
      return "any JSON"
    default:
      return String(s.type)
  }
}

interface Row {
  readonly field: string
  readonly type: string
  readonly required: boolean
  readonly description: string
}

/** The rows of an object's fields; nested objects (and arrays of them) add `parent.field` / `parent[].field` rows. */
const rowsOf = (s: Json, defs: Record<string, Json>, prefix = ""): Array<Row> => {
  const obj = resolve(s, defs)
  const required: Array<string> = obj.required ?? []
  const rows: Array<Row> = []
  for (const [name, prop] of Object.entries((obj.properties ?? {}) as Record<string, Json>)) {
    const p = resolve(prop, defs)
    const field = `${prefix}${name}`
    rows.push({ field, type: typeOf(p, defs), required: required.includes(name), description: p.description ?? "" })
    const items = p.type === "array" && p.items ? resolve(p.items, defs) : undefined
    if (p.type === "object" && p.properties) rows.push(...rowsOf(p, defs, `${field}.`))
    else if (items?.type === "object" && items.properties) rows.push(...rowsOf(items, defs, `${field}[].`))
  }
  return rows
}

/** GitHub's heading anchor of `` `a.b.c` ``: `abc`. */
const anchor = (name: string) => name.replace(/[^a-z0-9_-]/g, "")

/** The markdown of `docs/events.md`. */
export const renderEventsDoc = (): string => {
  const names = Object.keys(SYSTEM_EVENTS) as Array<keyof typeof SYSTEM_EVENTS>
  const aliases = Object.entries(EVENT_ALIASES)
  const out: Array<string> = [
    "<!-- Generated from packages/domain/src/audit/eventCatalog.ts by `npm run docs:events -w @agentgov/api`. Do not edit: a test compares this file with the catalog. -->",
    "",
    "# System events",
    "",
    "The events the service itself records in each workspace's hash-chained audit trail (D8). Clients cannot",
    "ingest these names. Each is readable with `GET /api/v1/events`, streamed on `GET /api/v1/events/stream`",
    "and described as a webhook in the OpenAPI document (`webhooks`, `GET /api/v1/openapi.json`), where the",
    "schema of its `data` is `components.schemas.EventData_<name with dots as underscores>`.",
    "",
    "An event as the API returns it (`components.schemas.Event`) carries its type's `data` beside its id, type,",
    "timestamp, workspace, agent, actor and chain fields; a webhook delivers `{id, type, timestamp, workspaceId,",
    "data, metadata}`. The tables below give the `data` of each type. Receivers should ignore fields they do not",
    "know: fields may be added.",
    "",
    "What proves which field of an event (every event, ingested or the system's):",
    "",
    "| Field | Chain hash (D8) | Merkle leaf (signed checkpoints, inclusion proofs, export bundles) |",
    "|---|---|---|",
    "| `prevHash`, `type`, `data`, `timestamp` | yes: `SHA-256(prevHash ‖ type ‖ JCS(data) ‖ timestamp)` | yes, through `hash` |",
    "| `id`, `agentId`, `actor` (`type`, `id`), `occurredAt` | no | yes, from the workspace's `attributedFrom` on |",
    "| `sequence` | by the links (`prevHash`) | it is the leaf's position (`sequence − 1`) |",
    "| `workspaceId` | no | the checkpoint names it, and signs it |",
    "",
    "A leaf from `attributedFrom` on is `SHA-256(0x00 ‖ UTF-8 JCS({actor: {id, type}, agentId, hash, id,",
    "occurredAt}))`; before it, `SHA-256(0x00 ‖ the 32 bytes of hash)`. `attributedFrom` is 1 for a workspace",
    "created since attribution was covered, and one past its last signed checkpoint for an older one (the events",
    "signed before keep their leaves, so every checkpoint signed stays valid); proofs and bundles carry it. An",
    "attribution change is evident once a checkpoint covers the event (one is signed every minute), to",
    "`POST /events/verify`, the 6-hourly verification and `agentgov-verify`. A chain that no longer matches a",
    "signed checkpoint (shorter, or another root at its size) is not signed over: proofs and export answer 409",
    "`CHAIN_INCONSISTENT`, and `chain.invalid` is recorded.",
    "",
    ...(aliases.length > 0
      ? [
          `Aliases, accepted wherever event names are given (D7): ${aliases.map(([a, t]) => `\`${a}\` → \`${t}\``).join(", ")}.`,
          "",
        ]
      : []),
    "| Event | Description | Emitted by |",
    "|---|---|---|",
    ...names.map(
      (name) =>
        `| [\`${name}\`](#${anchor(name)}) | ${cell(SYSTEM_EVENTS[name].description)} | ${cell(SYSTEM_EVENTS[name].emittedBy)} |`,
    ),
  ]
  for (const name of names) {
    const def = SYSTEM_EVENTS[name]
    const { schema, definitions } = toJsonSchema(def.data)
    const rows = rowsOf(schema, definitions)
    out.push(
      "",
      `## \`${name}\``,
      "",
      `${def.description.charAt(0).toUpperCase()}${def.description.slice(1)}. Emitted by ${def.emittedBy}. Schema: \`${eventDataComponent(name)}\`.`,
      "",
      "| Field | Type | Required | Description |",
      "|---|---|---|---|",
      ...rows.map(
        (r) => `| \`${r.field}\` | ${cell(r.type)} | ${r.required ? "yes" : "no"} | ${cell(r.description)} |`,
      ),
    )
  }
  return `${out.join("\n")}\n`
}

if (import.meta.main) {
  if (process.argv.includes("--write")) {
    writeFileSync(EVENTS_DOC_PATH, renderEventsDoc())
    process.stdout.write(`wrote ${EVENTS_DOC_PATH}\n`)
  } else {
    process.stdout.write(renderEventsDoc())
  }
}
