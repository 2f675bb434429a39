import { createServer } from "node:net"
import { ephemeralPorts, freePort } from "@agentgov/testing"
import { describe, expect, it } from "vitest"

/**
 * The test harness's freePort: a port a test names before its server listens. One from the kernel's ephemeral
 * range could be taken by another process's outgoing connection in between (the dashboard suite failed so once,
 * EADDRINUSE); one below it cannot.
 */
describe("freePort", () => {
  it("picks ports below the kernel's ephemeral range, above the well-known ones, free to listen on", async () => {
    const [low] = ephemeralPorts()
    const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()))
    for (const port of ports) {
      expect(port).toBeGreaterThanOrEqual(10_000)
      expect(port).toBeLessThan(low)
    }
    // Not one port for all: a random choice, so that two test files rarely pick the same.
    expect(new Set(ports).size).toBeGreaterThan(1)
    const server = createServer()
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject)
      server.listen(ports[0], "127.0.0.1", () => resolve())
    })
    await new Promise<void>((resolve) => server.close(() => resolve()))
  })
})
