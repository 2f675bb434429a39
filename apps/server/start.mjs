/**
 * `npm start`: runs the server from its bundle (bundle.mjs), built first when it is missing or any of its
 * sources changed since, so an edited source is never run stale. The build runs in a child process, so the
 * server's memory holds nothing of it; plain JavaScript, so a start does not load the TypeScript stripper. The
 * dashboard (apps/dashboard/dist, served at `/`) is rebuilt the same way when one of its sources is newer.
 */
import { spawnSync } from "node:child_process"
import * as dashboard from "../dashboard/build.mjs"
import { bundlePath, stale } from "./bundle.mjs"

if (stale()) {
  const built = spawnSync(process.execPath, [new URL("./bundle.mjs", import.meta.url).pathname], { stdio: "inherit" })
  if (built.status !== 0) {
    process.stderr.write("agentgov: building the server failed (see above)\n")
    process.exit(1)
  }
}
// The dashboard served at `/`, rebuilt the same way (apps/dashboard/build.mjs); without it the API still serves.
if (dashboard.stale()) {
  process.stderr.write("agentgov: building the dashboard…\n")
  if (!dashboard.build())
    process.stderr.write("agentgov: building the dashboard failed; the API is served without it\n")
}
await import(bundlePath)
