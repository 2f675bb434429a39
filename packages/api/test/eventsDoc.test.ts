/**
 * `docs/events.md` is generated from the event catalog; the committed file must be exactly what the
 * generator renders now, so it cannot drift. Regenerate with `npm run docs:events -w @agentgov/api`.
 */
import { readFileSync } from "node:fs"
import { SYSTEM_EVENTS } from "@agentgov/domain"
import { describe, expect, it } from "vitest"
import { EVENTS_DOC_PATH, renderEventsDoc } from "../src/eventsDoc.ts"

describe("docs/events.md", () => {
  const rendered = renderEventsDoc()

  it("is the generator's output (run `npm run docs:events -w @agentgov/api` after changing the catalog)", () => {
    expect(readFileSync(EVENTS_DOC_PATH, "utf8")).toBe(rendered)
  })

  it("has a section for every system event listing each field of its data schema", () => {
    for (const [name, def] of Object.entries(SYSTEM_EVENTS)) {
      const start = rendered.indexOf(`\n## \`${name}\`\n`)
      expect(start, name).toBeGreaterThan(0)
      const end = rendered.indexOf("\n## ", start + 1)
      const section = rendered.slice(start, end === -1 ? undefined : end)
      expect(section, name).toContain(def.emittedBy)
      for (const field of Object.keys(def.data.fields))
        expect(section, `${name}.${field}`).toContain(`| \`${field}\` |`)
    }
  })
})
