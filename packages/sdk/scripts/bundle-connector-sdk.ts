/**
 * Runs after `tsc` (the `build` script): copies the built `@agentgov/connector-sdk` into
 * `dist/vendor/connector-sdk` and points `dist/webhooks.*` at that copy, so that the published SDK
 * installs from its tarball alone (the connector SDK is not a dependency of it, only of its build)
 * and `@agentgov/sdk/webhooks` needs no second install. The connector SDK is itself free of
 * dependencies, so the copy is complete.
 */
import { cpSync, existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const SPECIFIER = "@agentgov/connector-sdk"
const VENDORED = "./vendor/connector-sdk/index.js"

const sdkDist = fileURLToPath(new URL("../dist/", import.meta.url))
const connectorRoot = dirname(fileURLToPath(import.meta.resolve(`${SPECIFIER}/package.json`)))
const connectorDist = join(connectorRoot, "dist")
if (!existsSync(join(connectorDist, "index.js"))) {
  throw new Error(`${connectorDist}/index.js is missing: build ${SPECIFIER} first (npm run build at the root does)`)
}
const { version } = JSON.parse(readFileSync(join(connectorRoot, "package.json"), "utf8")) as { version: string }

const target = join(sdkDist, "vendor", "connector-sdk")
cpSync(connectorDist, target, { recursive: true })
writeFileSync(join(target, "VERSION"), `${SPECIFIER}@${version}\n`)

for (const file of ["webhooks.js", "webhooks.d.ts"]) {
  const path = join(sdkDist, file)
  const text = readFileSync(path, "utf8")
  const quoted = JSON.stringify(SPECIFIER)
  if (!text.includes(quoted)) throw new Error(`${path} does not import ${SPECIFIER}: update this script`)
  writeFileSync(path, text.replaceAll(quoted, JSON.stringify(VENDORED)))
}
// Nothing else may still import it (doc comments may name it): the published package does not depend on it.
const importing = /^[^*\n]*(?:\bfrom\s*|\bimport\s*\(\s*)"@agentgov\/connector-sdk(?:\/[^"]*)?"/m
const stray = readdirSync(sdkDist, { recursive: true, encoding: "utf8" }).filter(
  (f) => /\.(js|d\.ts)$/.test(f) && importing.test(readFileSync(join(sdkDist, f), "utf8")),
)
if (stray.length > 0) throw new Error(`still importing ${SPECIFIER} after bundling: ${stray.join(", ")}`)
