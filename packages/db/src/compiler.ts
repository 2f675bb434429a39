import * as Statement from "effect/sql/Statement"

const escapeIdentifier = Statement.defaultEscape('"')

/**
 * The PostgreSQL dialect shared by both drivers: `$n` placeholders and
 * double-quoted identifiers. JSON values are passed as text and cast in SQL
 * (`${JSON.stringify(x)}::jsonb`), so no driver-specific custom fragment exists.
 */
export const pgCompiler: Statement.Compiler = Statement.makeCompiler({
  dialect: "pg",
  placeholder: (i) => `$${i}`,
  onIdentifier: escapeIdentifier,
  onRecordUpdate: (placeholders, valueAlias, valueColumns, values, returning) => [
    `(values ${placeholders}) AS ${valueAlias}${valueColumns}${returning ? ` RETURNING ${returning[0]}` : ""}`,
    returning ? values.flat().concat(returning[1]) : values.flat(),
  ],
  onCustom: () => {
    throw new Error("custom SQL fragments are not supported")
  },
})

/**
 * A JSON value as a SQL fragment. The value goes over the wire as text and is
 * cast in SQL: postgres.js would otherwise infer `jsonb` for the parameter and
 * encode an already-encoded string a second time.
 */
export const jsonb = (
  sql: (strings: TemplateStringsArray, ...args: Array<any>) => Statement.Fragment,
  value: unknown,
) => sql`${JSON.stringify(value)}::text::jsonb`
