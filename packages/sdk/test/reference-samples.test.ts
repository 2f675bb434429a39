/**
 * The reference page shows, for every operation, its call through this SDK (the OpenAPI document's
 * `x-codeSamples`): each one must compile against the SDK's types as printed, so that a reader can
 * paste it.
 */
import { execFile } from "node:child_process"
import { mkdtemp, rm, symlink, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { promisify } from "node:util"
import { buildOpenApi, operations } from "@agentgov/api"
import { afterAll, beforeAll, expect, it } from "vitest"

type Json = Record<string, any>

const run = promisify(execFile)
const ROOT = resolve(import.meta.dirname, "../../..")
const TSC = join(ROOT, "node_modules/typescript/bin/tsc")

const doc = buildOpenApi(operations)
const samples = new Map<string, string>()
for (const item of Object.values(doc.paths as Json)) {
  for (const op of Object.values(item as Json)) {
    const sdk = ((op as Json)["x-codeSamples"] ?? []).find((c: Json) => c.label === "SDK")
    if (sdk) samples.set((op as Json).operationId, sdk.source)
  }
}

let dir: string
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "agentgov-sdk-samples-"))
  await symlink(join(ROOT, "node_modules"), join(dir, "node_modules"), "dir")
  await writeFile(join(dir, "package.json"), JSON.stringify({ type: "module" }))
  const options = {
    target: "es2024",
    module: "nodenext",
    moduleResolution: "nodenext",
    lib: ["es2024", "dom"],
    types: ["node"],
    strict: true,
    skipLibCheck: true,
    noEmit: true,
    allowImportingTsExtensions: true,
    customConditions: ["@agentgov/source"],
  }
  const file = (body: string) =>
    `import { AgentGov } from "@agentgov/sdk"\n\nconst agentgov = new AgentGov({ apiKey: "svc_ws_example", baseUrl: "http://127.0.0.1" })\n${body}\n`
  await writeFile(
    join(dir, "samples.ts"),
    file([...samples.values()].map((s) => `{\n  ${s}\n  void result\n}`).join("\n")),
  )
  await writeFile(
    join(dir, "wrong.ts"),
    file("{\n  const result: number = await agentgov.agents.get(1)\n  void result\n}"),
  )
  for (const name of ["samples", "wrong"]) {
    await writeFile(join(dir, `${name}.json`), JSON.stringify({ compilerOptions: options, files: [`${name}.ts`] }))
  }
})
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true })
})

const tsc = async (project: string) => {
  try {
    const { stdout, stderr } = await run(process.execPath, [TSC, "-p", project], { cwd: dir, timeout: 120_000 })
    return { code: 0, output: `${stdout}${stderr}` }
  } catch (e) {
    const err = e as { code?: number; stdout?: string }
    return { code: err.code ?? 1, output: err.stdout ?? "" }
  }
}

it("every catalog operation has an SDK sample", () => {
  expect([...samples.keys()].sort()).toEqual(expect.arrayContaining(operations.map((op) => op.name).sort()))
})

it("every SDK sample of the reference compiles against the SDK", async () => {
  const { code, output } = await tsc("samples.json")
  expect(output, output).toBe("")
  expect(code).toBe(0)
}, 120_000)

it("the compile check is not a rubber stamp: a wrong call fails it", async () => {
  const { code, output } = await tsc("wrong.json")
  expect(code).not.toBe(0)
  expect(output).toContain("wrong.ts(5,")
}, 120_000)
