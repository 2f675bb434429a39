/**
 * The production build of a connector app: its `src/main.ts` and the workspace sources it imports (the connector
 * SDK, by its `@agentgov/source` condition) and its vendor client, bundled by esbuild into `dist/main.mjs` (with a
 * source map and esbuild's metafile, `dist/meta.json`, which lists every input). Each app's bin runs it
 * ({@link runBundled}), built first in a child process when it is missing or older than any of its inputs, so an
 * edited source is never run stale; `npm run build` builds it at once (`node ../bundle.mjs .`).
 *
 * Why (docs/decisions.md, "Connector apps run from one bundled file"), as for the server: run from TypeScript
 * sources, a connector loads Node's type stripper (amaro: WebAssembly and code that stay in memory) and every
 * module of its vendor client one file at a time; bundled, it loads one file of plain JavaScript.
 *
 * Plain JavaScript on purpose: a bin runs it without loading the TypeScript stripper.
 */
import { builtinModules } from "node:module"
import { join, resolve } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

// Node's builtins by `process.getBuiltinModule`, not `import`: an ES module import of a builtin makes its namespace,
// which reads every export, getters included; `node:fs`'s `promises` getter loads fs/promises (3 MiB more RSS).
// `node:child_process` (3.5 MiB) only when a build is needed.
const { existsSync, mkdirSync, readFileSync, realpathSync, renameSync, statSync, writeFileSync } =
  process.getBuiltinModule("node:fs")

/**
 * Node's builtins are loaded by `require` in the bundle, not by `import` (an esbuild plugin): an ES module import
 * of a builtin makes its namespace, reading every export, getters included, and `node:http`'s `WebSocket`,
 * `CloseEvent` and `MessageEvent` getters load undici, Node's whole fetch (measured: `import "node:http"` 60.8 MiB
 * RSS idle, `require("node:http")` 47.7 MiB; the getters of `node:fs` and `node:util` ~3 MiB each). With
 * `require`, esbuild reads each export where it is used. docs/decisions.md, "Connector apps run from one bundled
 * file".
 */
const BUILTIN = new RegExp(`^(node:.+|${builtinModules.filter((m) => !m.startsWith("_")).join("|")})$`)
const BUILTIN_NAMESPACE = "agentgov-builtin"
export const builtinsByRequire = {
  name: "agentgov-builtins-by-require",
  setup(b) {
    b.onResolve({ filter: BUILTIN }, (args) =>
      // the `require` of the module below is Node's own (external); every other import of a builtin is that module
      args.namespace === BUILTIN_NAMESPACE
        ? { path: args.path, external: true }
        : { path: args.path, namespace: BUILTIN_NAMESPACE },
    )
    b.onLoad({ filter: /.*/, namespace: BUILTIN_NAMESPACE }, (args) => ({
      contents: `module.exports = require(${JSON.stringify(args.path)})`,
      loader: "js",
    }))
  },
}

export const root = resolve(import.meta.dirname, "..")

/** The files of the app in `appDir` (its package directory). */
export const paths = (appDir) => {
  const dir = resolve(typeof appDir === "string" ? appDir : fileURLToPath(appDir))
  const distDir = join(dir, "dist")
  return {
    dir,
    entry: join(dir, "src/main.ts"),
    distDir,
    bundle: join(distDir, "main.mjs"),
    meta: join(distDir, "meta.json"),
  }
}

/** Builds `<app>/dist/main.mjs`; written to temporary files and renamed, so a concurrent start never runs half a file. */
export const build = async (appDir) => {
  const p = paths(appDir)
  const esbuild = await import("esbuild")
  // An app may swap a module for another build of it (`"agentgovBundle": {"alias": {…}}` in its package.json, paths
  // relative to the repository's root): Discord's REST client for its fetch build, which does not load undici.
  const alias = JSON.parse(readFileSync(join(p.dir, "package.json"), "utf8")).agentgovBundle?.alias ?? {}
  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints: [p.entry],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node24",
    // the workspace packages from their TypeScript sources, as the tests run them
    conditions: ["@agentgov/source"],
    alias,
    plugins: [builtinsByRequire],
    write: false,
    outfile: p.bundle,
    sourcemap: "linked",
    metafile: true,
    logLevel: "warning",
    // Some dependencies are CommonJS and call require(): give the ES module bundle one.
    banner: {
      js: "import { createRequire as __agentgovRequire } from 'node:module';\nconst require = __agentgovRequire(import.meta.url);",
    },
  })
  mkdirSync(p.distDir, { recursive: true })
  const suffix = `.${process.pid}.tmp`
  for (const file of result.outputFiles) writeFileSync(file.path + suffix, file.contents)
  writeFileSync(p.meta + suffix, JSON.stringify(result.metafile))
  // The map and the metafile first, the bundle last: a bundle that is there is complete, and is not stale.
  for (const file of result.outputFiles.filter((f) => f.path !== p.bundle)) renameSync(file.path + suffix, file.path)
  renameSync(p.meta + suffix, p.meta)
  renameSync(p.bundle + suffix, p.bundle)
}

/** Whether `<app>/dist/main.mjs` is missing or older than any of its inputs (the metafile names them) or this bundler. */
export const stale = (appDir) => {
  const p = paths(appDir)
  let built
  let inputs
  try {
    built = statSync(p.bundle).mtimeMs
    // not the builtins' modules of the plugin above: they have no file
    inputs = Object.keys(JSON.parse(readFileSync(p.meta, "utf8")).inputs).filter(
      (input) => !input.startsWith(`${BUILTIN_NAMESPACE}:`),
    )
  } catch {
    return true
  }
  // this file too: a bundle built by an older bundler is built again
  return [...inputs, "connectors/bundle.mjs"].some((input) => {
    try {
      return statSync(join(root, input)).mtimeMs > built
    } catch {
      return true
    }
  })
}

/**
 * What a bin does: builds the bundle when stale (in a child process, so the connector's memory holds nothing of
 * esbuild; its output goes to stderr, stdout being the commands' JSON), then runs it.
 */
export const runBundled = async (appDir) => {
  const p = paths(appDir)
  if (stale(p.dir)) {
    const { spawnSync } = process.getBuiltinModule("node:child_process")
    const built = spawnSync(process.execPath, [fileURLToPath(import.meta.url), p.dir], { stdio: ["ignore", 2, 2] })
    if (built.status !== 0) {
      process.stderr.write(`agentgov: building ${p.bundle} failed (see above)\n`)
      process.exit(1)
    }
  }
  // a build that exited 0 and wrote nothing (a bundler that did not know it was run): one line, not a stack trace
  if (!existsSync(p.bundle)) {
    process.stderr.write(
      `agentgov: ${p.bundle} is still missing after the build (node ${process.version}); run \`npm run build\` in ${p.dir}\n`,
    )
    process.exit(1)
  }
  await import(pathToFileURL(p.bundle).href)
}

/**
 * Whether this file is the process's entry point (`node connectors/bundle.mjs <app>`), found by its path:
 * `import.meta.main` exists only from Node 22.18 and 24.2, and the apps run on 22.13 (a bin's child would build
 * nothing). Symlinks resolved on both sides (the entry may be run through one; Node loads it by its real path).
 */
const isEntryPoint = () => {
  if (!process.argv[1]) return false
  try {
    return realpathSync(process.argv[1]) === realpathSync(fileURLToPath(import.meta.url))
  } catch {
    return false
  }
}

if (isEntryPoint()) await build(process.argv[2] ?? process.cwd())
