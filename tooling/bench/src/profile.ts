import { readFileSync } from "node:fs"

/**
 * Summarises a V8 CPU profile (`--cpu-prof`, AGENTGOV_BENCH_CPU_PROF=1): self
 * time by function and by where the code lives.
 *   node tooling/bench/src/profile.ts bench-results/profiles/CPU.….cpuprofile [top]
 */

interface ProfileNode {
  readonly id: number
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number }
}
interface Profile {
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

/** node_modules/<package>, packages/<name>, apps/<name>, node:<module>, or V8's own (garbage collector) etc. */
const placeOf = (url: string, name: string) => {
  if (url === "") return name.startsWith("(") ? name : "(native)"
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)|\/((?:packages|apps|tooling)\/[^/]+)\/|^(node:[^/]+)/.exec(url)
  return m ? (m[1] ?? m[2] ?? m[3]!) : url
}

export const summariseProfile = (path: string, top = 25) => {
  const profile = JSON.parse(readFileSync(path, "utf8")) as Profile
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]))
  const byFunction = new Map<string, number>()
  const byPlace = new Map<string, number>()
  let total = 0
  profile.samples.forEach((id, i) => {
    const us = profile.timeDeltas[i] ?? 0
    const { functionName, url, lineNumber } = nodes.get(id)!.callFrame
    const fn = `${functionName || "(anonymous)"} ${url.replace(/^.*\/(node_modules|packages|apps)\//, "$1/")}:${lineNumber + 1}`
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + us)
    const place = placeOf(url, functionName)
    byPlace.set(place, (byPlace.get(place) ?? 0) + us)
    total += us
  })
  const table = (m: Map<string, number>, n: number) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(
        ([k, us]) => `${(us / 1000).toFixed(0).padStart(7)} ms ${((100 * us) / total).toFixed(1).padStart(5)}%  ${k}`,
      )
      .join("\n")
  return `profile ${path}: ${(total / 1000).toFixed(0)} ms sampled\n\nself time by place:\n${table(byPlace, 15)}\n\nself time by function:\n${table(byFunction, top)}\n`
}

if (import.meta.main) {
  const [path, top] = process.argv.slice(2)
  if (!path) {
    process.stderr.write("usage: node src/profile.ts <file.cpuprofile> [top]\n")
    process.exit(2)
  }
  process.stdout.write(summariseProfile(path, top ? Number(top) : undefined))
}
