/**
 * `npm start`: runs the server from its bundle (bundle.mjs), built first when it is missing or any of its
 * sources changed since, so an edited source is never run stale. The build runs in a child process, so the
 * server's memory holds nothing of it; plain JavaScript, so a start does not load the TypeScript stripper.
 */
import { spawnSync } from "node:child_process"
import { bundlePath, stale } from "./bundle.mjs"

if (stale()) {
  const built = spawnSync(process.execPath, [new URL("./bundle.mjs", import.meta.url).pathname], { stdio: "inherit" })
  if (built.status !== 0) {
    process.stderr.write("agentgov: building the server failed (see above)\n")
    process.exit(1)
  }
}
await import(bundlePath)
